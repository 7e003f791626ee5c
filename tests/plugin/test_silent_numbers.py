"""No silent wrong number: empty captures, escaped work, impossible samples and an unknown or
shared GPU each get their documented outcome, and none of them reaches a stored baseline."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable

import pytest

MEASURE_ONE = """
from pytest_gpuperf import Variant

def test_k(gpu_perf):
    gpu_perf.measure(Variant("k", lambda: None))
"""

MEASURE_AND_ASSERT = """
from pytest_gpuperf import Variant

def test_k(gpu_perf):
    m = gpu_perf.measure(Variant("k", lambda: None))
    assert m.median_s < 6e-6  # a test's own claim on the number
"""

COMPARE = """
from pytest_gpuperf import Variant

def test_claim(gpu_perf):
    gpu_perf.assert_speedup(Variant("fast", lambda: None), Variant("slow", lambda: None), at_least=1.1)
"""


def baselines(pytester: pytest.Pytester) -> list[Path]:
    return sorted((pytester.path / "baselines").rglob("*.json"))


def run_update(pytester: pytest.Pytester) -> pytest.RunResult:
    return pytester.runpytest("--gpu-perf", "--gpu-perf-update-baselines", "--gpu-perf-json=report.json")


def test_empty_capture_is_an_error_and_stores_nothing(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(times={"k": 5e-6}, FAKE_CAPTURED=json.dumps({"k": 0}))
    pytester.makepyfile(MEASURE_ONE)
    result = run_update(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*variant 'k': the captured CUDA graph holds no kernel, copy or memset*"])
    assert baselines(pytester) == []


def test_work_escaping_to_another_stream_is_an_error(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(times={"k": 5e-6}, FAKE_CAPTURED=json.dumps({"k": 1}), FAKE_ESCAPED=json.dumps({"k": 1}))
    pytester.makepyfile(MEASURE_ONE)
    result = run_update(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*variant 'k': part of its GPU work runs off the timing stream and would not be timed "
        "(1 operation(s) on 1 other stream(s): fake_side_kernel; 1 on the timing stream)*"
    ])
    assert baselines(pytester) == []


@pytest.mark.parametrize("bad", [math.nan, math.inf, 0.0, -2e-6])
def test_impossible_samples_are_errors_never_baselines(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], bad: float
) -> None:
    fake_gpu(times={"k": 5e-6}, FAKE_INJECT=json.dumps({"k": [5e-6, 5e-6, bad]}))
    pytester.makepyfile(MEASURE_ONE)
    result = run_update(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*variant 'k': sample 3 is {bad!r} s, not a positive time*"])
    assert baselines(pytester) == []


def test_a_time_below_any_launch_is_refused(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    """0.001 us per launch: what an unadopted torch launch measured (an empty graph's replay)."""
    fake_gpu(times={"k": 1e-9}, spread=0.0)
    pytester.makepyfile(MEASURE_ONE)
    result = run_update(pytester)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*variant 'k': 0.0010 us per launch (fake) is below 0.5 us*its GPU work was not timed*"])
    assert baselines(pytester) == []


def test_a_launch_taking_one_argument_gets_the_timing_stream(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    pytester.makepyfile(
        """
        from pytest_gpuperf import Variant

        seen = []

        def test_k(gpu_perf):
            gpu_perf.measure(Variant("k", lambda stream: seen.append(stream)), check_baseline=False)
            stream = seen[0]
            assert stream.__cuda_stream__() == (0, int(stream)) and int(stream) == stream.ptr != 0
        """
    )
    pytester.runpytest("--gpu-perf").assert_outcomes(passed=1)


def test_without_nvml_results_say_health_is_unknown(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(times={"k": 5e-6}, FAKE_NVML="0")
    pytester.makepyfile(MEASURE_ONE)
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-json=report.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["gpu-perf health: clocks and throttling unknown for 1 measurement(s): fake: NVML is not available"])
    report = json.loads((pytester.path / "report.json").read_text())
    assert report["health"]["clocks_unknown"] == 1
    measurement = report["tests"][0]["measurements"][0]["measurement"]
    assert measurement["health"]["state"] == "unknown"
    assert "clocks and throttling unknown: fake: NVML is not available" in measurement["notes"]

    result = pytester.runpytest("--gpu-perf", "--gpu-perf-require-health")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*clocks and throttling are unknown (fake: NVML is not available), and --gpu-perf-require-health is set*"])


BUSY = json.dumps([{"pid": 4242, "name": "other-job", "sm_percent": 97}])


def test_a_shared_gpu_is_contended_not_a_regression(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    """Another job doubles every time: without the check the regression gate would fail, and the
    test's own assertion on the measured time would too."""
    fake_gpu(times={"k": 5e-6})
    pytester.makepyfile(MEASURE_AND_ASSERT)
    run_update(pytester).assert_outcomes(passed=1)
    stored = baselines(pytester)[0].read_text()

    fake_gpu(times={"k": 5e-6}, FAKE_OTHERS=BUSY)
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-quiet-wait=3", "--gpu-perf-json=report.json", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([
        "*contended: 'k' was measured while other processes used the GPU (pid 4242 (other-job, 97% SM)); "
        "its numbers are neither judged nor stored*",
        "gpu-perf health: 1 measurement(s) shared the GPU with other processes*",
        "  test_k::k: pid 4242 (other-job)",
    ])
    assert "REGRESSION" not in result.stdout.str()
    report = json.loads((pytester.path / "report.json").read_text())
    record = report["tests"][0]["measurements"][0]
    assert record["verdict"] == "contended" and record["regression"] is None
    assert record["measurement"]["health"]["waited_s"] == 3.0

    result = pytester.runpytest("--gpu-perf", "--gpu-perf-quiet-wait=0", "--gpu-perf-inconclusive=fail")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*contended: 'k' was measured while other processes used the GPU*rerun on a quiet GPU*"])

    result = pytester.runpytest("--gpu-perf", "--gpu-perf-quiet-wait=0", "--gpu-perf-update-baselines")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["baselines NOT recorded for 1 measurement(s):", "  test_k::k: contended*"])
    assert baselines(pytester)[0].read_text() == stored


