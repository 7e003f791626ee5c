"""Pass/fail rules. Each gate fails only on statistical evidence.

Speedup gate (``assert_speedup(fast, baseline, at_least=m)``), on the interval of the
speedup S = t_baseline / t_fast:
    PASS          the whole interval is at or above m
    FAIL          the whole interval is below m
    INCONCLUSIVE  the interval contains m (after re-sampling up to the budget)

Regression gate, on the interval of the slowdown R = t_now / t_stored and the tolerance τ:
    FAIL          R > 1 + τ/2 and the interval excludes 1 (a real slowdown, past halfway to τ)
    INCONCLUSIVE  R > 1 + τ/2 but the interval still contains 1 (too noisy to tell)
    PASS          otherwise; IMPROVED is reported when R < 1 - τ/2 and the interval excludes 1
Putting the decision halfway between "no change" and τ is what lets one setting keep A/A
false alarms under 1% and still catch a true slowdown of τ more than 95% of the time at
1-3% sample noise (``tests/plugin/test_gate_statistics.py`` measures both).
"""
from __future__ import annotations

import enum

from pytest_gpuperf.stats import Interval


class Verdict(str, enum.Enum):
    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"
    IMPROVED = "improved"
    MEASURED = "measured"  # no gate applied: no margin or no stored baseline
    RECORDED = "recorded"  # --gpu-perf-update-baselines: the result becomes the baseline
    CONTENDED = "contended"  # other processes used the GPU: not judged, never stored

    def __str__(self) -> str:
        return self.value


def speedup_verdict(speedup: Interval, at_least: float | None) -> Verdict:
    """Three-way outcome of a speedup claim; ``at_least=None`` only measures."""
    if at_least is None:
        return Verdict.MEASURED
    if speedup.low >= at_least:
        return Verdict.PASS
    if speedup.high < at_least:
        return Verdict.FAIL
    return Verdict.INCONCLUSIVE


def regression_verdict(slowdown: Interval, tolerance: float) -> Verdict:
    """Outcome of comparing a measurement with its stored baseline (see module doc)."""
    threshold = tolerance / 2.0
    if slowdown.estimate > 1.0 + threshold:
        return Verdict.FAIL if slowdown.low > 1.0 else Verdict.INCONCLUSIVE
    if slowdown.estimate < 1.0 - threshold and slowdown.high < 1.0:
        return Verdict.IMPROVED
    return Verdict.PASS


def is_decided(verdict: Verdict) -> bool:
    return verdict is not Verdict.INCONCLUSIVE
