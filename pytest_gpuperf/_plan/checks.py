"""Each check of a report as the plan models it: how its interval narrows with the budget.

A check's log half-width h (``_gates.detectable``) comes from two parts: this run's estimate, whose
variance falls as 1 / (seconds of data), and, for a check against a stored baseline, the stored
estimate's, which no budget of this run changes. With v_now and v_stored those two variances (each
standard error widened by its ``inflation``), f = v_now / (v_now + v_stored) is the share that
shrinks, and at a budget giving T seconds of data where the run had T0,

    h(T) = h0 sqrt(f T0 / T + 1 - f).

A check against ``--gpu-perf-against``'s revision and a speedup claim time both sides in the same
rounds: f = 1. Where a record lacks either estimate, f = 1 too (the plan then says so). T0 is the
time of the run's last look: looks fall at the first look time (1 s, or the budget if shorter),
doubling, and at the end of the budget (and of an extension: ``SamplingPolicy.look_times``).
Batches that were not independent become long enough at T >= T0 x needed batch size / batch size.
The GPU seconds a timed unit (a measurement, a pair against REV, a claim) costs at budget B are
modelled as its GPU seconds as run plus B - T0: sampling runs the whole budget where it ran the
whole of it before, an upper bound where it stopped at a look with a precise enough interval.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from pytest_gpuperf._gates.detectable import log_halfwidth
from pytest_gpuperf._gates.stats import Interval
from pytest_gpuperf._gates.verdict import regression_threshold
from pytest_gpuperf._report.records import Record

__all__ = ["Check", "Unit", "Unreachable", "checks_of", "units_of", "test_function"]

FIRST_LOOK_S = 1.0  # SamplingPolicy.min_time_s: the plan assumes the default schedule
EXTENSION_S = 2.0  # SamplingPolicy.extension_budget_s


@dataclass(frozen=True)
class Check:
    """One regression check or gated speedup claim, with what the plan needs of it."""

    where: str
    function: str  # the test function its budget belongs to (``test_function``)
    kind: str  # "baseline", "against" or "claim"
    base: float  # 1 + θ for a regression check, 1 for a claim (``_gates.detectable``)
    h0: float  # the log half-width the run measured
    shrinking: float  # f: the share of the variance that more data shrinks
    data_s: float  # T0: seconds of data behind the interval
    batch_factor: float  # needed batch size / batch size (1 when the batches could decide)
    tolerance: float
    modelled: bool  # False: a record lacked an estimate and f = 1 was assumed

    def h_at(self, data_s: float) -> float:
        return self.h0 * math.sqrt(self.shrinking * self.data_s / data_s + 1.0 - self.shrinking)

    def detectable_at(self, data_s: float) -> float | None:
        if data_s < self.data_s * self.batch_factor:
            return None
        return self.base * math.exp(2.0 * self.h_at(data_s)) - 1.0

    def data_needed(self, target: float) -> float | None:
        """The seconds of data at which the check catches ``target``; None where none do."""
        h_goal = math.log((1.0 + target) / self.base) / 2.0
        floor = self.h0 * math.sqrt(1.0 - self.shrinking)
        if h_goal <= floor or self.shrinking <= 0:
            return None
        seconds = self.shrinking * self.data_s * self.h0**2 / (h_goal**2 - floor**2)
        return max(seconds, self.data_s * self.batch_factor)

    def unreachable_because(self, target: float) -> Unreachable:
        """Why the check cannot catch ``target``."""
        if self.base - 1.0 >= target:
            return Unreachable(
                "band",
                "the threshold is at or above the target: the band decides, not the budget",
                f"threshold {100 * (self.base - 1):.3g}%",
            )
        needed = self.data_needed(target)
        if needed is not None:
            return Unreachable(
                "budget", "it needs more seconds of data per measurement than the most allowed", f"{needed:.3g} s"
            )
        return Unreachable(
            "stored",
            "the stored baseline's own interval is too wide: re-record it with a longer budget, or use --gpu-perf-against",
            f"±{100 * math.expm1(self.h0 * math.sqrt(1 - self.shrinking)):.3g}% from the stored side",
        )


class Unreachable(NamedTuple):
    kind: str  # "band", "budget" or "stored"
    why: str
    figure: str  # this check's number behind ``why``


@dataclass(frozen=True)
class Unit:
    """One timed thing (a measurement, a pair against REV, a claim): its GPU seconds and data time."""

    function: str
    gpu_s: float
    data_s: float
    budget_s: float

    def planned_s(self, budget_s: float) -> float:
        """Its GPU seconds at ``budget_s``: as run, plus (or less) the change in seconds of data."""
        return max(0.0, self.gpu_s + budget_s - self.data_s)


def test_function(nodeid: str) -> str:
    """``path::Class::test`` of a node id: the function a ``gpu_perf(budget=...)`` marker is on."""
    return nodeid.split("[", 1)[0]


def data_seconds(budget_s: float, looks: int, stop_reason: str) -> float:
    """T0: the time of the run's last look (module doc)."""
    if stop_reason.startswith("extended"):
        return budget_s + EXTENSION_S
    if stop_reason == "budget" or looks <= 0:
        return budget_s
    t = min(FIRST_LOOK_S, budget_s)
    for _ in range(looks - 1):
        t = min(2 * t, budget_s)
    return t


