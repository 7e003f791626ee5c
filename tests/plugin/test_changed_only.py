"""--gpu-perf-changed-only: a test proven the same GPU work as at --gpu-perf-against's revision is
not timed and passes; anything not proven is timed, and says why."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import pytest

from pytest_gpuperf._compile.modules import compiler_input_digest
from pytest_gpuperf._timing.launch_identity import (
    SAME_FUNCTION,
    KernelIdentity,
    LaunchIdentity,
    NodeIdentity,
    Proof,
    compare,
)
from tests.plugin.git_repos import AUTHOR, commit, git

LAUNCH = """
from pytest_gpuperf import Variant
from mylib import kernels

def launch():
    pass

launch.fake_identity = kernels.IDENTITY
"""

TEST_MODULE = LAUNCH + """
def test_k(gpu_perf):
    gpu_perf.measure(Variant("k", launch))
"""

CLAIM_MODULE = """
from pytest_gpuperf import Variant
from mylib import kernels

def fast():
    pass

def slow():
    pass

fast.fake_identity = kernels.IDENTITY
slow.fake_identity = kernels.SLOW
fast.fake_seconds, slow.fake_seconds = 10e-6, 12e-6

def test_claim(gpu_perf):
    c = gpu_perf.assert_speedup(
        Variant("fast", fast, bytes=10**6), Variant("slow", slow, bytes=10**6), at_least=kernels.MARGIN
    )
    assert c.speedup > 1.1
    gpu_perf.record("bandwidth_ratio", c.fast.bandwidth / c.baseline.bandwidth)
