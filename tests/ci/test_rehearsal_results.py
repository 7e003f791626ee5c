"""The jobs that turn a GPU run's files into a pull request, a comment and a trend, rehearsed in a
fresh clone through tests/ci/rehearse.py: the baseline refresh's ``pull-request`` job
(baseline-refresh.yml) and both jobs of gpu-perf-results.yml. Their input is what the GPU jobs
upload: baseline files, and the JSON report of a real GPU run (evidence/, an H200's whole suite).

What needs GitHub (downloading artifacts, opening the pull request, the API calls of the comment,
pushing the trend) is emulated or skipped, each with its reason; every ``run:`` step runs as written,
with ``gpuperf`` from the clone.
"""
from __future__ import annotations

import fnmatch
import gzip
import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.ci.rehearse import Runner, StepResult, rehearse
from tests.ci.test_rehearsal import ROOT, _checkout, _clone, _setup_python

pytestmark = pytest.mark.build

WORKFLOWS = ROOT / ".github" / "workflows"
H200 = "nvidia-h200-sm90-132sm-140gib"
SUITE_REPORT = ROOT / "evidence" / "2026-11-27-h200-b634-suite.json.gz"
INSTALL = (
    'mkdir -p "$RUNNER_TEMP/gpuperf-bin"\n'
    "printf '#!/bin/sh\\nexec python -m pytest_gpuperf \"$@\"\\n' > \"$RUNNER_TEMP/gpuperf-bin/gpuperf\"\n"
    'chmod +x "$RUNNER_TEMP/gpuperf-bin/gpuperf"\n'
    'echo "$RUNNER_TEMP/gpuperf-bin" >> "$GITHUB_PATH"\n',
    "offline: pip would install the clone from PyPI's packages; `gpuperf` runs the clone's CLI instead",
)
NEEDS_GITHUB = "needs GitHub's API"


def _needs_git() -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("the rehearsal clones this checkout: it needs git and a git checkout")


def _download_from(artifacts: Path) -> Callable[[Runner, dict[str, Any]], str]:
    """actions/download-artifact over ``artifacts/<artifact name>/``, laid out as the action lays
    them out: ``name:`` extracts that artifact into ``path``; ``pattern:`` extracts each matching
    artifact into ``path/<artifact name>/`` (without merge-multiple), even when only one matches."""

    def download(runner: Runner, options: dict[str, Any]) -> str:
        dest = Path(options["path"])
        if options.get("name"):
            shutil.copytree(artifacts / options["name"], dest, dirs_exist_ok=True)
            return f"artifact {options['name']} into path"
        assert options.get("merge-multiple", "false") == "false"
        names = sorted(a.name for a in artifacts.iterdir() if fnmatch.fnmatchcase(a.name, options["pattern"]))
        for name in names:
            shutil.copytree(artifacts / name, dest / name, dirs_exist_ok=True)
        return f"artifacts {names} into path/<name>/"

    return download


def _run(workflow: str, job: str, base: Path, contexts: dict[str, Any], artifact: Path,
         uses: dict[str, Callable[[Runner, dict[str, Any]], str]] | None = None,
         skip: dict[str, str] | None = None) -> tuple[list[StepResult], Path, Path]:
    workspace = _clone(base / "repo")
    temp = base / "runner-temp"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GITHUB_", "GPU_PERF_"))}
    results = rehearse(
        WORKFLOWS / workflow, job, workspace=workspace, temp=temp,
        contexts={**contexts, "runner": {"temp": str(temp)}},
        replace={"Install gpuperf": INSTALL}, skip=skip or {}, base_env=env,
        uses={"actions/checkout": _checkout, "actions/setup-python": _setup_python,
              "actions/download-artifact": _download_from(artifact), **(uses or {})},
    )
    return results, workspace, temp


def _outcomes(results: list[StepResult]) -> dict[str, str]:
    failed = [r for r in results if r.outcome == "failed"]
    return {r.name: r.outcome for r in results} | ({"failed": "\n".join(f"{r.name}: {r.output[-3000:]}" for r in failed)}
                                                   if failed else {})


# -- baseline-refresh.yml: the pull-request job ------------------------------------------------
REFRESH_CONTEXTS: dict[str, Any] = {
    "github": {"event_name": "workflow_dispatch", "repository": "owner/pytest-gpuperf", "run_id": 3,
               "server_url": "https://github.invalid", "token": "rehearsal-token-not-a-secret"},
    "inputs": {"arch": "sm90", "runner": "", "tests": "tests/gemm_schedules/test_perf.py"},
}
CHANGED_KEY = "test_pingpong_vs_cooperative[square8192]::pingpong"