def test_a_contended_speedup_claim_is_not_judged(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(times={"fast": 10e-6, "slow": 20e-6}, FAKE_OTHERS=BUSY)
    pytester.makepyfile(COMPARE)
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-quiet-wait=0", "--gpu-perf-json=report.json")
    result.assert_outcomes(skipped=1)
    comparison = json.loads((pytester.path / "report.json").read_text())["tests"][0]["comparisons"][0]
    assert comparison["verdict"] == "inconclusive"
    assert any(note.startswith("contended: ") and "pid 4242" in note for note in comparison["notes"])


def test_the_run_waits_for_a_job_that_leaves(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(times={"k": 5e-6}, FAKE_OTHERS=json.dumps([{"pid": 7, "name": "short-job", "sm_percent": 80, "until_s": 2.5}]))
    pytester.makepyfile(MEASURE_ONE)
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-json=report.json")
    result.assert_outcomes(passed=1)
    measurement = json.loads((pytester.path / "report.json").read_text())["tests"][0]["measurements"][0]["measurement"]
    assert measurement["health"]["state"] == "ok"
    assert measurement["health"]["waited_s"] == 5.0  # quiet: no other process in the last LOOKBACK_S (2 s)


def test_an_impossible_sample_under_load_is_contention_not_an_error(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None]
) -> None:
    """Time-slicing with another job can push a cold-mode subtraction below zero (seen on an H100)."""
    fake_gpu(times={"k": 5e-6}, FAKE_OTHERS=BUSY, FAKE_INJECT=json.dumps({"k": [-7e-5]}))
    pytester.makepyfile(MEASURE_ONE)
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-quiet-wait=0", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines([
        "*contended: variant 'k' gave an impossible sample (-7e-05 s) while other processes used the GPU "
        "(pid 4242 (other-job, 97% SM)); its numbers are neither judged nor stored*"
    ])


def test_a_mig_partition_is_stated(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(times={"k": 5e-6}, FAKE_MIG="1")
    pytester.makepyfile(MEASURE_ONE)
    pytester.runpytest("--gpu-perf", "--gpu-perf-json=report.json").assert_outcomes(passed=1)
    measurement = json.loads((pytester.path / "report.json").read_text())["tests"][0]["measurements"][0]["measurement"]
    assert measurement["health"]["mig"] is True
    assert any("MIG mode" in note for note in measurement["notes"])
