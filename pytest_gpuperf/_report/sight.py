"""What each check could see, and what it cost: its detectable slowdown and its GPU seconds.

Everything here reads the records (or a saved report's), so a report rendered later says what the
run said. A regression check's detectable slowdown is the one the run recorded
(``detectable_slowdown``); a report written before that field gets it from the check's interval,
threshold and independence by the same rule (``_gates.detectable``). A speedup claim's is its own
(how much slower than its margin the fast variant must be to fail it).

A check *sees its tolerance* when its detectable slowdown is at most the tolerance it is judged
with; a claim is held to its test's tolerance. The others let a slowdown of their tolerance pass
more often than their error rate allows, and are listed with the cause: a band that puts the
threshold at or above the tolerance (no precision helps), batches that may not decide (a longer
budget gives longer batches), or an interval too wide (``gpuperf plan`` proposes budgets).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from pytest_gpuperf._gates.detectable import detectable_claim_slowdown, detectable_slowdown, log_halfwidth
from pytest_gpuperf._gates.stats import SERIAL_ALPHA, Interval
from pytest_gpuperf._gates.verdict import regression_threshold
from pytest_gpuperf._report.records import Record

__all__ = ["Sight", "sights", "regression_detectable", "unseen_lines", "sight_json"]

DEFAULT_TOLERANCE = 0.05


@dataclass(frozen=True)
class Sight:
    """One check: where, what it is held against, what it catches and what it cost."""

    where: str  # "<node id>::<variant>" for a regression check, "<node id>: fast vs baseline" for a claim
    kind: str  # "baseline" (a stored baseline), "against" (--gpu-perf-against's revision) or "claim"
    detectable: float | None  # None: its batches may not decide, so it catches nothing
    tolerance: float
    gpu_seconds: float | None  # None: timed inside a speedup claim, which carries the seconds
    cause: str  # "" when it sees its tolerance; else one of CAUSES
    detail: str = ""  # the figure behind the cause (the threshold, the interval's half-width)

    @property
    def sees_tolerance(self) -> bool:
        return not self.cause

    @property
    def line(self) -> str:
        sees = "nothing" if self.detectable is None else f"{_pct(self.detectable)} and more"
        detail = f", {self.detail}" if self.detail else ""
        return f"{self.where} ({self.kind}): catches {sees} at tolerance {_pct(self.tolerance)}{detail}"


BAND = (
    "the band puts the threshold at or above the tolerance, so a slowdown of the tolerance passes however precise "
    "the run (calibrate against a reference kernel, narrow the band, or use --gpu-perf-against)"
)
UNDECIDABLE = "the batches were not independent, so the check decides nothing (a longer budget gives longer batches)"
WIDE = "the interval is too wide for the tolerance (gpuperf plan proposes budgets that narrow it)"
CAUSES = (BAND, UNDECIDABLE, WIDE)


def regression_detectable(reg: Mapping[str, Any]) -> float | None:
    """A regression check's detectable slowdown, recorded or (older reports) computed."""
    if "detectable_slowdown" in reg:
        value = reg["detectable_slowdown"]
        return float(value) if isinstance(value, (int, float)) else None
    threshold = reg.get("threshold")
    if not isinstance(threshold, (int, float)):
        threshold = regression_threshold(float(reg["tolerance"]), float(reg.get("band") or 0.0))
    interval = Interval(float(reg["slowdown"]), float(reg["ci_low"]), float(reg["ci_high"]), 0.0)
    return detectable_slowdown(interval, float(threshold), bool(reg.get("independent", True)))


def sights(records: Iterable[Record], default_tolerance: float = DEFAULT_TOLERANCE) -> list[Sight]:
    """Every regression check and every gated speedup claim, in the run's order."""
    records = list(records)
    tolerance_of: dict[str, float] = {}
    for r in records:
        if r["kind"] == "measurement" and _complete(reg := r.get("regression")):
            tolerance_of.setdefault(r["test"], float(reg["tolerance"]))
    out: list[Sight] = []
    for r in records:
        if r["kind"] == "measurement" and _complete(reg := r.get("regression")):
            out.append(_regression_sight(f"{r['test']}::{r['measurement']['name']}", reg))
        elif r["kind"] == "comparison" and _complete(r["comparison"], CLAIM_FIELDS):
            c = r["comparison"]
            tolerance = tolerance_of.get(r["test"], default_tolerance)
            detectable = c.get("detectable_slowdown") if "detectable_slowdown" in c else _claim_detectable(c)
            seconds = c.get("gpu_seconds", c.get("wall_s"))
            cause, detail = _noise_cause(detectable, tolerance, Interval(c["speedup"], c["ci_low"], c["ci_high"], 0.0))
            where = f"{r['test']}: {c['fast']} vs {c['baseline']}"
            out.append(Sight(where, "claim", detectable, tolerance, float(seconds) if seconds else None, cause, detail))
    return out