def _refresh_artifact(artifacts: Path, *, entry_change: Callable[[dict[str, Any]], None]) -> Path:
    """What the record job uploads: the baselines folder after the run, and gpu.csv."""
    folder = artifacts / "baseline-refresh-sm90"
    shutil.copytree(ROOT / "baselines", folder / "baselines")
    path = folder / "baselines" / H200 / "tests.gemm_schedules.test_perf.json"
    data = json.loads(path.read_text())
    entry_change(data["entries"][CHANGED_KEY])
    path.write_text(json.dumps(data, indent=1))
    (folder / "baselines" / H200 / "notes.txt").write_text("not JSON: the job deletes it\n")
    (folder / "gpu.csv").write_text("index, name, driver_version\n0, NVIDIA H200, 580.159.04\n")
    return artifacts


def _slower(entry: dict[str, Any]) -> None:
    for key in ("median_s", "ci_low_s", "ci_high_s"):
        entry[key] *= 1.3


def _create_pull_request(seen: dict[str, Any]) -> Callable[[Runner, dict[str, Any]], str]:
    def create(runner: Runner, options: dict[str, Any]) -> str:
        seen.update(options, body=Path(options["body-path"]).read_text())
        return "records what it would commit and the body"

    return create


def test_the_refresh_proposes_re_recorded_baselines_with_their_table(tmp_path: Path) -> None:
    _needs_git()
    seen: dict[str, Any] = {}
    artifact = _refresh_artifact(tmp_path / "artifact", entry_change=_slower)
    results, workspace, temp = _run("baseline-refresh.yml", "pull-request", tmp_path, REFRESH_CONTEXTS, artifact,
                                    uses={"peter-evans/create-pull-request": _create_pull_request(seen)})
    outcomes = _outcomes(results)
    assert "failed" not in outcomes, outcomes["failed"]
    assert outcomes["Apply and validate the new baselines"] == "ran"
    assert seen["add-paths"] == "baselines/**/*.json" and seen["branch"] == "baseline-refresh/sm90"
    body = seen["body"]
    assert "python -m pytest --gpu-perf --gpu-perf-update-baselines tests/gemm_schedules/test_perf.py" in body
    assert "0, NVIDIA H200, 580.159.04" in body and "## Before and after" in body
    changed = next(line for line in body.splitlines() if CHANGED_KEY in line and H200 in line)
    assert "+30.0%" in changed, changed
    assert not (workspace / "baselines" / H200 / "notes.txt").exists()  # only JSON files are applied


def test_the_refresh_refuses_an_invalid_baseline_file(tmp_path: Path) -> None:
    _needs_git()
    seen: dict[str, Any] = {}

    def broken(entry: dict[str, Any]) -> None:
        entry["median_s"] = -1.0

    artifact = _refresh_artifact(tmp_path / "artifact", entry_change=broken)
    results, _, _ = _run("baseline-refresh.yml", "pull-request", tmp_path, REFRESH_CONTEXTS, artifact,
                         uses={"peter-evans/create-pull-request": _create_pull_request(seen)})
    step = next(r for r in results if r.name == "Apply and validate the new baselines")
    assert step.outcome == "failed"
    assert "tests.gemm_schedules.test_perf.json" in step.output and "median_s" in step.output, step.output[-2000:]
    assert not seen  # no pull request after a failed step


# -- gpu-perf-results.yml ----------------------------------------------------------------------
def _results_contexts(event: str, server: Path | None = None) -> dict[str, Any]:
    return {
        "github": {"event_name": "workflow_run", "repository": "owner/pytest-gpuperf", "run_id": 4,
                   "token": "rehearsal-token-not-a-secret", "server_url": str(server or "https://github.invalid"),
                   "event": {"workflow_run": {"event": event, "head_branch": "main", "conclusion": "failure",
                                              "id": 9, "head_sha": "0723de90d4041093edcfd4ea8ba0dede4bd80aa5",
                                              "html_url": "https://github.invalid/run/9",
                                              "pull_requests": [{"number": 12}]}}},
        "vars": {"GPU_PERF_PR_COMMENT": "true"},
        "matrix": {"arch": "sm90"},
    }


def _gpu_job_artifact(folder: Path) -> Path:
    """The sm90 GPU job's artifact (ci.yml uploads it as gpu-perf-<arch>)."""
    job = folder / "gpu-perf-sm90"
    job.mkdir(parents=True)
    (job / "gpu-perf-report.json").write_bytes(gzip.decompress(SUITE_REPORT.read_bytes()))
    return folder


