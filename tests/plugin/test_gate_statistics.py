"""How often the gates are wrong under the noise real GPUs have (``gate_simulation``).

Every scenario runs the real sampler and gates at the default settings. Each asserts what its
``expectation`` says, with bounds chosen from the binomial distribution so that a gate meeting
its requirement passes with probability above 99.9%:
- A/A (no true change): FAIL at most 1% of the time;
- a true slowdown of a 10 us kernel (5% for a speedup claim; 8% for a regression check, whose
  calibrated threshold is the 4% band, and for a claim under levels of each kernel's own): FAIL at
  least 95% of the time;
- a true 8% slowdown on a machine that moves the kernel and its reference by different amounts,
  or under AR(1) 0.95 of each kernel's own: never PASS.
The default run asserts ``DEFAULT_TIER`` (the scenario that guards each rule of its own: a
regression check's detection, correlated batches under AR(1) 0.95, a kernel's own levels switching
every 0.05 s and 0.5 s, a machine that moves kernel and reference differently) on
``SEEDS`` seeds: enough to fail a gate that is wrong several times as often as it may be. The
``slow`` tier (``pytest -m slow``, the nightly CI job) asserts every scenario on ``SLOW_SEEDS``,
which fails a gate only slightly off its requirement.
``python -m tests.plugin.gate_simulation`` prints the table of docs/statistics.md.
"""
from __future__ import annotations

import pytest
from scipy import stats

from pytest_gpuperf import Verdict
from tests.plugin.gate_simulation import AA, CATCH, NEVER_PASS, Scenario, rates, scenarios

SEEDS = 200
SLOW_SEEDS = 2_000
CHECKED = [s for s in scenarios() if s.calibrate or s.gate == "speedup"]
DEFAULT_TIER = {
    "regression +8% code | iid 1%",
    "speedup A/A | AR(1) 0.95 per variant",
    "speedup +8% code | own levels, dwell 0.05 s",
    "speedup A/A | own levels, dwell 0.5 s",
    "regression A/A | own levels, dwell 0.5 s",
    "regression A/A, kernel +4.7% reference +1.5% | iid 1%",
    "regression +8% code, kernel +1.5% reference +4.7% | iid 1%",
}


def fail_bounds(n: int) -> tuple[int, int]:
    """(most FAILs allowed in n A/A trials, fewest FAILs required in n trials of a true slowdown),
    each exceeded by a gate exactly at its requirement with probability below 0.1%."""
    most = int(stats.binom.isf(0.001, n, 0.01))
    fewest = int(stats.binom.ppf(0.001, n, 0.95))
    return most, fewest


def check(scenario: Scenario, n: int, start: int) -> None:
    counts = rates(scenario, range(start, start + n))
    fails, passes = counts[Verdict.FAIL], counts[Verdict.PASS] + counts[Verdict.IMPROVED]
    most, fewest = fail_bounds(n)
    summary = ", ".join(f"{v.value} {k}" for v, k in sorted(counts.items(), key=lambda kv: kv[0].value))
    if scenario.expectation == CATCH:
        assert fails >= fewest, f"{scenario.label}: a true slowdown failed {fails} of {n} times ({summary})"
    elif scenario.expectation == NEVER_PASS:
        assert passes == 0, f"{scenario.label}: a true slowdown passed {passes} of {n} times ({summary})"
    else:
        assert scenario.expectation == AA
        assert fails <= most, f"{scenario.label}: A/A failed {fails} of {n} times ({summary})"


def test_the_default_tier_names_asserted_scenarios() -> None:
    assert DEFAULT_TIER <= {s.label for s in CHECKED}


@pytest.mark.parametrize("scenario", [s for s in CHECKED if s.label in DEFAULT_TIER], ids=lambda s: s.label)
def test_gate_error_rates(scenario: Scenario) -> None:
    check(scenario, SEEDS, 0)


@pytest.mark.slow
@pytest.mark.parametrize("scenario", CHECKED, ids=lambda s: s.label)
def test_gate_error_rates_on_many_seeds(scenario: Scenario) -> None:
    check(scenario, SLOW_SEEDS, 1_000_000)


def test_the_bounds_separate_a_right_gate_from_a_wrong_one() -> None:
    """A gate at its requirement passes either tier with probability above 99.9%. The default run's
    bounds fail, with probability above 95%, a gate whose false alarms are 8 times as frequent as
    allowed (8% instead of 1%) or that catches only 85% of true slowdowns; the slow tier's fail one
    at 2.5% false alarms or 92% caught."""
    for n, false_alarms, caught in ((SEEDS, 0.08, 0.85), (SLOW_SEEDS, 0.025, 0.92)):
        most, fewest = fail_bounds(n)
        assert stats.binom.sf(most, n, 0.01) < 0.001 and stats.binom.cdf(fewest - 1, n, 0.95) < 0.001
        assert stats.binom.sf(most, n, false_alarms) > 0.95, n
        assert stats.binom.cdf(fewest - 1, n, caught) > 0.95, n
