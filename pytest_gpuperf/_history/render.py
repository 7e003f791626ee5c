"""The history as text: ``show``'s table of a series, and ``changes`` as text, markdown or JSON."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from pytest_gpuperf._history.changes import Method
from pytest_gpuperf._history.findings import Change
from pytest_gpuperf._history.labels import CODE
from pytest_gpuperf._history.series import TIME_BASIS, Point, Series

__all__ = ["changes_json", "changes_markdown", "changes_text", "percent", "series_table"]


def percent(ratio: float) -> str:
    if math.isinf(ratio):
        return "+inf%" if ratio > 0 else "-inf%"
    if ratio == 0:
        return "-100%"
    return f"{100.0 * (ratio - 1.0):+.1f}%"


def _value(series: Series, value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}x" if series.basis != TIME_BASIS else f"{value * 1e6:.4g} us"


def _commit(point: Point) -> str:
    return (point.commit[:12] if point.commit else "-") + ("*" if point.dirty else "")


def series_table(series: Series, changes: Sequence[Change], last: int | None = None) -> str:
    """One row per run (the newest ``last``), a line above the first run after each change."""
    what = (
        f"time relative to {series.basis} in the same run (calibrated: offsets between machines cancel)"
        if series.basis != TIME_BASIS
        else "median time (not calibrated: machine offsets included)"
    )
    lines = [f"{series.key} on {series.device_key}: {what}"]
    header = ("date", "commit", "GPU", "value", "interval", "verdict", "note")
    rows: list[tuple[str, ...]] = []
    at = {c.after.run_id: c for c in changes}
    points = series.points[-last:] if last else series.points
    for p in points:
        if p.run_id in at:
            c = at[p.run_id]
            rows.append(
                (f"-- change: {'slower' if c.slower else 'faster'} {percent(c.step.size)} ({c.label.kind}) --",)
            )
        interval = f"[{_value(series, p.low)}, {_value(series, p.high)}]" if p.low is not None else "-"
        rows.append(
            (
                p.created[:16].replace("T", " "),
                _commit(p),
                (p.environment.uuid or "-")[:8],
                _value(series, p.value),
                interval,
                p.verdict,
                f"kept out: {p.skip_reason}" if p.skip_reason else "",
            )
        )
    widths = [max(len(r[i]) for r in [header, *rows] if len(r) > 1) for i in range(len(header))]
    for row in [header, *rows]:
        lines.append(
            row[0] if len(row) == 1 else "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        )
    lines.append(f"{len(series.usable)} of {len(series.points)} runs on the line")
    return "\n".join(lines) + "\n"


def _where(c: Change) -> str:
    return f"{c.after.created[:10]}, commit {c.after.commit[:12] if c.after.commit else 'unknown'}"


def _moved(c: Change) -> str:
    if c.label.kind != CODE:
        return "; ".join(c.label.moved)
    return f"git log {c.label.git_range}" if c.label.git_range else "commits unknown"


def _gpu_note(c: Change) -> str:
    a, b = c.label.gpus
    if a == b or any(m.startswith("GPU ") for m in c.label.moved):  # the label names the GPUs already
        return ""
    return f"another GPU of the model ({(a or '?')[:8]} -> {(b or '?')[:8]})"


def _basis(c: Change) -> str:
    return "time" if c.series.basis == TIME_BASIS else f"ratio to {c.series.basis}"


def changes_text(changes: Sequence[Change], method: Method, series_count: int) -> str:
    lines = [
        f"{len(changes)} change(s) in {series_count} series (PELT on log values, confirmed by Mann-Whitney "
        f"at {method.confidence:g} over every place a change could be, interval wholly beyond {100 * method.min_change:g}%)"
    ]
    for c in changes:
        s = c.step
        note = _gpu_note(c)
        lines.append(
            f"{'slower' if c.slower else 'faster'} {percent(s.size)} [{percent(s.low)}, {percent(s.high)}] "
            f"{c.series.key} on {c.series.device_key} ({_basis(c)}): {c.label.kind} at {_where(c)}; "
            f"{_moved(c)}; {s.before} runs before, {s.after} after" + (f"; {note}" if note else "")
        )
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def changes_markdown(changes: Sequence[Change], method: Method, series_count: int) -> str:
    if not changes:
        return f"No change point in {series_count} series.\n"
    lines = [
        f"{len(changes)} change point(s) in {series_count} series "
        f"({100 * method.confidence:g}% intervals; [method](docs/history.md#the-method)).",
        "",
        "| change | interval | series | GPU model | label | what moved | at |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in changes:
        s = c.step
        moved = _moved(c) + (f"; {_gpu_note(c)}" if _gpu_note(c) else "")
        lines.append(
            f"| {'slower' if c.slower else 'faster'} {percent(s.size)} | [{percent(s.low)}, {percent(s.high)}] | "
            f"`{_cell(c.series.key)}` ({_cell(_basis(c))}) | {c.series.device_key} | **{c.label.kind}** | "
            f"{_cell(moved)} | {_where(c)} |"
        )
    return "\n".join(lines) + "\n"


def change_record(c: Change) -> dict[str, Any]:
    s = c.step
    return {
        "key": c.series.key,
        "device_key": c.series.device_key,
        "basis": c.series.basis,
        "direction": "slower" if c.slower else "faster",
        "size": s.size,
        "low": s.low if math.isfinite(s.low) else None,
        "high": s.high if math.isfinite(s.high) else None,
        "p_value": s.p_value,
        "label": c.label.kind,
        "moved": list(c.label.moved),
        "commits": {"before": c.label.commits[0], "after": c.label.commits[1]},
        "gpus": {"before": c.label.gpus[0], "after": c.label.gpus[1]},
        "created": c.after.created,
        "position": c.position,
        "runs_before": s.before,
        "runs_after": s.after,
    }


def changes_json(changes: Sequence[Change], method: Method, series_count: int) -> str:
    payload = {
        "method": {
            "confidence": method.confidence,
            "min_change": method.min_change,
            "min_size": method.min_size,
            "penalty_factor": method.penalty_factor,
        },
        "series": series_count,
        "changes": [change_record(c) for c in changes],
    }
    return json.dumps(payload, indent=2) + "\n"
