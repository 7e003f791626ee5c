"""Pass/fail rules. Each gate fails only on statistical evidence.

Speedup gate (``assert_speedup(fast, baseline, at_least=m)``), on the interval of the
speedup S = t_baseline / t_fast:
    PASS          the whole interval is at or above m
    FAIL          the whole interval is below m
    INCONCLUSIVE  the interval contains m (after re-sampling up to the budget)

Regression gate, on the interval of the slowdown R = t_now / t_stored (each time relative
to a reference kernel timed in the same rounds, when both runs have one), the tolerance τ
and the machine band b, with the threshold θ = max(τ/2, b):
    FAIL          the whole interval lies above 1 + θ
    INCONCLUSIVE  R > 1 + θ, but the interval reaches below 1 + θ (not established)
    IMPROVED      the whole interval lies below 1 - θ
    PASS          otherwise
θ is a noise threshold in the manner of criterion's: a slowdown smaller than the band is
never a failure, however sure; deciding at τ/2 catches a true slowdown of τ whenever the
interval is narrower than τ/2.

Neither gate decides on batches that are not independent (``stats.Estimate.independent``: too
short next to the series' correlation time, or a level that moved during the run): a speedup
claim's PASS or FAIL and a regression check's FAIL or IMPROVED become INCONCLUSIVE there (a
regression check still passes when its estimate is within θ).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from pytest_gpuperf._gates.stats import Interval


class Verdict(str, enum.Enum):
    PASS = "pass"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"
    IMPROVED = "improved"
    MEASURED = "measured"  # no gate applied: no margin or no stored baseline
    RECORDED = "recorded"  # --gpu-perf-update-baselines: the result becomes the baseline
    NOT_RECORDED = "not recorded"  # --gpu-perf-update-baselines, but the entry or its file was refused
    CONTENDED = "contended"  # other processes used the GPU: not judged, never stored

    def __str__(self) -> str:
        return self.value


def speedup_verdict(speedup: Interval, at_least: float | None, independent: bool = True) -> Verdict:
    """Three-way outcome of a speedup claim; ``at_least=None`` only measures."""
    if at_least is None:
        return Verdict.MEASURED
    if not independent:
        return Verdict.INCONCLUSIVE
    if speedup.low >= at_least:
        return Verdict.PASS
    if speedup.high < at_least:
        return Verdict.FAIL
    return Verdict.INCONCLUSIVE


@dataclass(frozen=True)
class Bands:
    """The band b of a regression check, by what is compared."""

    machine: float  # raw times: a whole machine's difference
    calibrated: float  # times relative to a reference timed in the same rounds
    level: float  # calibrated times against an entry's stored levels (``levels``)


def regression_threshold(tolerance: float, band: float = 0.0) -> float:
    """θ: the relative slowdown beyond which an established one fails (see module doc)."""
    return max(tolerance / 2.0, band)


def regression_verdict(slowdown: Interval, tolerance: float, band: float = 0.0, independent: bool = True) -> Verdict:
    """Outcome of comparing a measurement with its stored baseline (see module doc)."""
    threshold = regression_threshold(tolerance, band)
    if slowdown.estimate > 1.0 + threshold:
        return Verdict.FAIL if independent and slowdown.low > 1.0 + threshold else Verdict.INCONCLUSIVE
    if independent and slowdown.high < 1.0 - threshold:
        return Verdict.IMPROVED
    return Verdict.PASS


def is_decided(verdict: Verdict) -> bool:
    return verdict is not Verdict.INCONCLUSIVE
