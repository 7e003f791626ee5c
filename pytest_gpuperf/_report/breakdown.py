"""Kernel breakdowns as a few terminal lines: one side's kernels, or what changed between two sides
(the kernels whose own time moved, with their intervals; kernels that appeared or disappeared;
launch configurations and resources that changed)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from pytest_gpuperf._timing.breakdown import Breakdown, BreakdownDiff, KernelChange, KernelTime, diff

__all__ = ["side_lines", "diff_lines", "explain", "record_lines"]

INDENT = "  "
RESOURCE_LABELS = {
    "registers": "registers",
    "static_smem": "static smem",
    "local_bytes": "local memory",
    "dynamic_smem": "dynamic smem",
}


def side_lines(breakdown: Breakdown, label: str, names: Mapping[str, str] | None = None, limit: int = 4) -> list[str]:
    """``label``'s kernels, the longest first, at most ``limit`` of them."""
    show = _namer(names)
    kernels = sorted(breakdown.kernels, key=lambda k: k.median_s, reverse=True)
    lines = [f"kernels of {label} ({_how(breakdown)}; they sum to {_percent(breakdown.coverage)} of its launch):"]
    for k in kernels[:limit]:
        lines.append(f"{INDENT}{show(k.name)}  {_time(k.median_s)}{_calls(k)}  {k.configuration}{_resources(k)}")
    if len(kernels) > limit:
        rest = kernels[limit:]
        lines.append(f"{INDENT}and {len(rest)} more ({_time(sum(k.median_s for k in rest))} together)")
    return lines


def diff_lines(
    d: BreakdownDiff, before: str, after: str, names: Mapping[str, str] | None = None, limit: int = 6
) -> list[str]:
    """What changed from ``before`` to ``after``, kernel by kernel, in at most about ``limit`` lines."""
    show = _namer(names)
    lines = [f"kernels, {before} -> {after} ({_how(d.after)}):"]
    moved, reconfigured = d.moved, [c for c in d.reconfigured if c not in d.moved]
    for c in moved[:limit]:
        lines.append(INDENT + _moved_line(c, show))
        extra = _config_and_resources(c) or _unchanged_resources(c)
        if extra:
            lines.append(INDENT * 2 + extra)
    for c in reconfigured[: max(0, limit - len(moved))]:
        lines.append(f"{INDENT}launch changed: {show(c.key)}: {_config_and_resources(c)}")
    hidden = len(moved) - limit if len(moved) > limit else 0
    if hidden:
        lines.append(f"{INDENT}and {hidden} more kernel(s) that moved (the report lists all)")
    steady = [c for c in d.changes if c not in moved and c not in reconfigured]
    if not moved:
        lines.append(
            f"{INDENT}no kernel's own time moved beyond its interval: the change is between or around the "
            "kernels (overlap, launch gaps, copies) or smaller than a kernel timed alone can show"
        )
    if steady:
        total = sum(c.after.median_s for c in steady if c.after is not None)
        lines.append(f"{INDENT}{len(steady)} other kernel(s) unchanged ({_time(total)} together)")
    lines.append(
        f"{INDENT}the kernels sum to {_percent(d.after.coverage)} of the launch at {after}, "
        f"{_percent(d.before.coverage)} at {before}"
    )
    return lines


def explain(
    then: Breakdown | str, now: Breakdown | str, before: str, after: str, names: Mapping[str, str] | None = None
) -> list[str]:
    """What changed from ``before`` to ``after``; where a side has no breakdown (a string saying
    why), that reason and the kernels of the side that has one."""
    if isinstance(then, Breakdown) and isinstance(now, Breakdown):
        return diff_lines(diff(then, now), before, after, names)
    lines = [
        f"no kernel breakdown at {label}: {side}"
        for label, side in ((before, then), (after, now))
        if isinstance(side, str)
    ]
    if isinstance(now, Breakdown):
        lines += side_lines(now, after, names)
    return lines


def record_lines(record: Mapping[str, Any]) -> list[str]:
    """A saved measurement record's breakdown lines: against its revision's (``breakdown_against``)
    or its baseline's stored one; none where the record carries no breakdown."""
    if not isinstance(record.get("breakdown"), Mapping):
        return []
    now = _loaded(record["breakdown"])
    names = {**_names_in(record.get("breakdown")), **_names_in(record.get("breakdown_against"))}
    if isinstance(record.get("breakdown_against"), Mapping):
        against = (record.get("regression") or {}).get("against") or "the revision"
        return explain(_loaded(record["breakdown_against"]), now, str(against), "now", names)
    stored = (record.get("baseline") or {}).get("breakdown")
    if isinstance(stored, Mapping):
        return explain(_loaded(stored), now, "the baseline", "now", {**_names_in(stored), **names})
    if record.get("baseline"):
        return explain("none is stored with it", now, "the baseline", "now", names)
    return side_lines(now, "now", names) if isinstance(now, Breakdown) else [f"no kernel breakdown: {now}"]


