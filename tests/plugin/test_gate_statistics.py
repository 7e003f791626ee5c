"""How often the gates are wrong under the noise real GPUs have (``gate_simulation``).

Every scenario runs the real sampler and gates at the default settings. The default run takes
``SEEDS`` seeds per scenario and asserts bounds chosen from the binomial distribution so that a
gate meeting its requirement passes with probability above 99.9%:
- A/A (no true change): FAIL at most 1% of the time;
- a true 5% slowdown (of a 10 us kernel): FAIL at least 95% of the time;
in every noise model, and for regression checks also on a machine that runs everything
-1.5% to +4.7% slower than the one the baseline was recorded on (calibrated mode, the default).
The ``slow`` tier (``pytest -m slow``, the nightly CI job) asserts the same on 10,000 seeds.
``python -m tests.plugin.gate_simulation`` prints the table of docs/statistics.md.
"""
from __future__ import annotations

import pytest
from scipy import stats

from pytest_gpuperf import Verdict
from tests.plugin.gate_simulation import Scenario, rates, scenarios, wants_fail

SEEDS = 200
SLOW_SEEDS = 10_000
CHECKED = [s for s in scenarios() if s.calibrate or s.gate == "speedup"]


def fail_bounds(n: int) -> tuple[int, int]:
    """(most FAILs allowed in n A/A trials, fewest FAILs required in n trials of a 5% slowdown),
    each exceeded by a gate exactly at its requirement with probability below 0.1%."""
    most = int(stats.binom.isf(0.001, n, 0.01))
    fewest = int(stats.binom.ppf(0.001, n, 0.95))
    return most, fewest


def check(scenario: Scenario, n: int, start: int) -> None:
    counts = rates(scenario, range(start, start + n))
    fails = counts[Verdict.FAIL]
    most, fewest = fail_bounds(n)
    summary = ", ".join(f"{v.value} {k}" for v, k in sorted(counts.items(), key=lambda kv: kv[0].value))
    if wants_fail(scenario):
        assert fails >= fewest, f"{scenario.label}: a true 5% slowdown failed {fails} of {n} times ({summary})"
    else:
        assert fails <= most, f"{scenario.label}: A/A failed {fails} of {n} times ({summary})"


@pytest.mark.parametrize("scenario", CHECKED, ids=lambda s: s.label)
def test_gate_error_rates(scenario: Scenario) -> None:
    check(scenario, SEEDS, 0)


@pytest.mark.slow
@pytest.mark.parametrize("scenario", CHECKED, ids=lambda s: s.label)
def test_gate_error_rates_on_many_seeds(scenario: Scenario) -> None:
    check(scenario, SLOW_SEEDS, 1_000_000)


def test_the_bounds_separate_a_right_gate_from_a_wrong_one() -> None:
    """The default run's bounds catch a gate whose error rate is several times its requirement."""
    most, fewest = fail_bounds(SEEDS)
    assert stats.binom.sf(most, SEEDS, 0.01) < 0.001 and stats.binom.cdf(fewest - 1, SEEDS, 0.95) < 0.001
    assert stats.binom.sf(most, SEEDS, 0.08) > 0.95  # an 8% false-alarm rate fails the test
    assert stats.binom.cdf(fewest - 1, SEEDS, 0.80) > 0.95  # catching 80% fails it too
