"""--gpu-perf-against REV: each variant is timed interleaved with its namesake built from REV."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Callable

import pytest

TEST_MODULE = """
import os
import pytest
from pytest_gpuperf import Variant

@pytest.fixture(scope="module")
def launcher():  # at the revision, this fixture runs from the revision's code
    from mylib import version

    def launch():
        with open(os.environ["SEEN_FILE"], "a") as f:
            f.write(version.VERSION + "\\n")

    return launch

def test_k(gpu_perf, launcher):
    gpu_perf.measure(Variant("k", launcher))
"""


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


@pytest.fixture
def project(pytester: pytest.Pytester, fake_gpu: Callable[..., None], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A git project whose commit says VERSION = "rev" and whose working tree says "head"."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("SEEN_FILE", str(tmp_path / "seen.txt"))
    pytester.mkpydir("mylib")
    (pytester.path / "mylib" / "version.py").write_text('VERSION = "rev"\n')
    pytester.makepyfile(test_perf=TEST_MODULE)
    git(pytester.path, "init", "-q")
    git(pytester.path, "add", ".")
    git(pytester.path, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "rev")
    (pytester.path / "mylib" / "version.py").write_text('VERSION = "head"\n')
    return pytester.path


def seen(tmp_path: Path) -> set[str]:
    return set((tmp_path / "seen.txt").read_text().split())


def test_each_variant_runs_the_code_of_its_revision(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], project: Path, tmp_path: Path
) -> None:
    fake_gpu(times={"k": 10e-6, "k@rev": 10e-6})
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-against=HEAD", "--gpu-perf-json=report.json")
    result.assert_outcomes(passed=1)
    assert seen(tmp_path) == {"head", "rev"}
    record = json.loads((project / "report.json").read_text())["tests"][0]["measurements"][0]
    assert record["verdict"] == "pass"
    assert record["regression"]["against"].startswith("HEAD (") and record["regression"]["threshold"] == 0.025
    assert record["regression"]["band"] == 0.0


def test_a_slower_working_tree_fails_against_the_revision(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], project: Path
) -> None:
    fake_gpu(times={"k": 10.6e-6, "k@rev": 10e-6})
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-against=HEAD")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*performance REGRESSION: 'k' is ?.?% slower than at HEAD (*), timed in the same rounds",
        "*threshold 1.0250x = 1 + tolerance 5% / 2: the whole interval lies above it",
    ])


def test_another_checkout_folder_serves_as_the_revision(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], project: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other-checkout"
    shutil.copytree(project, other, ignore=shutil.ignore_patterns(".git"))
    (other / "mylib" / "version.py").write_text('VERSION = "folder"\n')
    fake_gpu(times={"k": 10e-6, "k@rev": 10e-6})
    pytester.runpytest("--gpu-perf", f"--gpu-perf-against={other}").assert_outcomes(passed=1)
    assert seen(tmp_path) == {"head", "folder"}


def test_a_test_missing_at_the_revision_falls_back_to_the_baseline(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], project: Path
) -> None:
    pytester.makepyfile(test_new="from pytest_gpuperf import Variant\n\ndef test_n(gpu_perf):\n    gpu_perf.measure(Variant('n', lambda: None))\n")
    fake_gpu(times={"n": 10e-6})
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-against=HEAD", "test_new.py", "--gpu-perf-json=report.json")
    result.assert_outcomes(passed=1)
    record = json.loads((project / "report.json").read_text())["tests"][0]["measurements"][0]
    assert "not paired with HEAD (" in record["note"] and "test_new.py does not exist at HEAD" in record["note"]


def test_an_unknown_revision_is_a_usage_error(pytester: pytest.Pytester, fake_gpu: Callable[..., None], project: Path) -> None:
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-against=no-such-branch")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: pytest-gpuperf: --gpu-perf-against 'no-such-branch' is neither a folder nor a git revision*"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


SHARING_MODULE = """
import os
from pytest_gpuperf import Variant

def test_k(gpu_perf):
    from mylib import version

    def make():
        with open(os.environ["SEEN_FILE"], "a") as f:
            f.write("made-by-" + version.VERSION + "\\n")
        return [version.VERSION]

    buffers = gpu_perf.shared(("inputs", 0), make)
    assert gpu_perf.shared(("inputs", 0), make) is buffers

    def launch():
        with open(os.environ["SEEN_FILE"], "a") as f:
            f.write(version.VERSION + "-on-" + buffers[0] + "\\n")

    gpu_perf.measure(Variant("k", launch))
"""


def test_both_revisions_time_on_the_buffers_the_test_shares(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], project: Path, tmp_path: Path
) -> None:
    pytester.makepyfile(test_perf=SHARING_MODULE)
    (project / "mylib" / "version.py").write_text('VERSION = "rev"\n')
    git(project, "add", ".")
    git(project, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "sharing")
    (project / "mylib" / "version.py").write_text('VERSION = "head"\n')
    fake_gpu(times={"k": 10e-6, "k@rev": 10e-6})
    pytester.runpytest("--gpu-perf", "--gpu-perf-against=HEAD").assert_outcomes(passed=1)
    assert seen(tmp_path) == {"made-by-head", "head-on-head", "rev-on-head"}
    (tmp_path / "seen.txt").unlink()
    pytester.runpytest("--gpu-perf").assert_outcomes(passed=1)
    assert seen(tmp_path) == {"made-by-head", "head-on-head"}