"""

GEMM = {"name": "gemm", "function": 0x1000, "grid": [132, 1, 1], "block": [256, 1, 1], "params": ["00a0", "0010"]}
NORM = {"name": "norm", "function": 0x2000, "grid": [64, 1, 1], "params": ["00a0"]}



def write_kernels(root: Path, identity: Any, slow: Any = None, margin: float = 1.1) -> None:
    slow = slow if slow is not None else [dict(NORM, function=0x3000)]
    (root / "mylib" / "kernels.py").write_text(f"IDENTITY = {identity!r}\nSLOW = {slow!r}\nMARGIN = {margin!r}\n")


@pytest.fixture
def project(pytester: pytest.Pytester, fake_gpu: Callable[..., None], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A git project whose commit launches GEMM then NORM (the working tree: the same, until a test
    changes mylib/kernels.py)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    pytester.mkpydir("mylib")
    write_kernels(pytester.path, [GEMM, NORM])
    pytester.makepyfile(test_perf=TEST_MODULE, test_claim=CLAIM_MODULE)
    git(pytester.path, "init", "-q")
    commit(pytester.path, "rev")
    fake_gpu(times={"k": 10e-6, "k@rev": 10e-6})
    return pytester.path


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(
        "--gpu-perf", "--gpu-perf-against=HEAD", "--gpu-perf-changed-only", "--gpu-perf-json=report.json", "-v", *args
    )


def report(project: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((project / "report.json").read_text())
    return data


def timed_because(project: Path) -> str:
    reasons = {m.get("timed_because") for t in report(project)["tests"] for m in t["measurements"]}
    assert len(reasons) == 1, reasons
    return str(reasons.pop())


def test_a_test_proven_identical_is_not_timed_and_passes(pytester: pytest.Pytester, project: Path) -> None:
    result = run(pytester, "test_perf.py")
    result.assert_outcomes(passed=1)
    test = report(project)["tests"][0]
    assert test["measurements"] == [] and test["comparisons"] == []
    [identical] = test["identical"]
    assert identical["identical_to"]["kernels"] == 2 and identical["identical_to"]["basis"] == [SAME_FUNCTION]
    assert identical["identical_to"]["rev"] == "HEAD" and len(identical["identical_to"]["commit"]) == 40
    assert identical["note"].startswith("identical to HEAD (")
    assert identical["note"].endswith("): 2 kernels, same code (same loaded function) and launch configuration, same inputs")
    result.stdout.fnmatch_lines([
        "gpu-perf  test_k::k  not timed: identical to HEAD (*): 2 kernels, same code (same loaded function)*  pass",
        "*test_k*k*not timed*identical to HEAD*pass*",
        "changed-only: 1 variant(s) in 1 test(s) identical to HEAD, not timed; 0 test(s) timed; deciding took *.* s over 1 test(s)",
    ])
    assert 0 < identical["deciding_s"] < 60


@pytest.mark.parametrize(
    ("now", "reason"),
    [
        pytest.param(
            [dict(GEMM, function=0x1111), NORM],
            "variant 'k': node 1 (kernel gemm): code not proven the same: another loaded function at HEAD, and the "
            "plugin recorded no digest of its code (it did not load the module)",
            id="another-function",
        ),
        pytest.param(
            [dict(GEMM, params=["00b0", "0010"]), NORM],
            "variant 'k': node 1 (kernel gemm): parameter 1 (2 bytes at offset 0) differs from HEAD's: another value, "
            "or a buffer not shared through gpu_perf.shared",
            id="parameters",
        ),
        pytest.param(
            [dict(GEMM, grid=[66, 1, 1]), NORM],
            "variant 'k': node 1 (kernel gemm): grid 66x1x1 now, 132x1x1 at HEAD",
            id="grid",
        ),
        pytest.param(
            [dict(GEMM, attributes={"cluster dimension": "2x1x1"}), NORM],
            "variant 'k': node 1 (kernel gemm): attributes not read alike on both sides",
            id="attributes",
        ),
        pytest.param([GEMM], "variant 'k': 1 graph nodes now, 2 at HEAD", id="node-count"),
        pytest.param(
            [GEMM, {"kind": "memset", "detail": [1, 2]}],
            "variant 'k': node 2: a memset node now, a kernel node at HEAD",
            id="node-kind",
        ),
        pytest.param(
            [GEMM, dict(NORM, params=None)],
            "variant 'k': node 2 (kernel norm): parameters cannot be read (the fake node's parameters are unreadable)",
            id="unreadable-parameters",
        ),
        pytest.param("capture failed: CUDA error", "variant 'k': its launch cannot be read now: capture failed: CUDA error", id="capture"),
    ],
)
def test_anything_not_proven_is_timed_and_says_why(
    pytester: pytest.Pytester, project: Path, now: Any, reason: str
) -> None:
    write_kernels(project, now)
    result = run(pytester, "test_perf.py")
    result.assert_outcomes(passed=1)
    test = report(project)["tests"][0]
    assert "identical" not in test and len(test["measurements"]) == 1
    assert timed_because(project) == reason
    assert 0 < test["measurements"][0]["deciding_s"] < 60
    result.stdout.fnmatch_lines(["changed-only: 0 variant(s) in 0 test(s) identical to the revision, not timed; 1 test(s) timed; "
                                 "deciding took *.* s over 1 test(s), timed because:",
                                 f"     1 x {reason}"])


def test_a_slower_change_is_still_caught(pytester: pytest.Pytester, project: Path, fake_gpu: Callable[..., None]) -> None:
    write_kernels(project, [dict(GEMM, block=[128, 1, 1]), NORM])
    fake_gpu(times={"k": 11e-6, "k@rev": 10e-6})
    result = run(pytester, "test_perf.py")
    result.assert_outcomes(failed=1)
    assert timed_because(project) == "variant 'k': node 1 (kernel gemm): block 128x1x1 now, 256x1x1 at HEAD"


def test_two_functions_of_one_recorded_code_digest_are_proven(pytester: pytest.Pytester, project: Path) -> None:
    write_kernels(project, [dict(GEMM, code="c0de"), NORM])
    git(project, *AUTHOR, "commit", "-qam", "digest")
    write_kernels(project, [dict(GEMM, code="c0de", function=0x7777), NORM])
    run(pytester, "test_perf.py").assert_outcomes(passed=1)
    [identical] = report(project)["tests"][0]["identical"]
    assert set(identical["identical_to"]["basis"]) == {
        "same compiler input (source, headers, options) in the plugin's loader",
        SAME_FUNCTION,
    }
    write_kernels(project, [dict(GEMM, code="c0de2", function=0x7777), NORM])
    run(pytester, "test_perf.py").assert_outcomes(passed=1)
    assert timed_because(project) == (
        "variant 'k': node 1 (kernel gemm): its code differs from HEAD's "
        "(same compiler input (source, headers, options) in the plugin's loader)"
    )


def test_a_claim_between_two_identical_variants_is_not_retimed(pytester: pytest.Pytester, project: Path) -> None:
    result = run(pytester, "test_claim.py")
    result.assert_outcomes(passed=1)
    test = report(project)["tests"][0]
    assert [i["variant"] for i in test["identical"]] == ["fast", "slow"] and test["comparisons"] == []


def test_a_claim_whose_margin_changed_is_timed(pytester: pytest.Pytester, project: Path) -> None:
    write_kernels(project, [GEMM, NORM], margin=1.15)
    run(pytester, "test_claim.py").assert_outcomes(passed=1)
    assert timed_because(project) == (
        "the test's calls of gpu_perf differ from HEAD's: call 1 is assert_speedup('fast', 'slow', at_least=1.15) "
        "now, assert_speedup('fast', 'slow', at_least=1.1) there"
    )
    assert report(project)["tests"][0]["comparisons"], "the claim was timed"


STOPPING_MODULE = LAUNCH + """launch.fake_seconds = 10e-6

