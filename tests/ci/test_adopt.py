"""Adopting the plugin as a user would (docs/adopt.md), on the fake GPU: a wheel built from this
checkout is installed into a fresh virtual environment outside the repository, and a small project
of its own (README's pyproject settings and first test, verbatim; a conftest that installs the fake
GPU; an empty baselines folder and docs/adopt.md's .gitignore lines) runs its value tests, its gates
without baselines, a baseline update, `gpuperf check`, the gates against those baselines, and a
planted slowdown that the regression gate fails. README's install snippet must name extras the
wheel has, and the template workflow of docs/adopt.md must pass the workflow checks.

Offline: the wheel is built without build isolation (the `test` extra brings setuptools), and the
new environment gets the wheel's dependencies from this one: the distributions its requirements
need are linked into a folder that a .pth file puts on the new environment's path, so pip installs
the wheel with `--no-index` and finds every dependency satisfied. The fake GPU runs README's CuPy
launches on NumPy, which stands in for CuPy in that project's conftest. It costs about 30 s of CPU
time (a wheel build, a virtual environment, four pytest runs and two gpuperf calls), so it stays
in the default tier; on a loaded two-core machine its wall time is two to three times that.
"""
from __future__ import annotations

import importlib.metadata as metadata
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.build

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
ADOPT = (ROOT / "docs" / "adopt.md").read_text(encoding="utf-8")
TEMPLATE = ROOT / "docs" / "templates" / "gpu-perf.yml"
EXTRAS = ("hypothesis",)  # what the first test needs besides the package; `gpu` (CuPy) the fake replaces

# The user's own conftest: the fake GPU through the plugin's hooks (docs/writing-tests.md), and
# NumPy standing in for CuPy so that README's launches run on the host.
CONFTEST = textwrap.dedent(
    """
    import os
    import sys
    import types

    import numpy

    from pytest_gpuperf.testing import FakeBackend, fake_device

    cupy = types.ModuleType("cupy")  # NumPy standing in for CuPy: the fake GPU's launches run on the host
    for name in ("asarray", "empty_like", "multiply", "copyto", "float32", "random"):
        setattr(cupy, name, getattr(numpy, name))
    sys.modules["cupy"] = cupy


    def pytest_gpuperf_device(config, ordinal):
        return fake_device((9, 0), name="Fake GPU", ordinal=ordinal)


    def pytest_gpuperf_device_count(config):
        return 1


    def pytest_gpuperf_backend(config, device):
        fused = 10e-6 * float(os.environ.get("FAKE_FUSED_SLOWDOWN", "1"))
        return FakeBackend({"two_pass": 20e-6, "fused": fused}, spread=0.005, seed=1)
    """
)


def snippet(text: str, name: str) -> str:
    """The code block between ``<!-- snippet: name -->`` and ``<!-- end snippet -->``, verbatim."""
    m = re.search(rf"<!-- snippet: {re.escape(name)} -->\n```[\w-]*\n(.*?)```\n<!-- end snippet -->", text, re.S)
    assert m, f"no snippet {name!r}"
    return m.group(1)


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def _clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without what would reach back into the repository or change
    the plugin's settings (PYTHONPATH, GPU_PERF_*, PYTEST_*, a virtual environment's variables).
    Bytecode is written (the project's and the new environment's, pytest's rewritten modules), so
    each run after the first imports what the first compiled."""
    drop = ("PYTHONPATH", "PYTHONHOME", "PYTHONDONTWRITEBYTECODE", "VIRTUAL_ENV", "PIP_", "GPU_PERF", "PYTEST_",
            "HYPOTHESIS")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return {**env, **extra}


def _setuptools_builds_offline() -> bool:
    try:
        major = int(metadata.version("setuptools").split(".")[0])
    except metadata.PackageNotFoundError:
        return False
    return major >= 77  # pyproject.toml's build-system requirement


# -- the wheel, the environment, the project --------------------------------------------------
@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from a copy of the package's files, so nothing is written into the checkout."""
    src = tmp_path_factory.mktemp("src")
    files = _run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "pytest_gpuperf"], ROOT)
    assert files.returncode == 0, files.stderr
    for name in filter(None, files.stdout.split("\0")):
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    out = tmp_path_factory.mktemp("dist")
    isolation = ["--no-build-isolation"] if _setuptools_builds_offline() else []  # else pip fetches setuptools
    done = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation, "-w", out, src], src, _clean_env())
    assert done.returncode == 0, f"pip wheel failed:\n{done.stdout}\n{done.stderr}"
    (built,) = out.glob("pytest_gpuperf-*.whl")
    return built