def test_the_pull_request_comment_puts_the_failed_gate_first(tmp_path: Path) -> None:
    _needs_git()
    artifact = _gpu_job_artifact(tmp_path / "artifact")
    results, _, temp = _run("gpu-perf-results.yml", "comment", tmp_path, _results_contexts("pull_request"), artifact,
                            skip={"Post or update the comment": NEEDS_GITHUB})
    outcomes = _outcomes(results)
    assert "failed" not in outcomes, outcomes["failed"]
    assert outcomes["Comment body"] == "ran" and outcomes["Post or update the comment"] == "skipped"
    comment = (temp / "comment.md").read_text()
    assert comment.startswith("<!-- gpu-perf-comment -->\nGPU performance gates of 0723de90d404")
    assert len(comment) <= 65536
    # the H200 run's failed gates (the torch.compile example, the megakernel's xfailed target)
    # come before every passing row
    rows = [line for line in comment.splitlines() if line.startswith("| test_")]
    assert rows[0].startswith("| test_compiled_fuses |") and "| fail/" in rows[0], rows[:3]
    first_pass = next(i for i, row in enumerate(rows) if row.endswith("| pass/pass |"))
    assert all("fail" in row for row in rows[:first_pass]), rows[:first_pass]


def test_the_trend_exports_every_measured_variant(tmp_path: Path) -> None:
    _needs_git()
    artifact = _gpu_job_artifact(tmp_path / "artifact")
    pushed: dict[str, Any] = {}

    def benchmark_action(runner: Runner, options: dict[str, Any]) -> str:
        pushed.update(options, data=json.loads(Path(options["output-file-path"]).read_text()))
        return "reads the exported file; pushing to gh-pages needs GitHub"

    server = _history_remote(tmp_path / "server")
    results, _, temp = _run("gpu-perf-results.yml", "trend", tmp_path, _results_contexts("push", server), artifact,
                            uses={"benchmark-action/github-action-benchmark": benchmark_action})
    outcomes = _outcomes(results)
    assert "failed" not in outcomes, outcomes["failed"]
    assert outcomes["Export for github-action-benchmark"] == "ran"
    # The history: created on its branch by the first run, one measurement row per measured variant.
    assert outcomes["Ingest into the history"] == "ran" and outcomes["Change points"] == "ran"
    assert outcomes["Comment on the commit"] == outcomes["Fail on a slowdown from code"] == "not run (if: false)"
    assert "1 run(s) added, 0 already" in _step(results, "Ingest into the history").output
    assert _history_rows(server) == 275
    assert "No change point in" in (temp / "changes.md").read_text()
    assert pushed["tool"] == "customSmallerIsBetter" and pushed["name"] == "gpu-perf sm90"
    data = pushed["data"]
    report = json.loads(gzip.decompress(SUITE_REPORT.read_bytes()))
    measured = [m for t in report["tests"] for m in t.get("measurements", ()) if "measurement" in m]
    assert len(data) == len(measured) > 250
    assert len({e["name"] for e in data}) == len(data)  # one trend line each, a repeated key numbered
    assert all(e["unit"] == "us" and e["value"] > 0 for e in data), data[:3]


def _step(results: list[StepResult], name: str) -> StepResult:
    return next(r for r in results if r.name == name)


def _history_remote(server: Path) -> Path:
    """A bare repository where the workflow's REMOTE (server_url/repository.git) points."""
    import subprocess

    bare = server / "owner" / "pytest-gpuperf.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    return server


def _history_rows(server: Path) -> int:
    """The measurement rows of history.sqlite on the remote's gpu-perf-history branch, which must
    hold one commit."""
    import sqlite3
    import subprocess

    bare = server / "owner" / "pytest-gpuperf.git"
    log = subprocess.run(["git", "-C", str(bare), "log", "--format=%s", "gpu-perf-history"], check=True,
                         capture_output=True, text=True).stdout.splitlines()
    assert len(log) == 1 and log[0].startswith("gpu-perf history after sm90 of 0723de90d404"), log
    blob = subprocess.run(["git", "-C", str(bare), "show", "gpu-perf-history:history.sqlite"], check=True,
                          capture_output=True).stdout
    path = server / "history.sqlite"
    path.write_bytes(blob)
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT count(*) FROM measurements").fetchone()[0])


def test_the_trend_ingests_a_run_once_and_keeps_one_commit(tmp_path: Path) -> None:
    """A re-run of the same CI run: the report is in the history already; the branch still holds
    one commit (replaced, with the same database content)."""
    _needs_git()
    artifact = _gpu_job_artifact(tmp_path / "artifact")
    server = _history_remote(tmp_path / "server")
    emulate = {"benchmark-action/github-action-benchmark": lambda runner, options: "charts need GitHub"}
    for attempt in ("first", "second"):
        results, _, _ = _run("gpu-perf-results.yml", "trend", tmp_path / attempt, _results_contexts("push", server),
                             artifact, uses=emulate)
        outcomes = _outcomes(results)
        assert "failed" not in outcomes, outcomes["failed"]
    assert "0 run(s) added, 1 already" in _step(results, "Ingest into the history").output
    assert _history_rows(server) == 275
