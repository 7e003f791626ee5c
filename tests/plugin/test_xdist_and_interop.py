"""Results survive pytest-xdist (one GPU per worker) and appear in pytest-benchmark's JSON."""
from __future__ import annotations

import json
from pathlib import Path
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


SHARED_GPU_TESTS = """
import os, pathlib, time
import pytest
from pytest_gpuperf import Variant

def note(name, start, end):
    pathlib.Path("ran").mkdir(exist_ok=True)
    pathlib.Path("ran", name).write_text(f"{os.environ['PYTEST_XDIST_WORKER']} {start} {end}")

@pytest.mark.parametrize("i", range(4))
def test_timed(gpu_perf, i):
    start = time.monotonic()
    gpu_perf.measure(Variant("k", lambda: None))
    time.sleep(0.2)
    note(f"gpu-timed{i}", start, time.monotonic())

@pytest.mark.parametrize("i", range(4))
def test_on_the_device(gpuperf_device, i):
    start = time.monotonic()
    time.sleep(0.3)
    note(f"gpu-device{i}", start, time.monotonic())

@pytest.mark.parametrize("i", range(4))
def test_cpu_only(i):
    start = time.monotonic()
    time.sleep(0.3)
    note(f"cpu{i}", start, time.monotonic())
"""


def spans(pytester: pytest.Pytester, prefix: str) -> list[tuple[str, float, float]]:
    found = []
    for path in (pytester.path / "ran").iterdir():
        if path.name.startswith(prefix):
            worker, start, end = path.read_text().split()
            found.append((worker, float(start), float(end)))
    return sorted(found, key=lambda span: span[1])


def overlapping(found: list[tuple[str, float, float]]) -> bool:
    return any(later[1] < earlier[2] for earlier, later in zip(found, found[1:]))


def shared_gpu_project(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], locks: Path, gpus: str = "1"
) -> None:
    """A project of SHARED_GPU_TESTS on ``gpus`` fake GPUs, its GPU locks in ``locks``."""
    pytest.importorskip("xdist")
    fake_gpu(times={"k": 20e-6}, FAKE_GPU_COUNT=gpus, GPU_PERF_LOCK_DIR=str(locks))
    pytester.makepyfile(test_mixed=SHARED_GPU_TESTS)


@pytest.mark.slow  # pytest with several xdist workers in a subprocess, 8-14 s
def test_workers_sharing_a_gpu_run_its_tests_one_at_a_time(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], tmp_path_factory: pytest.TempPathFactory
) -> None:
    shared_gpu_project(pytester, fake_gpu, tmp_path_factory.mktemp("locks"))
    result = pytester.runpytest_subprocess("-n", "2", "--gpu-perf")  # two workers show it; each more costs a start-up
    result.assert_outcomes(passed=12)
    result.stdout.fnmatch_lines(
        ["gpu-perf: 2 xdist workers share 1 GPU(s): each test that uses a GPU holds it*--dist loadfile sets*"]
    )
    gpu = spans(pytester, "gpu-")
    assert len({worker for worker, _, _ in gpu}) > 1, "the GPU tests should still be spread over the workers"
    assert not overlapping(gpu), f"GPU tests ran at the same time: {gpu}"
    assert overlapping(sorted(spans(pytester, "cpu") + gpu, key=lambda span: span[1])), "the others should run beside them"


@pytest.mark.slow  # pytest with several xdist workers in a subprocess, 8-14 s
def test_gpu_tests_overlap_without_timing_or_with_a_gpu_per_worker(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], tmp_path_factory: pytest.TempPathFactory
) -> None:
    shared_gpu_project(pytester, fake_gpu, tmp_path_factory.mktemp("locks"))
    untimed = pytester.runpytest_subprocess("-n", "2")
    untimed.assert_outcomes(passed=8, skipped=4)
    assert "share 1 GPU" not in untimed.stdout.str()
    assert overlapping(spans(pytester, "gpu-device"))
    fake_gpu(times={"k": 20e-6}, FAKE_GPU_COUNT="2", GPU_PERF_LOCK_DIR=str(tmp_path_factory.mktemp("locks")))
    one_each = pytester.runpytest_subprocess("-n", "2", "--gpu-perf")
    one_each.assert_outcomes(passed=12)
    assert "share" not in one_each.stdout.str()
    assert overlapping(spans(pytester, "gpu-"))


@pytest.mark.slow  # pytest with several xdist workers in a subprocess, 8-14 s
def test_workers_given_one_gpu_share_it_and_a_refused_lock_fails_only_its_test(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], tmp_path_factory: pytest.TempPathFactory
) -> None:
    locks = tmp_path_factory.mktemp("locks")
    shared_gpu_project(pytester, fake_gpu, locks, gpus="2")
    same_gpu = pytester.runpytest_subprocess("-n", "2", "--gpu-perf", "--gpu-perf-device", "0")
    same_gpu.assert_outcomes(passed=12)
    same_gpu.stdout.fnmatch_lines(["gpu-perf: 2 xdist workers share 1 GPU(s): each test that uses a GPU holds it*"])
    assert not overlapping(spans(pytester, "gpu-"))
    lock = locks / "pytest-gpuperf-gpu-0000_00_00.0.lock"
    lock.unlink()
    lock.symlink_to(locks / "elsewhere")
    refused = pytester.runpytest_subprocess("-n", "2", "--gpu-perf", "--gpu-perf-device", "0")
    refused.assert_outcomes(passed=4, errors=8)
    refused.stdout.fnmatch_lines(["*gpu-perf: could not take the shared GPU for this test: *symbolic link*"])
    assert "INTERNALERROR" not in refused.stdout.str()


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
