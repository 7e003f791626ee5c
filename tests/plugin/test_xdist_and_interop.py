"""Results survive pytest-xdist (one GPU per worker) and appear in pytest-benchmark's JSON."""
from __future__ import annotations

import json
from typing import Callable

import pytest

MANY_TESTS = """
import pytest
from pytest_gpuperf import Variant

@pytest.mark.parametrize("i", range(8))
def test_kernel(gpu_perf, i):
    gpu_perf.measure(Variant("k", lambda: None))
"""


def test_xdist_gives_each_worker_its_own_gpu_and_merges_results(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None]
) -> None:
    pytest.importorskip("xdist")
    fake_gpu(times={"k": 20e-6}, FAKE_GPU_COUNT="2")
    pytester.makepyfile(test_perf=MANY_TESTS)
    result = pytester.runpytest_subprocess("-n", "2", "--gpu-perf", "--gpu-perf-json=report.json", "--gpu-perf-update-baselines")
    result.assert_outcomes(passed=8)
    result.stdout.fnmatch_lines(["baselines updated (8 entries):"])
    report = json.loads((pytester.path / "report.json").read_text())
    measurements = [m for t in report["tests"] for m in t["measurements"]]
    assert len(measurements) == 8
    assert {m["gpu_ordinal"] for m in measurements} == {0, 1}, "both workers should have timed, each on its own GPU"
    stored = json.loads((pytester.path / "baselines" / "fake-gpu-sm90-132sm-80gib" / "test_perf.json").read_text())
    assert set(stored["entries"]) == {f"test_kernel[{i}]::k" for i in range(8)}


def test_gpu_results_land_in_pytest_benchmark_json(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(times={"fast": 10e-6, "slow": 12e-6})
    pytester.makepyfile(
        """
        from pytest_gpuperf import Variant

        def test_claim(gpu_perf):
            gpu_perf.assert_speedup(Variant("fast", lambda: None), Variant("slow", lambda: None), at_least=1.1)
        """
    )
    result = pytester.runpytest("--gpu-perf", "--benchmark-json=bench.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*benchmark 'gpu: test_claim': 2 tests*", "*test_claim::fast*", "*test_claim::slow*"])
    data = json.loads((pytester.path / "bench.json").read_text())
    by_name = {b["name"]: b for b in data["benchmarks"]}
    assert set(by_name) == {"test_claim::fast", "test_claim::slow"}
    fast = by_name["test_claim::fast"]
    assert fast["fullname"] == "test_gpu_results_land_in_pytest_benchmark_json.py::test_claim::fast"
    assert fast["stats"]["median"] == pytest.approx(10e-6, rel=0.02)
    assert fast["extra_info"]["quantity"] == "GPU seconds per launch (CUDA events)"
    assert fast["extra_info"]["gpu"] == "Fake GPU" and fast["extra_info"]["mode"] == "cold"
    assert by_name["test_claim::slow"]["stats"]["median"] == pytest.approx(12e-6, rel=0.02)
