"""INCONCLUSIVE results named with their reasons, and regression checks blind to their tolerance.

An undecided result passes by default (``--gpu-perf-inconclusive=warn``), so each one is listed
where people look (the terminal summary, ``gpuperf report`` for a job summary or a pull request
comment, a workflow's annotations): the test and variant, its interval against the margin or
threshold, and why it decided nothing. A regression check whose band puts its threshold at or
above its tolerance (``RegressionCheck.blind``) can never fail a slowdown of that tolerance; such
checks are counted once per note, not listed one by one. Everything here reads the records (or a
saved report's), so a report rendered later says the same as the run did.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_gpuperf._report.records import MeasurementRecord, Record
from pytest_gpuperf._timing.summaries import ComparisonSummary

OPTION = "--gpu-perf-inconclusive"


@dataclass(frozen=True)
class Undecided:
    """One result that decided nothing: where, what it was held against, and why."""

    where: str  # the test's node id, with ::variant for a measurement
    what: str  # the kind of check
    detail: str  # the interval against the margin or threshold ("" for a contended measurement)
    reasons: tuple[str, ...]
    failed: bool  # --gpu-perf-inconclusive=fail was in force for its test, so the test failed

    @property
    def text(self) -> str:
        """The line without its place: what, the interval and the reasons."""
        return self.what + (f", {self.detail}" if self.detail else "") + ": " + "; ".join(self.reasons)

    @property
    def line(self) -> str:
        return f"{self.where}: {self.text}"


def undecided(records: Iterable[Record], default_policy: str = "warn") -> list[Undecided]:
    """Every INCONCLUSIVE speedup claim, regression check and check against another revision, and
    every contended measurement not already named by its inconclusive claim, in the run's order.
    ``default_policy`` is the session's --gpu-perf-inconclusive, for records that do not say."""
    records = list(records)
    measured = {(r["test"], r["measurement"]["name"]): r for r in records if r["kind"] == "measurement"}
    claimed = {
        (r["test"], name)
        for r in records
        if r["kind"] == "comparison"
        and r["comparison"]["verdict"] == "inconclusive"
        and _contended_claim(r["comparison"])
        for name in (r["comparison"]["fast"], r["comparison"]["baseline"])
    }
    out: list[Undecided] = []
    for r in records:
        if r["kind"] == "comparison" and r["comparison"]["verdict"] == "inconclusive":
            failed = r["comparison"].get("on_inconclusive", default_policy) == "fail"
            fast = measured.get((r["test"], r["comparison"]["fast"]))
            out.append(_speedup(r["test"], r["comparison"], fast, failed))
        elif r["kind"] == "measurement":
            failed = r.get("on_inconclusive", default_policy) == "fail"
            where = f"{r['test']}::{r['measurement']['name']}"
            if r["verdict"] == "inconclusive" and r["regression"]:
                out.append(_regression(where, r["regression"], failed))
            elif r["verdict"] == "contended" and (r["test"], r["measurement"]["name"]) not in claimed:
                out.append(Undecided(where, "contended measurement", "", _contention(r), failed))
    return out


def groups(entries: Sequence[Undecided]) -> list[tuple[str, list[Undecided]]]:
    """The entries under their headings: those that passed with a warning, then those that failed."""
    warned = [e for e in entries if not e.failed]
    failed = [e for e in entries if e.failed]
    out = []
    if warned:
        out.append((f"{len(warned)} inconclusive (not failed; {OPTION}=fail makes them fail)", warned))
    if failed:
        out.append((f"{len(failed)} inconclusive, failed under {OPTION}=fail", failed))
    return out


def blind_notes(records: Iterable[Record]) -> Counter[str]:
    """How many regression checks carry each note of a check blind to its tolerance."""
    notes: Counter[str] = Counter()
    for r in records:
        reg = r.get("regression") if r["kind"] == "measurement" else None
        if reg and reg.get("tolerance_blind") and isinstance(reg.get("note"), str):
            notes[reg["note"]] += 1
    return notes


def blind_lines(records: Iterable[Record]) -> list[str]:
    return [
        f"{n} regression check(s) cannot catch their tolerance: {note}"
        for note, n in blind_notes(records).most_common()
    ]


def workflow_commands(entries: Sequence[Undecided], records: Iterable[Record]) -> list[str]:
    """GitHub Actions workflow commands: a warning per inconclusive result (an error where it failed
    its test) and a notice per note of checks blind to their tolerance."""
    out = [
        f"::{'error' if e.failed else 'warning'} title=gpu-perf inconclusive::{_escape(e.line)}"
        + ("" if e.failed else f" (not failed; {OPTION}=fail makes it fail)")
        for e in entries
    ]
    out += [
        f"::notice title=gpu-perf checks blind to their tolerance::{_escape(line)}" for line in blind_lines(records)
    ]
    return out