def _requirement_closure(requirements: list[str], extras: tuple[str, ...]) -> list[metadata.Distribution]:
    """The installed distributions these requirements need, transitively, markers evaluated here."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    found: dict[str, metadata.Distribution] = {}
    todo = [(text, extras) for text in requirements]
    while todo:
        text, active = todo.pop()
        req = Requirement(text)
        if req.marker and not any(req.marker.evaluate({"extra": e}) for e in (*active, "")):
            continue
        name = canonicalize_name(req.name)
        if name in found:
            continue
        dist = metadata.distribution(req.name)
        found[name] = dist
        todo += [(t, tuple(req.extras)) for t in dist.requires or []]
    return list(found.values())


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    """A fresh virtual environment outside the repository with the wheel and its `hypothesis`
    extra installed, offline."""
    base = tmp_path_factory.mktemp("env")
    env_dir, bridge = base / "venv", base / "deps"
    done = _run([sys.executable, "-m", "venv", "--without-pip", env_dir], base, _clean_env())
    assert done.returncode == 0, done.stderr
    python = env_dir / "bin" / "python"
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        requires = [line.split(":", 1)[1].strip() for line in zf.read(meta).decode().splitlines()
                    if line.startswith("Requires-Dist:")]
    bridge.mkdir()
    for dist in _requirement_closure(requires, EXTRAS):
        site = Path(str(dist.locate_file("")))
        for top in {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}:
            if not (bridge / top).exists() and (site / top).exists():
                (bridge / top).symlink_to(site / top)
    purelib = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], base, _clean_env())
    Path(purelib.stdout.strip(), "_adopt_test_dependencies.pth").write_text(f"{bridge}\n")
    done = _run([sys.executable, "-m", "pip", "--python", python, "install", "--no-index", "--no-cache-dir",
                 f"{wheel}[{','.join(EXTRAS)}]"], base, _clean_env())
    assert done.returncode == 0, f"pip install failed:\n{done.stdout}\n{done.stderr}"
    return env_dir


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("user-project")
    (root / "pyproject.toml").write_text(snippet(README, "pyproject"))
    (root / ".gitignore").write_text(snippet(ADOPT, "gitignore"))
    (root / "conftest.py").write_text(CONFTEST)
    (root / "tests").mkdir()
    (root / "tests" / "test_scale.py").write_text(snippet(README, "first-test"))
    (root / "baselines").mkdir()
    return root


def _pytest(venv: Path, project: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """pytest in the project, with the GPU lock in a folder of its own: the fake GPU's lock file
    would otherwise be the machine-wide one that every other fake-GPU run here takes too."""
    locks = project.parent / "locks"
    locks.mkdir(exist_ok=True)
    return _run([venv / "bin" / "python", "-m", "pytest", "-p", "no:cacheprovider", "-rs", *args], project,
                _clean_env(GPU_PERF_LOCK_DIR=str(locks), **env))


# -- the tests ---------------------------------------------------------------------------------
def test_the_package_comes_from_the_wheel_not_the_checkout(venv: Path) -> None:
    done = _run([venv / "bin" / "python", "-c", "import pytest_gpuperf, sys; print(pytest_gpuperf.__file__)"], venv,
                _clean_env())
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).resolve().is_relative_to(venv.resolve()), done.stdout
    assert (venv / "bin" / "gpuperf").is_file()


def test_readmes_first_test_runs_in_a_project_of_its_own(venv: Path, project: Path) -> None:
    speed = "tests/test_scale.py::test_speed"
    first = _pytest(venv, project, "--gpu-perf", "--gpu-perf-json", "report.json")
    assert first.returncode == 0, first.stdout + first.stderr
    assert re.search(r"\b3 passed\b", first.stdout), first.stdout  # two value tests (hypothesis) and the gate
    report = json.loads((project / "report.json").read_text())
    (claim,) = [c for t in report["tests"] for c in t.get("comparisons", [])]
    assert claim["verdict"] == "pass" and claim["at_least"] == 1.32 and 1.9 < claim["speedup"] < 2.1
    assert "gpu_perf_update_baselines" in first.stdout + first.stderr or "--gpu-perf-update-baselines" in first.stdout

    record = _pytest(venv, project, "--gpu-perf", "--gpu-perf-update-baselines", speed)
    assert record.returncode == 0, record.stdout + record.stderr
    (stored,) = (project / "baselines").glob("*/*.json")
    assert stored.parent.name == "fake-gpu-sm90-132sm-80gib"
    assert set(json.loads(stored.read_text())["entries"]) == {"test_speed::two_pass", "test_speed::fused"}
    check = _run([venv / "bin" / "gpuperf", "check", "baselines"], project, _clean_env())
    assert check.returncode == 0, check.stdout + check.stderr

    again = _pytest(venv, project, "--gpu-perf", "--gpu-perf-json", "report.json", speed)
    assert again.returncode == 0, again.stdout + again.stderr
    verdicts = json.loads((project / "report.json").read_text())["summary"]
    assert verdicts.get("baseline pass") == 2 and verdicts.get("speedup pass") == 1, verdicts
    rendered = _run([venv / "bin" / "gpuperf", "report", "report.json", "--markdown"], project, _clean_env())
    assert rendered.returncode == 0 and "| test_speed | fused |" in rendered.stdout, rendered.stdout + rendered.stderr

    slower = _pytest(venv, project, "--gpu-perf", speed, FAKE_FUSED_SLOWDOWN="1.3")
    assert slower.returncode == 1, slower.stdout + slower.stderr
    assert re.search(r"\b1 failed\b", slower.stdout) and "fused" in slower.stdout, slower.stdout


def test_readmes_install_snippet_names_extras_the_wheel_has(wheel: Path) -> None:
    lines = [line for line in snippet(README, "install").splitlines() if line.strip()]
    with zipfile.ZipFile(wheel) as zf:
        meta = zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    provided = set(re.findall(r"^Provides-Extra: (\S+)$", meta, re.M))
    named = {extra for line in lines for group in re.findall(r"\[([\w,-]+)\]", line) for extra in group.split(",")}
    assert named and named <= provided, f"README names extras the package lacks: {sorted(named - provided)}"
    assert any(line.startswith("pip wheel --no-deps -w dist ") for line in lines)
    globs = [g for line in lines for g in re.findall(r"dist/(pytest_gpuperf-\*\.whl)", line)]
    assert globs and all(wheel.match(g) for g in globs), (globs, wheel.name)
    assert "not on PyPI" in README


def test_the_template_workflow_passes_the_workflow_checks() -> None:
    from tests.ci.test_workflows import FORK_GUARD, PINNED, _load, _steps_text

    wf = _load(TEMPLATE)
    assert wf["permissions"] == {} and {"push", "pull_request"} <= set(wf["on"])
    (job,) = wf["jobs"].values()
    assert job["permissions"] == {"contents": "read"} and "self-hosted" in job["runs-on"] and "gpu" in job["runs-on"]
    assert FORK_GUARD in job["if"] and isinstance(job["timeout-minutes"], int)
    steps = _steps_text(job)
    assert '--gpu-perf-against "$(git merge-base "$BASE_SHA" HEAD)" --gpu-perf-changed-only' in steps
    assert "--gpu-perf --gpu-perf-json gpu-perf-report.json" in steps
    assert 'gpuperf report gpu-perf-report.json --markdown >> "$GITHUB_STEP_SUMMARY"' in steps
    assert "gpuperf report gpu-perf-report.json --annotations" in steps
    checkout = next(s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/checkout@"))
    assert checkout["with"] == {"persist-credentials": False, "fetch-depth": 0}
    for n, line in enumerate(TEMPLATE.read_text().splitlines(), 1):
        if re.match(r"^\s*(?:-\s+)?uses:", line):
            assert PINNED.match(line), f"gpu-perf.yml:{n}: pin by full commit SHA: {line.strip()}"
    assert "templates/gpu-perf.yml" in ADOPT


@pytest.mark.parametrize("tool", ["zizmor", "actionlint"])
def test_the_template_workflow_lints_clean(tool: str) -> None:
    found = shutil.which(tool) or shutil.which(tool, path=str(Path(sys.executable).parent))
    if not found:
        pytest.skip(f"{tool} is not installed")
    if tool == "zizmor":
        cmd = [found, "--offline", "--persona", "auditor", "--min-severity", "low", "--no-progress", "--color", "never", TEMPLATE]
    else:
        cmd = [found, "-no-color", "-config-file", ROOT / ".github" / "actionlint.yaml", TEMPLATE]  # knows the `gpu` label
    done = _run(cmd, ROOT)
    assert done.returncode == 0, f"{tool} found problems:\n{done.stdout}{done.stderr}"
