"""--gpu-perf-against REV: each variant is timed interleaved with its namesake built from REV."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any, Callable

import pytest

from tests.plugin.git_repos import AUTHOR, commit, git

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



@pytest.fixture
def project(pytester: pytest.Pytester, fake_gpu: Callable[..., None], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A git project whose commit says VERSION = "rev" and whose working tree says "head"."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("SEEN_FILE", str(tmp_path / "seen.txt"))
    pytester.mkpydir("mylib")
    (pytester.path / "mylib" / "version.py").write_text('VERSION = "rev"\n')
    pytester.makepyfile(test_perf=TEST_MODULE)
    git(pytester.path, "init", "-q")
    commit(pytester.path, "rev")
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
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-against=HEAD", "--gpu-perf-json=report.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*performance REGRESSION: 'k' is ?.?% slower than at HEAD (*), timed in the same rounds",
        "*threshold 1.0250x = 1 + tolerance 5% / 2: the whole interval lies above it",
    ])
    failure = json.loads((project / "report.json").read_text())["tests"][0]["failure"]
    assert failure.startswith("pytest_gpuperf.errors.GateFailure: performance REGRESSION: 'k' is ")
    lines = failure.splitlines()
    assert "  threshold 1.0250x = 1 + tolerance 5% / 2: the whole interval lies above it" in lines
    assert any(line.startswith("  moved: fake_kernel  ") for line in lines), "the kernel breakdown follows"


def test_a_launch_that_names_its_fake_time_is_as_slow_as_its_revision_made_it(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], project: Path
) -> None:
    """FakeBackend takes a launch's ``fake_seconds``: the code of each side decides its speed."""
    module = TEST_MODULE.replace("    return launch", "    launch.fake_seconds = version.SECONDS\n    return launch")
    (project / "test_perf.py").write_text(module)
    (project / "mylib" / "version.py").write_text('VERSION = "rev"\nSECONDS = 10e-6\n')
    git(project, *AUTHOR, "commit", "-qam", "seconds")
    (project / "mylib" / "version.py").write_text('VERSION = "head"\nSECONDS = 11e-6\n')
    fake_gpu(times={"k": 10e-6, "k@rev": 10e-6})
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-against=HEAD")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*performance REGRESSION: 'k' is *% slower than at HEAD (*)*", "*slowdown  1.09??x*"])


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
    commit(project, "sharing")
    (project / "mylib" / "version.py").write_text('VERSION = "head"\n')
    fake_gpu(times={"k": 10e-6, "k@rev": 10e-6})
    pytester.runpytest("--gpu-perf", "--gpu-perf-against=HEAD").assert_outcomes(passed=1)
    assert seen(tmp_path) == {"made-by-head", "head-on-head", "rev-on-head"}
    (tmp_path / "seen.txt").unlink()
    pytester.runpytest("--gpu-perf").assert_outcomes(passed=1)
    assert seen(tmp_path) == {"made-by-head", "head-on-head"}


TEARDOWN_MODULE = """
import os
import pytest
from pytest_gpuperf import Variant

def log(line):
    with open(os.environ["SEEN_FILE"], "a") as f:
        f.write(line + "\\n")

@pytest.fixture(scope="module")
def model():  # holds what the launches read, and frees it at its teardown
    from mylib import version

    state = {"open": True, "side": version.VERSION}
    yield state
    state["open"] = False
    log("module-teardown-" + state["side"])

@pytest.fixture
def scratch():
    from mylib import version

    state = {"open": True}
    yield state
    state["open"] = False
    log("function-teardown-" + version.VERSION)

def launcher(model, scratch):
    def launch():
        if not (model["open"] and scratch["open"]):
            raise RuntimeError("launched after its fixture's teardown: " + model["side"])
    return launch

def test_a(gpu_perf, model, scratch):
    gpu_perf.measure(Variant("a", launcher(model, scratch)))
    log("test-a-done")

def test_b(gpu_perf, model, scratch):
    gpu_perf.measure(Variant("b", launcher(model, scratch)))
    log("test-b-done")
"""


def test_the_revisions_generator_fixtures_tear_down_when_their_scope_ends(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], project: Path, tmp_path: Path
) -> None:
    """REV's variants are timed after REV's test function returns: its fixtures' teardowns (which
    may free a model or a captured graph the launch reads) wait for the end of their scope."""
    pytester.makepyfile(test_perf=TEARDOWN_MODULE)
    (project / "mylib" / "version.py").write_text('VERSION = "rev"\n')
    commit(project, "teardowns")
    (project / "mylib" / "version.py").write_text('VERSION = "head"\n')
    fake_gpu(times={"a": 10e-6, "a@rev": 10e-6, "b": 10e-6, "b@rev": 10e-6})
    pytester.runpytest("--gpu-perf", "--gpu-perf-against=HEAD").assert_outcomes(passed=2)
    lines = (tmp_path / "seen.txt").read_text().split()
    each_side = ["function-teardown-head", "function-teardown-rev"]
    assert lines[:2] == ["test-a-done"] * 2, "both sides' test bodies ran"
    assert sorted(lines[2:4]) == each_side, "function-scoped teardowns after the test, on both sides"
    assert lines[4:6] == ["test-b-done"] * 2
    assert sorted(lines[6:8]) == each_side
    assert sorted(lines[8:]) == ["module-teardown-head", "module-teardown-rev"], "once each, at the module's end"


