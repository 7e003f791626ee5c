"""Speedup and regression gates end to end, through pytester on a fake GPU with a seeded fake timer."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest

SPEEDUP_TEST = """
from pytest_gpuperf import Variant

def test_claim(gpu_perf):
    fast = Variant("fast", lambda: None, bytes=1000)
    slow = Variant("slow", lambda: None, bytes=1000)
    gpu_perf.assert_speedup(fast, slow, at_least={margin})
"""

MEASURE_TESTS = """
import pytest
from pytest_gpuperf import Variant

def test_one(gpu_perf):
    gpu_perf.measure(Variant("kernel", lambda: None))

def test_two(gpu_perf):
    gpu_perf.measure(Variant("other", lambda: None))
"""


def lit(*patterns: str) -> list[str]:
    """fnmatch patterns whose square brackets are literal (fnmatch reads them as character sets)."""
    return [p.replace("[", "?").replace("]", "?") for p in patterns]


def baseline_file(pytester: pytest.Pytester, module: str) -> Path:
    return pytester.path / "baselines" / "fake-gpu-sm90-132sm-80gib" / f"{module}.json"


def test_speedup_that_holds_passes_and_is_summarised(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(times={"fast": 10e-6, "slow": 12e-6})
    pytester.makepyfile(SPEEDUP_TEST.format(margin=1.1))
    result = pytester.runpytest("--gpu-perf")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(lit(
            "*gpu-perf summary*",
            "test*variant*median*CI*speedup (required)*vs baseline*verdict",
            "test_claim*fast*10* us*1.*x [1.1*, 1.2*] (1.100)*no baseline*pass/measured*",
            "test_claim*slow*12* us*",
            "verdicts: *1 speedup pass*",
    ))


def test_speedup_below_margin_fails_with_a_table(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(times={"fast": 10e-6, "slow": 12e-6})
    pytester.makepyfile(SPEEDUP_TEST.format(margin=1.3))
    result = pytester.runpytest("--gpu-perf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(lit(
            "*speedup gate FAILED: 'fast' vs 'slow' must be >= 1.300x",
            "*variant*median*99.6667% CI*noise (IQR)*samples*mode",
            "*fast*us*[*us, *us]*%*n=*cold/fake*",
            "*slow*12* us*",
            "*speedup*1.*x*[1.1*, 1.2*]*99.6667% CI, batch means over * interleaved rounds, look * of 3*",
            "*required*>= 1.3000x: the whole interval lies below the required margin",
    ))


def test_undecided_claim_warns_by_default_and_can_fail(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(times={"fast": 10e-6, "slow": 10e-6})
    pytester.makepyfile(SPEEDUP_TEST.format(margin=1.0))
    result = pytester.runpytest("--gpu-perf")
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(lit("*GpuPerfInconclusive*speedup gate INCONCLUSIVE*", "verdicts: *1 speedup inconclusive*"))
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-inconclusive=fail")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(lit("*the interval contains the margin even after re-sampling*"))


def test_a_a_comparison_never_fails(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(times={"k": 10e-6}, spread=0.03)
    pytester.makepyfile(
        """
        import pytest
        from pytest_gpuperf import Variant

        @pytest.mark.parametrize("seed", range(5))
        def test_aa(gpu_perf, seed):
            k = Variant("k", lambda: None)
            c = gpu_perf.assert_speedup(k, k, at_least=0.98)
            assert c.fast.name == "k#a" and c.baseline.name == "k#b"
        """
    )
    pytester.runpytest("--gpu-perf").assert_outcomes(passed=5)


def test_record_then_detect_regression(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(times={"kernel": 20e-6, "other": 30e-6})
    pytester.makepyfile(test_perf=MEASURE_TESTS)
    result = pytester.runpytest("--gpu-perf")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(lit("*2 measurement(s) have no stored baseline for this GPU; record them with: pytest --gpu-perf --gpu-perf-update-baselines"))

    result = pytester.runpytest("--gpu-perf", "--gpu-perf-update-baselines")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(lit("baselines updated (2 entries):", "  *test_perf.json:", "    + test_one::kernel: * us (new)", "    + test_two::other: * us (new)"))
    stored = json.loads(baseline_file(pytester, "test_perf").read_text())
    assert set(stored["entries"]) == {"test_one::kernel", "test_two::other"}
    assert stored["entries"]["test_one::kernel"]["median_s"] == pytest.approx(20e-6, rel=0.01)

    fake_gpu(times={"kernel": 20.2e-6, "other": 30e-6}, seed=1)  # 1% slower: within tolerance
    result = pytester.runpytest("--gpu-perf")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(lit("test_one*kernel*+?.?%*pass"))

    fake_gpu(times={"kernel": 22e-6, "other": 30e-6}, seed=2)  # 10% slower
    result = pytester.runpytest("--gpu-perf")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(lit(
            "*performance REGRESSION: 'kernel' is *% slower than its stored baseline for fake-gpu-sm90-132sm-80gib*",
            "*now*2* us*",
            "*baseline** us*20??-*",
            "*slowdown*x ?*? (99.6667% CI, relative to reference:copy timed in the same rounds, now and when recorded)",
            "*threshold 1.0400x = 1 + max(tolerance 5% / 2, calibrated band 4%): the whole interval lies above it",
            "*SM clock 1980-1980 MHz now, 1980-1980 MHz when recorded",
            "*re-record with pytest --gpu-perf --gpu-perf-update-baselines",
    ))
    # A per-test tolerance loosens the gate for that test only.
    pytester.makepyfile(test_perf=MEASURE_TESTS.replace("def test_one", "@pytest.mark.gpu_perf(tolerance=0.3)\ndef test_one"))
    pytester.runpytest("--gpu-perf").assert_outcomes(passed=2)


def test_update_of_a_subset_keeps_the_other_entries(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(times={"kernel": 20e-6, "other": 30e-6})
    pytester.makepyfile(test_perf=MEASURE_TESTS)
    pytester.runpytest("--gpu-perf", "--gpu-perf-update-baselines").assert_outcomes(passed=2)
    fake_gpu(times={"kernel": 25e-6, "other": 30e-6})
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-update-baselines", "-k", "test_one")
    result.stdout.fnmatch_lines(lit("    ~ test_one::kernel: * us -> * us (+2*%)"))
    stored = json.loads(baseline_file(pytester, "test_perf").read_text())["entries"]
    assert stored["test_one::kernel"]["median_s"] == pytest.approx(25e-6, rel=0.01)
    assert stored["test_two::other"]["median_s"] == pytest.approx(30e-6, rel=0.01)


@pytest.mark.parametrize(("policy", "outcome"), [("pass", {"passed": 2}), ("skip", {"skipped": 2}), ("fail", {"failed": 2})])
def test_missing_baseline_policy(pytester: pytest.Pytester, fake_gpu: Callable[..., None], policy: str, outcome: dict[str, int]) -> None:
    pytester.makepyfile(test_perf=MEASURE_TESTS)
    result = pytester.runpytest("--gpu-perf", f"--gpu-perf-missing-baseline={policy}", "-rs")
    result.assert_outcomes(**outcome)
    result.stdout.fnmatch_lines(lit("*no stored baseline for 'test_one::kernel' on fake-gpu-sm90-132sm-80gib*"))


def test_corrupt_baseline_is_an_error_naming_file_and_field(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    pytester.makepyfile(test_perf=MEASURE_TESTS)
    pytester.runpytest("--gpu-perf", "--gpu-perf-update-baselines").assert_outcomes(passed=2)
    path = baseline_file(pytester, "test_perf")
    data = json.loads(path.read_text())
    data["entries"]["test_one::kernel"]["median_s"] = "fast"
    path.write_text(json.dumps(data))
    before = path.read_bytes()
    result = pytester.runpytest("--gpu-perf")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(lit("*baseline file *test_perf.json: field 'entries.test_one::kernel.median_s' must be a time per launch from 1e-07 s to 1000 s, got 'fast'*"))
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-update-baselines")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(lit("*gpu-perf: baselines * NOT written: baseline file*median_s*"))
    assert path.read_bytes() == before, "a corrupt baseline file must never be overwritten"


def test_json_report_contents(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(times={"fast": 10e-6, "slow": 12e-6})
    pytester.makepyfile(
        SPEEDUP_TEST.format(margin=1.1)
        + "\n    gpu_perf.record('bandwidth_fraction', 0.9, 'of copy bandwidth')\n"
        + "\ndef test_cpu_only():\n    pass\n"
        + "\nimport pytest\n@pytest.mark.gpu_arch('sm_100a')\ndef test_blackwell(gpu):\n    pass\n"
    )
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-json=out/report.json")
    result.assert_outcomes(passed=2, skipped=1)
    result.stdout.fnmatch_lines(lit("gpu-perf: JSON report *out/report.json"))
    report = json.loads((pytester.path / "out" / "report.json").read_text())
    assert report["schema"] == "pytest-gpuperf/report/1"
    assert list(report["devices"]) == ["fake-gpu-sm90-132sm-80gib"]
    tests = {t["nodeid"]: t for t in report["tests"]}
    claim = tests["test_json_report_contents.py::test_claim"]
    assert claim["outcome"] == "passed"
    assert [c["verdict"] for c in claim["comparisons"]] == ["pass"]
    assert claim["comparisons"][0]["speedup"] == pytest.approx(1.2, rel=0.01)
    assert sorted(m["measurement"]["name"] for m in claim["measurements"]) == ["fast", "slow"]
    fast = next(m for m in claim["measurements"] if m["measurement"]["name"] == "fast")
    assert fast["measurement"]["bandwidth"] == pytest.approx(1000 / 10e-6, rel=0.01)
    assert fast["key"] == "test_claim::fast" and len(fast["samples"]) == fast["measurement"]["n"]
    assert claim["figures"] == [{"key": "bandwidth_fraction", "value": 0.9, "unit": "of copy bandwidth"}]
    assert tests["test_json_report_contents.py::test_blackwell"]["outcome"] == "skipped"
    assert report["skipped"][0]["reason"].startswith("needs compute capability 10.x")
    assert report["summary"] == {"speedup pass": 1, "baseline measured": 2}


def test_throttled_measurement_is_retried_and_flagged(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(times={"kernel": 20e-6}, FAKE_THROTTLED="1")
    pytester.makepyfile(
        """
        from pytest_gpuperf import Variant

        def test_hot(gpu_perf):
            m = gpu_perf.measure(Variant("kernel", lambda: None))
            assert m.throttled
            assert [n.split(":")[0] for n in m.notes] == ["GPU throttled during attempt 1", "GPU throttled during attempt 2"]
            assert "hw_thermal_slowdown" in m.notes[0]
        """
    )
    result = pytester.runpytest("--gpu-perf")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(lit("test_hot*kernel (throttled)*"))


def test_launch_errors_surface_with_the_variant_name(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    pytester.makepyfile(
        """
        from pytest_gpuperf import Variant

        def boom():
            raise RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS")

        def test_bad(gpu_perf):
            gpu_perf.measure(Variant("broken", boom))
        """
    )
    result = pytester.runpytest("--gpu-perf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(lit("*CUDA_ERROR_ILLEGAL_ADDRESS*"))


def test_a_claim_without_a_margin_measures_and_passes(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(times={"fast": 10e-6, "slow": 12e-6})
    pytester.makepyfile(SPEEDUP_TEST.format(margin=None))
    result = pytester.runpytest("--gpu-perf")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(lit("test_claim*fast*1.*x [1.1*, 1.2*] (none)*measured/*"))
