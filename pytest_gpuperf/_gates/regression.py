"""Judging a measurement against its stored baseline (the rule is in ``verdict`` and ``levels``).

When the run and the stored entry both carry a calibration against the same reference kernel,
the ratio compared is (t / t_reference) now over (t / t_reference) then: a slower or faster
machine, a clock level or a drift that moves the kernel and the reference alike cancels.
Otherwise the raw times are compared, and only the machine band b separates a machine's
offset from a regression. An entry that stores levels (``gpuperf levels``: a kernel that holds one
of a few calibrated values per run) is judged against every level with the level band
(``_gates.levels``) when the run is calibrated against the same reference and the levels lie at
least 2θ apart (closer, they cannot be told apart at that θ, and the entry's own baseline decides).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

from pytest_gpuperf._gates.detectable import detectable_slowdown
from pytest_gpuperf._gates.levels import judge_levels, too_close
from pytest_gpuperf._gates.stats import Estimate, Interval, estimate_from_interval
from pytest_gpuperf._gates.verdict import Bands, Verdict, regression_threshold, regression_verdict


# What a check reads of a measurement, a pairing and a stored entry; the timing and store
# subsystems' types have these members, and this module stays below both.
class Calibrated(Protocol):
    @property
    def reference(self) -> str: ...
    @property
    def estimate(self) -> Estimate: ...


class Measured(Protocol):
    @property
    def calibration(self) -> Calibrated | None: ...
    @property
    def estimate(self) -> Estimate | None: ...
    @property
    def interval(self) -> Interval: ...
    @property
    def confidence(self) -> float: ...


class Paired(Protocol):
    @property
    def speedup_interval(self) -> Interval: ...
    @property
    def estimate(self) -> Estimate | None: ...


class Stored(Protocol):
    def estimate(self) -> Estimate: ...
    def calibration(self) -> tuple[str, Estimate] | None: ...
    def levels(self) -> tuple[str, list[Estimate]] | None: ...


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
    levels: tuple[float, ...] = ()  # the stored levels as ratios to the reference, fastest first
    level: int | None = None  # the level ``slowdown`` is against

    @property
    def blind(self) -> bool:
        """θ >= τ: a true slowdown of exactly the tolerance sits at or below the threshold, so
        only an interval lying wholly above the truth could FAIL it; the check cannot catch it."""
        return self.threshold >= self.tolerance

    @property
    def detectable(self) -> float | None:
        """The smallest slowdown this check catches at its error rate (``detectable``), or None
        where its batches may not decide."""
        return detectable_slowdown(self.slowdown, self.threshold, self.independent)

    @property
    def sees_tolerance(self) -> bool:
        """Whether a slowdown of the tolerance is within what this check catches."""
        d = self.detectable
        return d is not None and d <= self.tolerance

    @property
    def note(self) -> str | None:
        """What a blind check says of itself, and what would let it see its tolerance."""
        if not self.blind:
            return None
        if self.levels:
            what, remedy = "check against stored levels: level band", "narrow the level band (level_noise)"
        elif self.calibrated_by:
            what, remedy = "calibrated check: calibrated band", "narrow the calibrated band (calibrated_noise)"
        else:
            what, remedy = "raw check: machine band", "calibrate against a reference kernel"
        tolerance = f"{100 * self.tolerance:g}%"
        return (
            f"{what} {100 * self.band:g}% >= tolerance {tolerance}; a slowdown of {tolerance} cannot fail here: "
            f"{remedy} or use --gpu-perf-against"
        )

    def summary(self) -> dict[str, Any]:
        levels = {"levels": list(self.levels), "level": self.level} if self.levels else {}
        extra = levels | ({"note": self.note} if self.note else {})
        return extra | {
            "slowdown": self.slowdown.estimate,
            "ci_low": self.slowdown.low,
            "ci_high": self.slowdown.high,
            "confidence": self.slowdown.confidence,
            "tolerance": self.tolerance,
            "band": self.band,
            "threshold": self.threshold,
            "calibrated_by": self.calibrated_by,
            "independent": self.independent,
            "tolerance_blind": self.blind,
            "detectable_slowdown": self.detectable,
            "sees_tolerance": self.sees_tolerance,
            "verdict": str(self.verdict),
        }


def check_regression(m: Measured, entry: Stored, tolerance: float, bands: Bands) -> RegressionCheck:
    """Compare ``m`` with ``entry`` at the measurement's own (look) confidence. The band is
    ``bands.level`` against stored levels, ``bands.calibrated`` when both are calibrated against the
    same reference (what calibration leaves of a machine's difference), else ``bands.machine``
    (a whole machine's difference)."""
    now_cal = (m.calibration.reference, m.calibration.estimate) if m.calibration else None
    now_raw = m.estimate or estimate_from_interval(m.interval)
    return _judge(now_raw, now_cal, entry, m.confidence, tolerance, bands)


def compare_entries(new: Stored, old: Stored, confidence: float, tolerance: float, bands: Bands) -> RegressionCheck:
    """Two stored entries judged as the gate judges a run (``new``) against its baseline (``old``)."""
    return _judge(new.estimate(), new.calibration(), old, confidence, tolerance, bands)


def _judge(
    now_raw: Estimate,
    now_cal: tuple[str, Estimate] | None,
    entry: Stored,
    confidence: float,
    tolerance: float,
    bands: Bands,
) -> RegressionCheck:
    stored_levels = entry.levels()
    if (
        now_cal is not None
        and stored_levels is not None
        and stored_levels[0] == now_cal[0]
        and too_close(stored_levels[1], regression_threshold(tolerance, bands.level)) is None
    ):
        return _judge_levels(now_cal[1], now_cal[0], stored_levels[1], confidence, tolerance, bands.level)
    stored_cal = entry.calibration()
    if now_cal is not None and stored_cal is not None and stored_cal[0] == now_cal[0]:
        now, stored, reference, band = now_cal[1], stored_cal[1], now_cal[0], bands.calibrated
    else:
        now, stored, reference, band = now_raw, entry.estimate(), None, bands.machine
    diff = now.minus(stored)
    slowdown = diff.interval(confidence)
    verdict = regression_verdict(slowdown, tolerance, band, diff.independent)
    return RegressionCheck(
        slowdown, regression_threshold(tolerance, band), tolerance, band, reference, diff.independent, verdict
    )


def _judge_levels(
    now: Estimate, reference: str, levels: list[Estimate], confidence: float, tolerance: float, band: float
) -> RegressionCheck:
    check = judge_levels(now, levels, confidence, tolerance, band)
    ratios = tuple(math.exp(level.center) for level in levels)
    threshold = regression_threshold(tolerance, band)
    return RegressionCheck(
        check.slowdown, threshold, tolerance, band, reference, check.independent, check.verdict, ratios, check.level
    )


def check_against(pair: Paired, tolerance: float) -> RegressionCheck:
    """The working tree's variant against its namesake from another revision, timed in the same
    rounds: no machine band applies, so the threshold is half the tolerance."""
    s = pair.speedup_interval  # t(REV) / t(now)
    slowdown = Interval(1.0 / s.estimate, 1.0 / s.high, 1.0 / s.low, s.confidence)
    independent = pair.estimate.independent if pair.estimate is not None else True
    verdict = regression_verdict(slowdown, tolerance, 0.0, independent)
    return RegressionCheck(slowdown, regression_threshold(tolerance), tolerance, 0.0, None, independent, verdict)