PARAMETRIZED_MODULE = """
import dataclasses
import pytest
from pytest_gpuperf import Variant

@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    size: int

CASES = [Case("small", 1), Case("large", 2)]

@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
@pytest.mark.parametrize("scale", [pytest.param(1, id="one"), 2])
def test_case(gpu_perf, case, scale):
    assert isinstance(case, Case) and case in CASES, "a revision's cases are of its own class"
    gpu_perf.measure(Variant("k", lambda: None))

@pytest.mark.parametrize("case, size", [(Case("other", 2), 2)])
def test_changed_case(gpu_perf, case, size):
    assert isinstance(case, Case)
    gpu_perf.measure(Variant("k", lambda: None))
"""


def test_the_revisions_test_gets_its_own_parameter_objects(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], project: Path
) -> None:
    """An object of a class each revision defines (a dataclass of shapes) is not equal to the other
    revision's: REV's test gets REV's own object at the same position when it prints the same,
    and this run's value where REV's differs (then REV's test decides what it makes of it)."""
    pytester.makepyfile(test_perf=PARAMETRIZED_MODULE)
    commit(project, "cases")
    (project / "test_perf.py").write_text(PARAMETRIZED_MODULE.replace('(Case("other", 2), 2)', '(Case("other", 3), 2)'))
    fake_gpu(times={"k": 10e-6, "k@rev": 10e-6})
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-against=HEAD", "--gpu-perf-json=report.json")
    result.assert_outcomes(passed=5)
    tests = json.loads((project / "report.json").read_text())["tests"]
    notes = {t["nodeid"].split("::")[1]: t["measurements"][0].get("note") or "" for t in tests}
    assert sorted(name for name, note in notes.items() if "not paired" not in note) == [
        "test_case[2-large]", "test_case[2-small]", "test_case[one-large]", "test_case[one-small]"
    ], notes
    assert "AssertionError" in notes["test_changed_case[case0-2]"]


# -- exporting a revision ---------------------------------------------------------------------
def small_repo(root: Path, files: int = 60) -> dict[str, bytes]:
    """A git repository of ``files`` files of a few KB each, committed; returns their contents."""
    root.mkdir()
    git(root, "init", "-q")
    contents: dict[str, bytes] = {}
    for i in range(files):
        name = f"pkg{i % 4}/module_{i}.py"
        contents[name] = (f"# file {i}\n" + f"VALUE_{i} = {i}\n" * (200 + i)).encode()
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_bytes(contents[name])
    commit(root, "tree")
    return contents


def _export_and_read(root: str, start: Any) -> dict[str, bytes]:
    """In a process of its own: wait for the others, resolve HEAD, then read the whole tree at once."""
    from pytest_gpuperf._plugin.against import resolve

    start.wait(timeout=120)
    tree = resolve(Path(root), "HEAD").root
    return {p.relative_to(tree).as_posix(): p.read_bytes() for p in tree.rglob("*") if p.is_file()}