REGRESSION_FIELDS = ("slowdown", "ci_low", "ci_high", "tolerance")
CLAIM_FIELDS = ("speedup", "ci_low", "ci_high", "at_least")


def _complete(data: Any, fields: tuple[str, ...] = REGRESSION_FIELDS) -> TypeGuard[Mapping[str, Any]]:
    """Whether ``data`` holds a number in each of ``fields`` (a report's check, or an older or
    stripped one that cannot be judged here and is left out)."""
    return isinstance(data, Mapping) and all(
        isinstance(data.get(f), (int, float)) and not isinstance(data.get(f), bool) for f in fields
    )


def _regression_sight(where: str, reg: Mapping[str, Any]) -> Sight:
    tolerance = float(reg["tolerance"])
    detectable = regression_detectable(reg)
    threshold = reg.get("threshold")
    seconds = reg.get("gpu_seconds")
    interval = Interval(reg["slowdown"], reg["ci_low"], reg["ci_high"], 0.0)
    if isinstance(threshold, (int, float)) and threshold >= tolerance:
        cause, detail = BAND, f"threshold {_pct(threshold)}"
    else:
        cause, detail = _noise_cause(detectable, tolerance, interval)
    kind = "against" if reg.get("against") else "baseline"
    return Sight(where, kind, detectable, tolerance, float(seconds) if seconds else None, cause, detail)


def _claim_detectable(c: Mapping[str, Any]) -> float | None:
    """A claim's detectable slowdown in a report written before the field: a decided claim had
    independent batches; an undecided one is judged by ``Estimate.independent``'s rule where its
    estimate carries the fields that rule reads."""
    estimate = c.get("estimate")
    independent = (
        c.get("verdict") in ("pass", "fail")
        or not isinstance(estimate, Mapping)
        or "serial_p" not in estimate
        or (
            estimate.get("batch_size", 0) >= estimate.get("needed_batch_size", 0)
            and estimate.get("serial_p", 1.0) >= SERIAL_ALPHA
        )
    )
    return detectable_claim_slowdown(Interval(c["speedup"], c["ci_low"], c["ci_high"], 0.0), independent)


def _noise_cause(detectable: float | None, tolerance: float, interval: Interval) -> tuple[str, str]:
    if detectable is None:
        return UNDECIDABLE, ""
    if detectable <= tolerance:
        return "", ""
    return WIDE, f"interval ±{_pct(math.expm1(log_halfwidth(interval)))}"


def unseen_lines(
    records: Iterable[Record], default_tolerance: float = DEFAULT_TOLERANCE, per_cause: int = 5
) -> list[str]:
    """The summary's lines: how many checks see their tolerance and the GPU seconds spent on all
    of them; then, by cause, how many cannot and the first ``per_cause`` of them (the JSON
    report's ``sight.blind`` has them all)."""
    found = sights(records, default_tolerance)
    if not found:
        return []
    blind = [s for s in found if not s.sees_tolerance]
    seconds = sum(s.gpu_seconds or 0.0 for s in found)
    lines = [
        f"gpu-perf sight: {len(found) - len(blind)} of {len(found)} checks catch a slowdown of their tolerance "
        f"at their error rate; {seconds:.1f} GPU s spent on them"
    ]
    for cause in CAUSES:
        group = [s for s in blind if s.cause == cause]
        if not group:
            continue
        lines.append(f"{len(group)} check(s) cannot see their own tolerance: {cause}:")
        lines += [f"  {s.line}" for s in group[:per_cause]]
        if len(group) > per_cause:
            lines.append(f"  ... and {len(group) - per_cause} more (the JSON report's sight.blind)")
    return lines


def sight_json(records: Iterable[Record], default_tolerance: float = DEFAULT_TOLERANCE) -> dict[str, Any]:
    """The JSON report's ``sight``: counts, GPU seconds and every check that cannot see its tolerance."""
    found = sights(records, default_tolerance)
    return {
        "checks": len(found),
        "see_tolerance": sum(s.sees_tolerance for s in found),
        "gpu_seconds": sum(s.gpu_seconds or 0.0 for s in found),
        "blind": [
            {
                "where": s.where,
                "kind": s.kind,
                "detectable_slowdown": s.detectable,
                "tolerance": s.tolerance,
                "gpu_seconds": s.gpu_seconds,
                "cause": s.cause,
                "detail": s.detail,
            }
            for s in found
            if not s.sees_tolerance
        ],
    }


def _pct(x: float) -> str:
    return f"{100 * x:.3g}%"
