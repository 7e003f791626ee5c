"""Per-kernel breakdowns: their statistics and diff, the lines a failure adds, and where a run puts
them (the JSON report, the baseline an update stores, the failure message)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Callable

import pytest

from pytest_gpuperf._report.breakdown import diff_lines, side_lines
from pytest_gpuperf._timing.breakdown import Breakdown, KernelTime, diff, median_interval


def kernel(name: str, us: float, *, spread: float = 0.002, grid: int = 132, **resources: int) -> KernelTime:
    seconds = tuple(us * 1e-6 * (1 + spread * ((i % 7) - 3) / 3) for i in range(30))
    return KernelTime(name, (grid, 1, 1), (128, 1, 1), resources.pop("dynamic_smem", 0), seconds, **resources)


def breakdown(*kernels: KernelTime) -> Breakdown:
    return Breakdown(kernels, launch_s=sum(k.median_s for k in kernels) * 1.02, source="graph nodes", repeats=30)


def test_the_median_interval_brackets_the_median_with_order_statistics() -> None:
    values = list(range(1, 31))
    median, low, high = median_interval([float(v) for v in values], 0.99)
    assert median == 15.5 and low < median < high
    assert (low, high) == (8.0, 23.0)  # ranks 8 and 23 of 30 hold >= 99% for Binomial(30, 1/2)
    assert median_interval([1.0, 2.0, 3.0])[1:] == (1.0, 3.0)  # too few values: the whole range
    with pytest.raises(ValueError):
        median_interval([])


def test_a_diff_names_what_moved_appeared_disappeared_and_was_reconfigured() -> None:
    before = breakdown(kernel("gemm", 100, registers=96), kernel("old_fixup", 5), kernel("norm", 20, grid=64))
    after = breakdown(
        kernel("gemm", 110, registers=128, local_bytes=24), kernel("norm", 20, grid=128), kernel("new_fixup", 4)
    )
    d = diff(before, after)
    moved = {c.key: c for c in d.moved}
    assert set(moved) == {"gemm", "old_fixup", "new_fixup"}
    assert d.moved[0].key == "gemm", "the largest change in time comes first"
    assert moved["gemm"].ratio == pytest.approx(1.10, rel=1e-3)
    low, high = moved["gemm"].ratio_interval()
    assert 1.0 < low < 1.10 < high
    assert moved["gemm"].resource_changes() == {"registers": (96, 128)}
    assert [c.key for c in d.reconfigured] == ["norm"]
    lines = diff_lines(d, "HEAD~1", "now")
    text = "\n".join(lines)
    assert "moved: gemm  100 us -> 110 us  +10.0% [" in text
    assert "registers 96 -> 128" in text
    assert "disappeared: old_fixup" in text and "appeared: new_fixup" in text
    assert "launch changed: norm: grid 64x1x1 block 128x1x1 -> grid 128x1x1 block 128x1x1" in text
    assert len(lines) <= 9


def test_noise_alone_moves_no_kernel() -> None:
    before = breakdown(kernel("gemm", 100, spread=0.02), kernel("norm", 20, spread=0.02))
    after = breakdown(kernel("gemm", 100.5, spread=0.02), kernel("norm", 19.9, spread=0.02))
    d = diff(before, after)
    assert d.moved == () and d.reconfigured == ()
    assert "no kernel's own time moved beyond its interval" in "\n".join(diff_lines(d, "the baseline", "now"))


def test_a_kernel_launched_under_two_configurations_is_paired_launch_by_launch() -> None:
    before = breakdown(kernel("k", 10, grid=1), kernel("k", 30, grid=2))
    after = breakdown(kernel("k", 10, grid=1), kernel("k", 36, grid=2))
    assert [c.key for c in diff(before, after).moved] == ["k#2"]
    assert "moved: k (launch 2)" in "\n".join(diff_lines(diff(before, after), "a", "b"))


def test_another_instance_of_a_template_is_paired_with_the_one_it_replaced() -> None:
    before = breakdown(kernel("_Z5heavyILi64EEvPfi", 14), kernel("add", 11))
    after = breakdown(kernel("_Z5heavyILi80EEvPfi", 16), kernel("add", 11))
    d = diff(before, after)
    assert [(c.before_key, c.key) for c in d.moved] == [("_Z5heavyILi64EEvPfi", "_Z5heavyILi80EEvPfi")]
    names = {"_Z5heavyILi64EEvPfi": "heavy<64>", "_Z5heavyILi80EEvPfi": "heavy<80>"}
    text = "\n".join(diff_lines(d, "a", "b", names))
    assert "moved: heavy<64> -> heavy<80>  14 us -> 16 us  +14.3% [" in text
    assert "same launch and resources (dynamic smem 0 B)" in text


def test_a_breakdown_survives_json_and_a_malformed_one_is_refused_by_name() -> None:
    b = breakdown(kernel("gemm", 100, registers=96, dynamic_smem=4096), kernel("norm", 20))
    again = Breakdown.from_json(json.loads(json.dumps(b.to_json())))
    assert again == b
    with pytest.raises(ValueError, match="malformed kernel breakdown.*grid"):
        Breakdown.from_json({**b.to_json(), "kernels": [{**b.to_json()["kernels"][0], "grid": [1, 2]}]})


def test_one_side_lists_its_longest_kernels_first() -> None:
    lines = side_lines(breakdown(*(kernel(f"k{i}", 10 * i) for i in range(1, 7))), "'fast'", limit=3)
    assert lines[0].startswith("kernels of 'fast' (each kernel timed alone, hot; they sum to 98% of its launch)")
    assert [line.split()[0] for line in lines[1:4]] == ["k6", "k5", "k4"]
    assert lines[4].strip() == "and 3 more (60 us together)"


# -- through a run ------------------------------------------------------------------------------

PROJECT_TEST = """
from pytest_gpuperf import Variant
from mylib import kernels