def test_concurrent_exports_of_one_revision_each_see_the_whole_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight processes export one revision into one cache at once: every one reads every file
    whole (they used to read files another process was still writing), and no staging is left."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    contents = small_repo(tmp_path / "repo")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    processes = 8
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager:
        start = manager.Barrier(processes)
        with ProcessPoolExecutor(processes, mp_context=context) as pool:
            trees = list(pool.map(_export_and_read, [str(tmp_path / "repo")] * processes, [start] * processes, timeout=600))
    for tree in trees:
        tree.pop(".complete")
        assert tree == contents
    cache = tmp_path / "cache" / "pytest-gpuperf" / "against"
    assert [p.name for p in cache.iterdir() if not p.name.endswith((".lock", ".holder"))] == [
        subprocess.run(["git", "-C", str(tmp_path / "repo"), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    ], "one tree in place, no staging folder left"


def test_a_failed_export_leaves_nothing_and_the_next_one_succeeds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_gpuperf._plugin import against

    tarfile = against.tarfile  # the module the export uses (pytester's runs may re-import others)
    contents = small_repo(tmp_path / "repo", files=8)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    real = tarfile.TarFile.extractall
    written: list[Path] = []

    def crash_midway(self: tarfile.TarFile, path: Any, *args: Any, **kwargs: Any) -> None:
        for member in self:
            if member.isfile():
                self.extract(member, path, filter="data")
                written.append(Path(path) / member.name)
                if len(written) == 3:
                    raise OSError(28, "No space left on device")

    monkeypatch.setattr(tarfile.TarFile, "extractall", crash_midway)
    with pytest.raises(against.GpuPerfUsageError, match=r"git archive \w{12} failed \(.*No space left on device\); nothing was exported"):
        against.resolve(tmp_path / "repo", "HEAD")
    assert len(written) == 3
    cache = tmp_path / "cache" / "pytest-gpuperf" / "against"
    assert not [p for p in cache.iterdir() if not p.name.endswith((".lock", ".holder"))], "nothing half-exported is left"
    monkeypatch.setattr(tarfile.TarFile, "extractall", real)
    tree = against.resolve(tmp_path / "repo", "HEAD").root
    assert {p.relative_to(tree).as_posix(): p.read_bytes() for p in tree.rglob("*.py")} == contents


def test_an_export_that_loses_the_rename_uses_the_tree_already_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_gpuperf._plugin import against

    small_repo(tmp_path / "repo", files=4)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    head = subprocess.run(["git", "-C", str(tmp_path / "repo"), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    real = against._extract

    def another_wins(rootdir: Path, commit: str, dest: Path, label: str) -> None:
        real(rootdir, commit, dest, label)
        winner = dest.parent / commit  # placed meanwhile by a process that took no lock
        real(rootdir, commit, winner, label)
        (winner / "winner").write_text("")
        (winner / against.COMPLETE).write_text(commit + "\n")

    monkeypatch.setattr(against, "_extract", another_wins)
    tree = against.resolve(tmp_path / "repo", "HEAD").root
    assert tree.name == head and (tree / "winner").exists()
    assert sorted(p.name for p in tree.parent.iterdir() if not p.name.endswith((".lock", ".holder"))) == [head]


@pytest.mark.parametrize("target", ["/etc/hostname", "../../outside"], ids=["absolute", "up-past-the-top"])
def test_a_link_out_of_the_revision_tree_is_refused_and_nothing_exported(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], project: Path, tmp_path: Path, target: str
) -> None:
    (project / "mylib" / "inside").symlink_to("version.py")  # a link within the tree is exported
    (project / "mylib" / "outside").symlink_to(target)
    git(project, "add", "mylib")
    git(project, *AUTHOR, "commit", "-q", "-m", "links")
    for _ in range(2):  # the same line again: nothing half-exported stands in the way
        result = pytester.runpytest("--gpu-perf", "--gpu-perf-against=HEAD")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([
            f"ERROR: pytest-gpuperf: --gpu-perf-against HEAD: the tree at commit * holds the symbolic link "
            f"mylib/outside -> {target}, which points outside the tree, so nothing was exported; "
            "check the revision out into a folder and pass that folder instead"
        ])
        assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    cache = tmp_path / "cache" / "pytest-gpuperf" / "against"
    assert not [p for p in cache.iterdir() if not p.name.endswith((".lock", ".holder"))]
    (project / "mylib" / "outside").unlink()
    git(project, "rm", "-q", "--cached", "mylib/outside")
    git(project, *AUTHOR, "commit", "-q", "-m", "inside only")
    fake_gpu(times={"k": 10e-6, "k@rev": 10e-6})
    pytester.runpytest("--gpu-perf", "--gpu-perf-against=HEAD").assert_outcomes(passed=1)


def test_a_folder_named_like_the_revision_is_not_used_silently(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], project: Path, tmp_path: Path
) -> None:
    git(project, "branch", "rel")
    (project / "rel").mkdir()
    branch_commit = subprocess.run(["git", "-C", str(project), "rev-parse", "rel"], capture_output=True, text=True).stdout.strip()
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-against=rel")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        f"ERROR: pytest-gpuperf: --gpu-perf-against 'rel' names both a git revision of {project} (commit {branch_commit[:12]}) "
        f"and the folder {project / 'rel'}; write ./rel for the folder, or the commit {branch_commit[:12]} for the revision"
    ])
    fake_gpu(times={"k": 10e-6, "k@rev": 10e-6})
    pytester.runpytest("--gpu-perf", f"--gpu-perf-against={branch_commit[:12]}").assert_outcomes(passed=1)
    assert seen(tmp_path) == {"head", "rev"}, "the revision, not the empty folder"
    pytester.runpytest("--gpu-perf", "--gpu-perf-against=./rel", "--gpu-perf-json=report.json").assert_outcomes(passed=1)
    note = json.loads((project / "report.json").read_text())["tests"][0]["measurements"][0]["note"]
    assert "test_perf.py does not exist at ./rel" in note, "written as a path, it is the folder"


def test_a_cache_folder_that_cannot_be_used_is_a_usage_error(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "shared-cache"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("GPU_PERF_CACHE_DIR", str(shared))
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-against=HEAD")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        f"ERROR: pytest-gpuperf: --gpu-perf-against HEAD: commit * cannot be exported: cache folder {shared} is "
        "writable by others (mode 0777)*"
    ])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