def test_stops(gpu_perf):
    gpu_perf.measure(Variant("k", launch))
    if str(gpu_perf.measure(Variant("k2", launch)).median_s) == "1.0":
        raise RuntimeError("a placeholder the test cannot compute with")
    gpu_perf.measure(Variant("k3", launch))
"""


def test_a_test_that_stops_on_its_stand_in_run_is_timed(pytester: pytest.Pytester, project: Path) -> None:
    """Its calls after the stop are unknown on either side, so nothing is proven."""
    (project / "test_stops.py").write_text(STOPPING_MODULE)
    commit(project, "stops")
    run(pytester, "test_stops.py").assert_outcomes(passed=1)
    assert timed_because(project).startswith(
        "the test stopped before its end when run again with a stand-in (RuntimeError: a placeholder"
    )


def test_a_test_asserting_on_its_results_runs_on_with_placeholders(pytester: pytest.Pytester, project: Path) -> None:
    """test_claim.py asserts ``c.speedup > 1.1`` after its claim and divides the bandwidths of its
    two measurements: a placeholder satisfies the one and survives the other."""
    run(pytester, "test_claim.py").assert_outcomes(passed=1)
    assert report(project)["tests"][0]["identical"]


def test_a_changed_test_module_is_timed(pytester: pytest.Pytester, project: Path) -> None:
    (project / "test_perf.py").write_text(TEST_MODULE + "\n# a comment\n")
    run(pytester, "test_perf.py").assert_outcomes(passed=1)
    assert timed_because(project) == "the test module test_perf.py differs from HEAD's"


def test_a_change_to_the_plugin_times_everything(pytester: pytest.Pytester, project: Path) -> None:
    (project / "pytest_gpuperf").mkdir()
    (project / "pytest_gpuperf" / "__init__.py").write_text("# another plugin\n")
    commit(project, "plugin")
    git(project, "rm", "-rq", "--cached", "pytest_gpuperf")
    (project / "pytest_gpuperf" / "__init__.py").unlink()
    (project / "pytest_gpuperf").rmdir()
    run(pytester, "test_perf.py").assert_outcomes(passed=1)
    assert timed_because(project) == "the plugin (pytest_gpuperf/) differs from the revision's, so every test is timed"


def test_the_option_needs_a_revision(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    pytester.makepyfile(test_perf=TEST_MODULE)
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-changed-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: pytest-gpuperf: --gpu-perf-changed-only (set by the command line (--gpu-perf-changed-only)) needs --gpu-perf-against REV"])


def test_the_report_with_identical_and_timed_tests_is_valid(pytester: pytest.Pytester, project: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from pytest_gpuperf._store.schemas import load_schema

    write_kernels(project, [GEMM, NORM], margin=1.2)
    run(pytester).assert_outcomes(passed=2)
    data = report(project)
    assert {("identical" in t) for t in data["tests"]} == {True, False}
    jsonschema.validate(data, load_schema("report"))


# -- the rule itself ----------------------------------------------------------------------------
def kernel(**changes: Any) -> NodeIdentity:
    spec: dict[str, Any] = dict(
        name="k", function=1, grid=(1, 1, 1), block=(32, 1, 1), dynamic_smem=0, params=((0, b"\x01"),)
    )
    spec.update(changes)
    return NodeIdentity("kernel", kernel=KernelIdentity(**spec))


def test_an_empty_capture_is_never_proven() -> None:
    assert compare(LaunchIdentity(()), LaunchIdentity(())) == "the capture now holds no GPU work"


def test_child_graphs_edges_and_memsets_are_compared() -> None:
    child = LaunchIdentity((kernel(), kernel(function=2)), frozenset({(0, 1)}))
    a = LaunchIdentity((NodeIdentity("memset", detail=(1, 0, 4)), NodeIdentity("graph", child=child)), frozenset({(0, 1)}))
    assert compare(a, a) == Proof(2, (SAME_FUNCTION,))
    b = LaunchIdentity(a.nodes, frozenset())
    assert compare(a, b, "main") == "the graph's dependencies differ from main's"
    other_child = LaunchIdentity(child.nodes, frozenset())
    c = LaunchIdentity((a.nodes[0], NodeIdentity("graph", child=other_child)), a.edges)
    assert compare(a, c) == "node 2 (child graph): the graph's dependencies differ from REV's"
    d = LaunchIdentity((NodeIdentity("memset", detail=None), a.nodes[1]), a.edges)
    assert compare(d, d) == "node 1 (memset): its parameters cannot be read, so it is not proven the same"
    e = LaunchIdentity((NodeIdentity("host"), NodeIdentity("host")))
    assert compare(e, e) == "node 1 (host): its parameters cannot be read, so it is not proven the same"


def test_an_attribute_unreadable_on_one_side_is_not_proven() -> None:
    a = LaunchIdentity((kernel(attributes=(("cooperative", b"\x00"),)),))
    b = LaunchIdentity((kernel(attributes=(("cooperative", None),)),))
    assert compare(a, b) == "node 1 (kernel k): attribute cooperative cannot be read"
    c = LaunchIdentity((kernel(attributes=(("cooperative", b"\x01"),)),))
    assert compare(a, c).startswith("node 1 (kernel k): cooperative 00 now, 01 at REV")  # type: ignore[union-attr]


def test_the_compiler_input_digest_ignores_where_the_tree_is_and_nothing_else(tmp_path: Path) -> None:
    def tree(root: Path, header: str = "#define N 4\n", source_extra: str = "") -> Path:
        (root / "k").mkdir(parents=True)
        (root / "k" / "a.cuh").write_text(header)
        (root / "k" / "k.cu").write_text('#include "a.cuh"\n#include <cuda_fp16.h>\n' + source_extra)
        return root / "k" / "k.cu"

    def digest(source: Path) -> str | None:
        return compiler_input_digest(source, ("--std=c++17", f"-I{source.parent}"), ("kern<1>",), "nvrtc")

    one, two = tree(tmp_path / "one"), tree(tmp_path / "two")
    assert digest(one) is not None and digest(one) == digest(two)
    assert digest(tree(tmp_path / "three", header="#define N 8\n")) != digest(one)
    assert compiler_input_digest(one, ("--std=c++17", f"-I{one.parent}"), ("kern<2>",), "nvrtc") != digest(one)
    assert digest(tree(tmp_path / "four", source_extra="#include HEADER\n")) is None
    (tmp_path / "one" / "k" / "unused.cuh").write_text("// reachable through <unused.cuh>\n")
    assert digest(one) != digest(two), "every header under an include folder counts"


SKIPPING_MODULE = LAUNCH + """import pytest

launch.fake_seconds = 10e-6

def test_skips_on_a_low_number(gpu_perf):
    if float(gpu_perf.measure(Variant("k", launch)).median_s) < 2.0:
        pytest.skip("a number the stand-in cannot have")
"""


def test_a_skip_called_for_on_a_placeholder_ends_the_stand_in_run_only(pytester: pytest.Pytester, project: Path) -> None:
    """The real test is not skipped by what its stand-in run did; the stand-in run stopped, so it is timed."""
    (project / "test_skips.py").write_text(SKIPPING_MODULE)
    commit(project, "skips")
    run(pytester, "test_skips.py").assert_outcomes(skipped=1)  # the real median is far below 2 s
    assert timed_because(project).startswith("the test stopped before its end when run again with a stand-in (Skipped:")