def launch():
    pass

launch.fake_seconds = kernels.SECONDS
launch.fake_kernels = kernels.KERNELS

def test_k(gpu_perf):
    gpu_perf.measure(Variant("k", launch))
"""


def write_kernels(root: Path, gemm_share: float, seconds: float, extra: str = "") -> None:
    kernels = [{"name": "gemm", "share": gemm_share, "grid": [132, 1, 1], "registers": 96}, {"name": "norm", "share": 0.1}]
    (root / "mylib" / "kernels.py").write_text(f"SECONDS = {seconds!r}\nKERNELS = {kernels!r}\n{extra}")


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), "-c", "user.email=t@example.com", "-c", "user.name=t", *args], check=True, capture_output=True)


@pytest.fixture
def project(pytester: pytest.Pytester, fake_gpu: Callable[..., None], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A committed project whose kernel 'gemm' takes 90% of 10 us."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for cache in ("CUPY_CACHE_DIR", "TRITON_CACHE_DIR", "TORCH_EXTENSIONS_DIR"):  # the binaries' search
        monkeypatch.setenv(cache, str(tmp_path / cache.lower()))
    pytester.mkpydir("mylib")
    write_kernels(pytester.path, 0.9, 10e-6)
    pytester.makepyfile(test_perf=PROJECT_TEST)
    git(pytester.path, "init", "-q")
    git(pytester.path, "add", ".")
    git(pytester.path, "commit", "-q", "-m", "base")
    fake_gpu(spread=0.005)
    return pytester.path


def test_a_failure_against_a_revision_names_the_kernel_that_moved(pytester: pytest.Pytester, project: Path) -> None:
    write_kernels(project, 0.99, 11e-6)  # gemm: 9 us -> 10.9 us; norm 1 us -> 1.1 us
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-against=HEAD", "--gpu-perf-json=report.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*performance REGRESSION: 'k' is *% slower than at HEAD*",
        "*kernels, HEAD (*) -> now (fake, each kernel timed alone):",
        "*moved: gemm  * us -> 10.* us  +2?.?% ?+*%, +*%?",
        "*moved: norm  * us -> 1.1* us  +*%*",
        "*the kernels sum to 109% of the launch at now, 100% at HEAD (*)",
        "*gemm: no binary of it found on either side (searched the plugin's nvcc and static-tier caches,*",
    ])
    record = json.loads((project / "report.json").read_text())["tests"][0]["measurements"][0]
    assert [k["name"] for k in record["breakdown"]["kernels"]] == ["gemm", "norm"]
    assert record["breakdown_against"]["kernels"][0]["median_s"] == pytest.approx(9e-6, rel=0.01)
    assert [k["kernel"] for k in record["kernel_binaries"]] == ["gemm"]


def test_an_update_stores_the_breakdown_and_a_later_failure_compares_with_it(
    pytester: pytest.Pytester, project: Path
) -> None:
    pytester.runpytest("--gpu-perf", "--gpu-perf-update-baselines").assert_outcomes(passed=1)
    stored = json.loads(next((project / "baselines").rglob("test_perf.json")).read_text())
    entry = next(iter(stored["entries"].values()))
    assert [k["name"] for k in entry["breakdown"]["kernels"]] == ["gemm", "norm"]
    assert all(len(f"{s:g}") <= 12 for s in entry["breakdown"]["kernels"][0]["seconds"]), "kept to 4 digits"
    write_kernels(project, 0.9, 12e-6, extra="")
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-calibrate=off")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*kernels, the baseline -> now*", "*moved: gemm  * us -> 10.* us  +*%*"])


def test_a_baseline_without_a_breakdown_says_so_and_shows_the_kernels_now(
    pytester: pytest.Pytester, project: Path
) -> None:
    pytester.runpytest("--gpu-perf", "--gpu-perf-update-baselines", "--gpu-perf-breakdown=off").assert_outcomes(passed=1)
    write_kernels(project, 0.9, 12e-6)
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-calibrate=off")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*the baseline stores no kernel breakdown (one is stored when it is re-recorded)",
        "*kernels of now (fake, each kernel timed alone; they sum to 100% of its launch):",
        "*gemm  10.* us  grid 132x1x1 block 128x1x1, 96 regs",
    ])


def test_off_takes_none_and_all_takes_one_for_every_measurement(pytester: pytest.Pytester, project: Path) -> None:
    write_kernels(project, 0.99, 11e-6)
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-against=HEAD", "--gpu-perf-breakdown=off", "--gpu-perf-json=off.json")
    result.assert_outcomes(failed=1)
    assert "kernels, HEAD" not in result.stdout.str()
    assert "breakdown" not in json.loads((project / "off.json").read_text())["tests"][0]["measurements"][0]
    write_kernels(project, 0.9, 10e-6)
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-breakdown=all", "--gpu-perf-json=all.json")
    result.assert_outcomes(passed=1)
    record = json.loads((project / "all.json").read_text())["tests"][0]["measurements"][0]
    assert [k["name"] for k in record["breakdown"]["kernels"]] == ["gemm", "norm"]


CLAIM_TEST = """
from pytest_gpuperf import Variant