# -- the reasons ----------------------------------------------------------------------
def _speedup(test: str, c: ComparisonSummary, fast: MeasurementRecord | None, failed: bool) -> Undecided:
    m = _num(c.get("at_least"))
    s, low, high = _num(c.get("speedup")), _num(c.get("ci_low")), _num(c.get("ci_high"))
    what = f"speedup claim {c['fast']} vs {c['baseline']}"
    detail = f"{_x(s)} {_ci(low, high)} against the margin {_x(m)}"
    reasons = []
    if m is not None and low is not None and high is not None and low < m <= high:
        reasons.append("the interval straddles the margin")
    shift = c.get("level_shift")
    if shift:
        lowest, highest = _num(shift.get("lowest_median")), _num(shift.get("highest_median"))
        reasons.append(
            f"level shift: the run's batches moved between {_x(lowest)} and {_x(highest)} (a clock, power state "
            "or placement of one variant's own); no gate decides on such a run"
        )
    correlated = _correlated(c.get("estimate"))
    if correlated:
        reasons.append(correlated)
    if _contended_claim(c):
        reasons.append("contended: " + (_contention(fast)[0] if fast else "other processes used the GPU"))
    return Undecided(test, what, detail, tuple(reasons) or _unexplained(c.get("notes")), failed)


def _regression(where: str, reg: Mapping[str, Any], failed: bool) -> Undecided:
    s, low, high = _num(reg.get("slowdown")), _num(reg.get("ci_low")), _num(reg.get("ci_high"))
    tolerance, band = _num(reg.get("tolerance")) or 0.0, _num(reg.get("band")) or 0.0
    theta = _num(reg.get("threshold"))
    theta = max(tolerance / 2, band) if theta is None else theta
    limit = 1 + theta
    levels = reg.get("levels") or []
    level = reg.get("level")
    if reg.get("against"):
        what = f"check against {reg['against']} (same rounds)"
    elif levels:
        what = f"regression check against {len(levels)} stored levels"
    elif reg.get("calibrated_by"):
        what = f"regression check (calibrated by {reg['calibrated_by']})"
    else:
        what = "regression check (raw times)"
    of_level = f" of level {level + 1}" if levels and isinstance(level, int) else ""
    detail = f"slowdown {_x(s)} {_ci(low, high)}{of_level} against the threshold {_x(limit)}"
    reasons = []
    if levels and s is not None:
        if 1 / limit <= s <= limit:
            reasons.append(
                f"within {100 * theta:.3g}% of level {(level or 0) + 1}, but the interval is too wide to place it there"
            )
        else:
            reasons.append(f"at none of the levels, but the interval reaches within {100 * theta:.3g}% of one")
    elif s is not None and low is not None and s > limit and low <= limit:
        reasons.append("above the threshold, but the interval reaches below it")
    if reg.get("independent") is False:
        reasons.append(
            "batches not independent (correlated over more than half a batch, or a level that moved): no gate decides on them"
        )
    return Undecided(where, what, detail, tuple(reasons) or ("the interval decides nothing",), failed)


def _contended_claim(c: ComparisonSummary) -> bool:
    return any(isinstance(n, str) and n.startswith("contended") for n in c.get("notes") or [])


def _contention(r: MeasurementRecord | None) -> tuple[str, ...]:
    health = (r["measurement"].get("health") if r else None) or {}
    who = "; ".join(_process(p) for p in health.get("contended_by") or [] if isinstance(p, Mapping))
    return (
        "other processes used the GPU while it was measured" + (f" ({who})" if who else ""),
        "not judged, not stored",
    )


def _process(p: Mapping[str, Any]) -> str:
    sm = p.get("sm_percent")
    return f"pid {p.get('pid', '?')} ({p.get('name', '?')}" + (f", {sm}% SM" if sm is not None else "") + ")"


def _correlated(est: Mapping[str, Any] | None) -> str | None:
    """Why an estimate decides nothing when its batches are too short next to its correlation time
    (a level shift is named on its own)."""
    if not est:
        return None
    size, needed, tau = _num(est.get("batch_size")), _num(est.get("needed_batch_size")), _num(est.get("tau"))
    if size is None or needed is None or size >= needed:
        return None
    # tau explains the refusal only where it is over half a batch (a report may hold none, or 0)
    over = f"about {tau:.1f} rounds" if tau is not None and 2 * tau > size else f"{needed / 2:g} rounds or more"
    return f"correlated batches: samples stay correlated over {over}, more than half of a {size:g}-round batch; no gate decides on them"


def _unexplained(notes: Any) -> tuple[str, ...]:
    """A result whose record does not show why (a report of an older release): its first note."""
    first = next((n for n in notes or [] if isinstance(n, str)), None)
    return (first,) if first else ("the interval decides nothing",)


def _num(value: Any) -> float | None:
    """A finite number from a record (a saved report writes what it could not compute as null)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _x(value: float | None) -> str:
    return "?" if value is None else f"{value:.4f}x"


def _ci(low: float | None, high: float | None) -> str:
    return "[" + ("?" if low is None else f"{low:.4f}") + ", " + ("?" if high is None else f"{high:.4f}") + "]"


def _escape(text: str) -> str:
    """A workflow command's message: '%', CR and LF are its escapes."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