def checks_of(records: Iterable[Record], default_budget: float, default_tolerance: float) -> list[Check]:
    """The plan's view of every regression check and gated claim in ``records``."""
    records = list(records)
    tolerance_of: dict[str, float] = {}
    for r in records:
        if r["kind"] == "measurement" and (reg := r.get("regression")):
            tolerance_of.setdefault(r["test"], float(reg["tolerance"]))
    out: list[Check] = []
    for r in records:
        if r["kind"] == "measurement" and (reg := r.get("regression")):
            m = r["measurement"]
            budget = float(r.get("budget_s") or default_budget)
            out.append(_regression(r["test"], m, reg, r.get("baseline"), budget))
        elif r["kind"] == "comparison" and r["comparison"].get("at_least") is not None:
            c = r["comparison"]
            budget = float(c.get("budget_s") or default_budget)
            h0 = log_halfwidth(Interval(c["speedup"], c["ci_low"], c["ci_high"], 0.0))
            out.append(
                Check(
                    f"{r['test']}: {c['fast']} vs {c['baseline']}",
                    test_function(r["test"]),
                    "claim",
                    1.0,
                    h0,
                    1.0,
                    data_seconds(budget, int(c.get("looks") or 0), _stop_of(c)),
                    _batch_factor(c.get("estimate")) if c.get("verdict") == "inconclusive" else 1.0,
                    tolerance_of.get(r["test"], default_tolerance),
                    True,
                )
            )
    return [c for c in out if math.isfinite(c.h0)]


def units_of(records: Iterable[Record], default_budget: float) -> list[Unit]:
    """Every timed unit of ``records`` with its GPU seconds (a measurement inside a claim is the claim's)."""
    out: list[Unit] = []
    for r in records:
        if r["kind"] == "measurement":
            m = r["measurement"]
            reg = r.get("regression") or {}
            seconds = float(reg.get("gpu_seconds") or m.get("wall_s") or 0.0)
            if seconds > 0:
                budget = float(r.get("budget_s") or default_budget)
                data = data_seconds(budget, int(m.get("looks") or 0), str(m.get("stop_reason") or ""))
                out.append(Unit(test_function(r["test"]), seconds, data, budget))
        elif r["kind"] == "comparison":
            c = r["comparison"]
            seconds = float(c.get("gpu_seconds") or c.get("wall_s") or 0.0)
            if seconds > 0:
                budget = float(c.get("budget_s") or default_budget)
                data = data_seconds(budget, int(c.get("looks") or 0), _stop_of(c))
                out.append(Unit(test_function(r["test"]), seconds, data, budget))
    return out


def _regression(
    test: str, m: Mapping[str, Any], reg: Mapping[str, Any], baseline: Mapping[str, Any] | None, budget: float
) -> Check:
    threshold = reg.get("threshold")
    if not isinstance(threshold, (int, float)):
        threshold = regression_threshold(float(reg["tolerance"]), float(reg.get("band") or 0.0))
    h0 = log_halfwidth(Interval(reg["slowdown"], reg["ci_low"], reg["ci_high"], 0.0))
    against = bool(reg.get("against"))
    field = "calibration" if reg.get("calibrated_by") else "estimate"
    now = _variance(m.get(field))
    stored = _variance(baseline.get(field)) if baseline else None
    modelled = against or (now is not None and stored is not None)
    shrinking = 1.0 if against or not modelled else now / (now + stored) if now + stored > 0 else 1.0  # type: ignore[operator]
    estimate = m.get(field) if not against else None
    return Check(
        f"{test}::{m['name']}",
        test_function(test),
        "against" if against else "baseline",
        1.0 + float(threshold),
        h0,
        shrinking,
        data_seconds(budget, int(m.get("looks") or 0), str(m.get("stop_reason") or "")),
        _batch_factor(estimate) if not reg.get("independent", True) else 1.0,
        float(reg["tolerance"]),
        modelled,
    )


def _variance(estimate: Any) -> float | None:
    """(se x inflation)^2 of an estimate's summary (``Estimate.summary``; inflation as ``Estimate.inflation``)."""
    if not isinstance(estimate, Mapping) or not isinstance(estimate.get("log_se"), (int, float)):
        return None
    batch, tau = float(estimate.get("batch_size") or 0), float(estimate.get("tau") or 0)
    inflation = 1.0 + tau / batch if batch > 0 and tau > 0 else 1.0
    return float(estimate["log_se"]) ** 2 * inflation


def _batch_factor(estimate: Any) -> float:
    if not isinstance(estimate, Mapping):
        return 1.0
    have, need = float(estimate.get("batch_size") or 0), float(estimate.get("needed_batch_size") or 0)
    return need / have if have > 0 and need > have else 1.0


def _stop_of(c: Mapping[str, Any]) -> str:
    # a claim's record has no stop reason: an undecided one ran its budget and its extension
    return "extended" if c.get("verdict") == "inconclusive" else "decided"
