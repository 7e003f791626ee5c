"""The full tier: perf tests marked gpu_perf_full run only when asked (CPU only, a fake GPU)."""
from __future__ import annotations

import json
from typing import Callable

import pytest

TIERED = """
import pytest
from pytest_gpuperf import Variant

@pytest.mark.parametrize("case", [
    "gated",
    pytest.param("grid", marks=pytest.mark.gpu_perf_full),
])
def test_case(gpu_perf, case):
    gpu_perf.measure(Variant(case, lambda: None))

@pytest.mark.gpu_perf_full
def test_marked_only():
    pass
"""


def test_full_tier_tests_skip_with_their_reason_unless_asked(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(times={"gated": 5e-6, "grid": 7e-6})
    pytester.makepyfile(TIERED)
    result = pytester.runpytest("--gpu-perf", "-rs", "--gpu-perf-missing-baseline=pass")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(["*perf test of the full tier (gpu_perf_full): run with --gpu-perf-full*"])
    pytester.runpytest("--gpu-perf", "--gpu-perf-full").assert_outcomes(passed=3)


def test_the_full_tier_follows_the_environment_and_its_off_switch(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_gpu(times={"gated": 5e-6, "grid": 7e-6})
    pytester.makepyfile(TIERED)
    monkeypatch.setenv("GPU_PERF_FULL", "1")
    pytester.runpytest("--gpu-perf").assert_outcomes(passed=3)
    pytester.runpytest("--gpu-perf", "--no-gpu-perf-full").assert_outcomes(passed=1, skipped=2)


def test_a_baseline_update_records_the_full_tier_too(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(times={"gated": 5e-6, "grid": 7e-6})
    pytester.makepyfile(TIERED)
    pytester.runpytest("--gpu-perf", "--gpu-perf-update-baselines").assert_outcomes(passed=3)
    stored = [json.loads(p.read_text()) for p in (pytester.path / "baselines").rglob("*.json")]
    keys = {key for data in stored for key in data["entries"]}
    assert keys == {"test_case[gated]::gated", "test_case[grid]::grid"}


def test_without_timing_the_full_tier_says_timing_is_off(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(times={"gated": 5e-6, "grid": 7e-6})
    pytester.makepyfile(TIERED)
    result = pytester.runpytest("-rs")
    result.assert_outcomes(skipped=3)
    result.stdout.fnmatch_lines(["*timing is off*"])


def test_a_test_marked_only_full_is_a_perf_test_for_m_gpu_perf(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(times={"gated": 5e-6, "grid": 7e-6})
    pytester.makepyfile(TIERED + "\n\ndef test_plain():\n    pass\n")
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-full", "-m", "gpu_perf")
    result.assert_outcomes(passed=3, deselected=1)  # test_marked_only uses no fixture, only the marker


def test_the_full_marker_takes_no_arguments(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(times={"k": 5e-6})
    pytester.makepyfile(
        "import pytest\n\n@pytest.mark.gpu_perf_full(tolerance=0.1)\ndef test_a(gpu_perf):\n    pass\n"
    )
    result = pytester.runpytest("--gpu-perf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*test_a: @pytest.mark.gpu_perf_full takes no arguments; give settings to @pytest.mark.gpu_perf(...)*"])


def test_without_a_gpu_the_full_tier_counts_as_no_gpu(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(cc="none")
    pytester.makepyfile(TIERED)
    result = pytester.runpytest("--gpu-perf", "-rs")
    result.assert_outcomes(skipped=3)
    result.stdout.fnmatch_lines(["*no GPU: fake: this machine has no GPU*"])
    assert "full tier" not in result.stdout.str()