def _loaded(data: Any) -> Breakdown | str:
    if not isinstance(data, Mapping):
        return "none recorded"
    if "unavailable" in data:
        return str(data["unavailable"])
    try:
        return Breakdown.from_json(data)
    except ValueError as exc:
        return str(exc)


def _names_in(data: Any) -> dict[str, str]:
    names = data.get("display_names") if isinstance(data, Mapping) else None
    return {str(k): str(v) for k, v in names.items()} if isinstance(names, Mapping) else {}


def _moved_line(c: KernelChange, show: Callable[[str], str]) -> str:
    if c.before is None and c.after is not None:
        return f"appeared: {show(c.key)}  {_time(c.after.median_s)}{_calls(c.after)}"
    if c.after is None and c.before is not None:
        return f"disappeared: {show(c.key)}  {_time(c.before.median_s)}{_calls(c.before)}"
    assert c.before is not None and c.after is not None
    low, high = c.ratio_interval()
    name = f"{show(c.before_key)} -> {show(c.key)}" if c.before_key else show(c.key)
    return (
        f"moved: {name}  {_time(c.before.median_s)} -> {_time(c.after.median_s)}  "
        f"{_signed(c.ratio)} [{_signed(low)}, {_signed(high)}]"
    )


def _config_and_resources(c: KernelChange) -> str:
    parts = []
    if c.reconfigured and c.before is not None and c.after is not None:
        calls = f", {c.before.calls} -> {c.after.calls} calls" if c.before.calls != c.after.calls else ""
        parts.append(f"{c.before.configuration} -> {c.after.configuration}{calls}")
    elif c.before is None and c.after is not None:
        parts.append(c.after.configuration)
    for name, (b, a) in sorted(c.resource_changes().items()):
        if name == "dynamic_smem" and c.reconfigured:
            continue  # already in the configuration
        parts.append(f"{RESOURCE_LABELS.get(name, name)} {_amount(name, b)} -> {_amount(name, a)}")
    return "; ".join(parts)


def _unchanged_resources(c: KernelChange) -> str:
    """For a kernel that moved with the same launch and resources on both sides: say so, so the
    reader looks at its code, not its configuration."""
    if c.before is None or c.after is None:
        return ""
    known = c.after.resources()
    if not known:
        return ""
    shown = ", ".join(f"{RESOURCE_LABELS.get(k, k)} {_amount(k, v)}" for k, v in known.items())
    return f"same launch and resources ({shown})"


def _how(b: Breakdown) -> str:
    if b.source == "graph nodes":
        return "each kernel timed alone, hot"
    if b.source == "cupti":
        return "each kernel timed in place by CUPTI"
    return f"{b.source}, each kernel timed alone"


def _resources(k: KernelTime) -> str:
    parts = []
    if k.registers is not None:
        parts.append(f"{k.registers} regs")
    if k.local_bytes:
        parts.append(f"{_amount('local_bytes', k.local_bytes)} local")
    return f", {', '.join(parts)}" if parts else ""


def _amount(name: str, value: int) -> str:
    if name == "registers":
        return str(value)
    return f"{value // 1024} KiB" if value >= 1024 and value % 1024 == 0 else f"{value} B"


def _calls(k: KernelTime) -> str:
    return f" ({k.calls} calls)" if k.calls > 1 else ""


def _namer(names: Mapping[str, str] | None) -> Callable[[str], str]:
    def show(key: str) -> str:
        base, sep, index = key.partition("#")
        shown = (names or {}).get(base, base)
        shown = shown if len(shown) <= 70 else shown[:67] + "..."
        return shown + (f" (launch {index})" if sep and index.isdigit() else "")

    return show


def _time(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.4g} us"


def _signed(ratio: float) -> str:
    if not math.isfinite(ratio):
        return "?"
    return f"{(ratio - 1) * 100:+.1f}%"


def _percent(value: float) -> str:
    return "?" if not math.isfinite(value) else f"{value * 100:.0f}%"
