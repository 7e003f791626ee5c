"""A comparison whose speedup moved between levels during its run is told apart from noise."""
from __future__ import annotations

import dataclasses
import json
from typing import Callable

import numpy as np
import pytest

from pytest_gpuperf import Variant, Verdict
from pytest_gpuperf._report.summary import format_comparison_failure
from pytest_gpuperf._gates.stats import batch_estimate, level_shift
from pytest_gpuperf.testing import FakeBackend, noise
from pytest_gpuperf._timing.sampler import SamplingPolicy, compare

TIMES = {"fast": 10e-6, "slow": 12e-6}


def _noop() -> None:
    pass


def test_independent_noise_rarely_reads_as_a_level_shift() -> None:
    rng = np.random.default_rng(0)
    found = sum(level_shift(batch_estimate(rng.normal(0.0, 0.03, 200))) is not None for _ in range(1000))
    assert found <= 25  # von Neumann's test at 1%: about ten in a thousand


def test_two_levels_are_found_with_both_medians() -> None:
    rng = np.random.default_rng(1)
    samples = np.concatenate([1.2 * rng.lognormal(0, 0.01, 100), 1.043 * rng.lognormal(0, 0.01, 100)])
    estimate = batch_estimate(np.log(samples))
    shift = level_shift(estimate)
    assert shift is not None and shift.p_value < 0.01 and estimate is not None and not estimate.independent
    assert shift.lowest_median == pytest.approx(1.043, rel=0.01) and shift.highest_median == pytest.approx(1.2, rel=0.01)


def test_levels_that_alternate_faster_than_a_batch_are_noise_not_a_shift() -> None:
    """A level switching within every batch averages out across batches: no shift, and its
    correlation time is far shorter than a batch."""
    rng = np.random.default_rng(2)
    levels = np.repeat(rng.integers(0, 2, 400), 5) * np.log(1.1)
    estimate = batch_estimate(levels + rng.normal(0, 0.01, levels.size))
    assert level_shift(estimate) is None and estimate is not None and estimate.independent


def _compare(at_least: float, period_s: float):
    models = [noise.Lognormal(0.01), noise.Alternating("fast", 1.15, period_s)]
    backend = FakeBackend(TIMES, noise=models, seed=0, call_launch=False)
    return compare(backend, Variant("fast", _noop), Variant("slow", _noop), SamplingPolicy(), at_least, "cold")


@pytest.mark.parametrize("period_s", [0.01, 0.03])
def test_a_margin_that_only_part_of_the_run_clears_is_inconclusive(period_s: float) -> None:
    """The speedup alternates between 1.20x and 1.04x: a 1.1x claim is neither met nor missed.
    Short stretches at each level widen the batch-means interval over the margin; long ones
    also show as a level shift, whose note names both levels."""
    c = _compare(at_least=1.1, period_s=period_s)
    assert c.verdict is Verdict.INCONCLUSIVE
    assert c.ci_low < 1.1 < c.ci_high or c.level_shift is not None


def test_a_level_shift_is_reported_with_both_levels() -> None:
    """"fast" takes 15% longer from 60 ms on, inside a short run: both levels are in the data."""
    backend = FakeBackend(TIMES, noise=[noise.Lognormal(0.01), noise.Step("fast", 1.15, 0.06)], seed=0, call_launch=False)
    policy = dataclasses.replace(SamplingPolicy(), budget_s=0.15, extension_budget_s=0.0)
    c = compare(backend, Variant("fast", _noop), Variant("slow", _noop), policy, 1.1, "cold")
    assert c.verdict is Verdict.INCONCLUSIVE
    shift = c.summary()["level_shift"]
    assert shift is not None and shift["lowest_median"] < 1.1 < shift["highest_median"]
    assert any("moved between levels" in n for n in c.notes) and c.summary()["notes"] == c.notes
    assert "note      the time moved between levels" in format_comparison_failure(c)


def test_the_summary_lists_shifted_comparisons(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(times=TIMES, FAKE_LEVELS=json.dumps({"fast": (1.15, 0.06)}))
    pytester.makepyfile(
        """
        from pytest_gpuperf import Variant

        def test_claim(gpu_perf):
            fast = Variant("fast", lambda: None)
            slow = Variant("slow", lambda: None)
            gpu_perf.assert_speedup(fast, slow, at_least=1.1)
        """
    )
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-budget=0.1", "--gpu-perf-json", "report.json")
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines([
        "1 comparison(s) moved between levels during their run (a clock, power state or buffer placement*",
        "  test_the_summary_lists_shifted_comparisons.py::test_claim: fast vs slow 1.0*x, inconclusive",
    ])
    (comparison,) = json.loads((pytester.path / "report.json").read_text())["tests"][0]["comparisons"]
    assert any("moved between levels" in n for n in comparison["notes"]) and comparison["level_shift"]["p_value"] < 0.01