def fast():
    pass

def slow():
    pass

fast.fake_kernels = [{"name": "tiled", "share": 1.0}]
slow.fake_kernels = [{"name": "naive", "share": 0.8}, {"name": "copy_back", "share": 0.2}]

def test_claim(gpu_perf):
    gpu_perf.assert_speedup(Variant("fast", fast), Variant("slow", slow), at_least=1.3)
"""


def test_a_failed_claim_lists_each_variants_kernels(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(times={"fast": 10e-6, "slow": 12e-6})
    pytester.makepyfile(CLAIM_TEST)
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-json=report.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*speedup gate FAILED*",
        "*kernels of 'fast' (fake*",
        "*tiled  *us  grid 1x1x1 block 128x1x1, 32 regs",
        "*kernels of 'slow' (fake*",
        "*naive  9.* us*",
        "*copy_back  2.* us*",
    ])
    comparison = json.loads((pytester.path / "report.json").read_text())["tests"][0]["comparisons"][0]
    assert set(comparison["breakdowns"]) == {"fast", "slow"}


NO_BREAKDOWN_CONFTEST = """
from pytest_gpuperf.testing import FakeBackend, fake_device

class NoBreakdowns(FakeBackend):
    breakdown = None

def pytest_gpuperf_device(config, ordinal):
    return fake_device()

