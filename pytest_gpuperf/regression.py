"""Judging a measurement against its stored baseline (the rule is in ``gates``).

When the run and the stored entry both carry a calibration against the same reference kernel,
the ratio compared is (t / t_reference) now over (t / t_reference) then: a slower or faster
machine, a clock level or a drift that moves the kernel and the reference alike cancels.
Otherwise the raw times are compared, and only the machine band b separates a machine's
offset from a regression.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pytest_gpuperf.gates.stats import Estimate, Interval, estimate_from_interval
from pytest_gpuperf.gates.verdict import Verdict, regression_threshold, regression_verdict
from pytest_gpuperf.results import Comparison, Measurement
from pytest_gpuperf.store.baselines import Entry


@dataclass(frozen=True)
class RegressionCheck:
    """The slowdown now / stored, the threshold applied, and the verdict."""

    slowdown: Interval
    threshold: float
    tolerance: float
    band: float
    calibrated_by: str | None
    independent: bool
    verdict: Verdict

    def summary(self) -> dict[str, Any]:
        return {
            "slowdown": self.slowdown.estimate,
            "ci_low": self.slowdown.low,
            "ci_high": self.slowdown.high,
            "confidence": self.slowdown.confidence,
            "tolerance": self.tolerance,
            "band": self.band,
            "threshold": self.threshold,
            "calibrated_by": self.calibrated_by,
            "independent": self.independent,
            "verdict": str(self.verdict),
        }


def check_regression(
    m: Measurement, entry: Entry, tolerance: float, machine_band: float, calibrated_band: float
) -> RegressionCheck:
    """Compare ``m`` with ``entry`` at the measurement's own (look) confidence. The band is
    ``calibrated_band`` when both are calibrated against the same reference (what calibration
    leaves of a machine's difference), else ``machine_band`` (a whole machine's difference)."""
    now_cal = (m.calibration.reference, m.calibration.estimate) if m.calibration else None
    now_raw = m.estimate or estimate_from_interval(m.interval)
    return _judge(now_raw, now_cal, entry, m.confidence, tolerance, machine_band, calibrated_band)


def compare_entries(
    new: Entry, old: Entry, confidence: float, tolerance: float, machine_band: float, calibrated_band: float
) -> RegressionCheck:
    """Two stored entries judged as the gate judges a run (``new``) against its baseline (``old``)."""
    return _judge(new.estimate(), new.calibration(), old, confidence, tolerance, machine_band, calibrated_band)


def _judge(
    now_raw: Estimate,
    now_cal: tuple[str, Estimate] | None,
    entry: Entry,
    confidence: float,
    tolerance: float,
    machine_band: float,
    calibrated_band: float,
) -> RegressionCheck:
    stored_cal = entry.calibration()
    if now_cal is not None and stored_cal is not None and stored_cal[0] == now_cal[0]:
        now, stored, reference, band = now_cal[1], stored_cal[1], now_cal[0], calibrated_band
    else:
        now, stored, reference, band = now_raw, entry.estimate(), None, machine_band
    diff = now.minus(stored)
    slowdown = diff.interval(confidence)
    verdict = regression_verdict(slowdown, tolerance, band)
    return RegressionCheck(
        slowdown, regression_threshold(tolerance, band), tolerance, band, reference, diff.independent, verdict
    )


def check_against(pair: Comparison, tolerance: float) -> RegressionCheck:
    """The working tree's variant against its namesake from another revision, timed in the same
    rounds: no machine band applies, so the threshold is half the tolerance."""
    s = pair.speedup_interval  # t(REV) / t(now)
    slowdown = Interval(1.0 / s.estimate, 1.0 / s.high, 1.0 / s.low, s.confidence)
    independent = pair.estimate.independent if pair.estimate is not None else True
    verdict = regression_verdict(slowdown, tolerance, 0.0)
    return RegressionCheck(slowdown, regression_threshold(tolerance), tolerance, 0.0, None, independent, verdict)