def pytest_gpuperf_backend(config, device):
    return NoBreakdowns({"k": 11e-6, "k@rev": 10e-6}, spread=0.005)
"""


def test_a_backend_without_breakdowns_says_so(pytester: pytest.Pytester, project: Path) -> None:
    (project / "conftest.py").write_text(NO_BREAKDOWN_CONFTEST)
    (project / "mylib" / "kernels.py").write_text("SECONDS = None\nKERNELS = None\n")
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-against=HEAD")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*no kernel breakdown at HEAD (*): the timing backend gives no breakdowns",
        "*no kernel breakdown at now: the timing backend gives no breakdowns",
    ])


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("_Z5heavyILi64EEvPfi", "heavy"),
        ("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_6FunctorEEEviT0_", "vectorized_elementwise_kernel"),
        ("_ZN7cutlass13device_kernelINS_4gemm6kernelEEEvNT_6ParamsE", "device_kernel"),
        ("_ZL6staticPf", "static"),
        ("k_add", "k_add"),
        ("_Zgarbage", "_Zgarbage"),
    ],
)
def test_a_kernels_identifier_is_read_from_its_mangled_name(name: str, expected: str) -> None:
    """What ties a CUPTI record (demangled) to a graph node (mangled) without a demangler."""
    from pytest_gpuperf._timing.kernel_names import identifier

    assert identifier(name) == expected


def test_a_replay_holds_enough_copies_to_last_about_200_us() -> None:
    from pytest_gpuperf._timing.kernel_nodes import copies_for

    assert copies_for(10e-6) == 20 and copies_for(1e-3) == 1 and copies_for(0.1e-6) == 256 and copies_for(0.0) == 256


def test_gpuperf_report_shows_the_kernels_of_a_failed_check(pytester: pytest.Pytester, project: Path) -> None:
    from pytest_gpuperf._cli.main import main

    write_kernels(project, 0.99, 11e-6)
    pytester.runpytest("--gpu-perf", "--gpu-perf-against=HEAD", "--gpu-perf-json=report.json").assert_outcomes(failed=1)
    for fmt, expected in (("--text", "      moved: gemm  "), ("--markdown", "  - moved: gemm  ")):
        out = pytester.path / f"out{fmt}.txt"
        import contextlib

        with out.open("w") as sink, contextlib.redirect_stdout(sink):
            assert main(["report", str(project / "report.json"), fmt]) == 0
        text = out.read_text()
        assert "Kernels of the failed and undecided checks" in text
        assert expected in text, text
        assert "test_k::k" in text
    assert main(["plots", str(project / "report.json"), str(project / "plots")]) == 0
    page = (project / "plots" / "index.html").read_text()
    assert "<h2>Kernels of the failed and undecided checks</h2>" in page and "moved: gemm  " in page


def test_registered_binaries_are_searched_first(pytester: pytest.Pytester, project: Path) -> None:
    """--gpu-perf-binaries reaches the search: a file there naming the kernel is read (this one
    is no cubin, so it is named as unreadable) before any cache."""
    (project / "bins").mkdir()
    (project / "bins" / "gemm.cubin").write_bytes(b"\x7fELF\0gemm\0")
    write_kernels(project, 0.99, 11e-6)
    result = pytester.runpytest(
        "--gpu-perf", "--gpu-perf-against=HEAD", "--gpu-perf-binaries=bins/*.cubin", "--gpu-perf-json=report.json"
    )
    result.assert_outcomes(failed=1)
    record = json.loads((project / "report.json").read_text())["tests"][0]["measurements"][0]
    (explained,) = record["kernel_binaries"]
    # read by cuobjdump where it is installed (and refused: no cubin), taken unconfirmed where not
    assert str(project / "bins" / "gemm.cubin") in json.dumps(explained)
