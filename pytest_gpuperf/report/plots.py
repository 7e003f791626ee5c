"""Charts of a JSON report: one PNG per kernel family and an ``index.html`` that links them.

``write_plots(report, out_dir)`` takes the dict ``report.build_json`` makes (or a committed
``--gpu-perf-json`` file, loaded) and draws, per family (tests grouped by the folder under
``tests/``: ``tests/qkv/test_perf.py`` -> ``qkv``):

1. sweeps: tests of one function whose ids differ in one number (``test_x[fused-200]``,
   ``test_x[fused-1000]``, ...) as lines over that number, one line per series (the rest of the
   id, and the variant). The left panel has the median times (or, for tests that claim a speedup,
   the speedups with their required margins as dashed lines), each with the stored baseline as a
   dashed line and the gate's band around it; the right panel has the change against the stored
   baseline with its interval, the band of +/- the gate's threshold shaded;
2. every other measured variant as a row: its median with its confidence interval, the stored
   baseline as a grey tick inside the gate's band, and beside it the change against the stored
   baseline (the quantity the gate judges), on an axis zoomed so that a 5% change is plain;
3. every other comparison's speedup t(baseline) / t(fast) with its interval, the required margin
   as a red bar, and the colour of its verdict (log axis when wide);
4. every recorded figure whose key contains ``fraction`` (share of copy bandwidth or of a
   roofline) as a bar against 1.0.

The gate fails a variant when the whole interval of its change lies above +threshold, with
threshold = max(tolerance / 2, band) as recorded in the report (``regression.threshold``;
reports older than that field get tolerance / 2). A calibrated check compares time relative to a
reference kernel, so the band drawn around a time is a guide and the change panel is exact.

``index.html`` has a verdict table per family and links the images by relative path, so the
folder is self-contained (copy or upload it whole). matplotlib is imported only here and
drawn through its Agg canvas, without pyplot, so the user's backend is left alone. Artists that
show the gate carry a ``gid`` (``baseline``, ``baseline-band``, ``threshold-band``, ``delta``)
so tests, and readers of an SVG, can find them.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any

from pytest_gpuperf.report.summary import baseline_delta, fmt_time

DPI = 100
WIDTH_IN = 12.0
ROW_IN = 0.24  # height per plotted row
PANEL_IN = 1.1  # title, axis and tick labels of a panel
MAX_LABEL = 76
LOG_SPAN_TIMES = 20.0
LOG_SPAN_SPEEDUP = 8.0
VERDICT_COLOURS = {
    "pass": "#2e7d32",
    "fail": "#c62828",
    "inconclusive": "#ef6c00",
    "measured": "#1f5fa8",
    "recorded": "#1f5fa8",
    "improved": "#00838f",
    "contended": "#888888",
}
BASELINE_COLOUR = "#444444"
BAND_COLOUR = "#d6d6d6"
SWEEP_IN = 3.4  # height of a sweep's row of panels
MIN_SWEEP_POINTS = 3  # distinct values of the number a sweep runs over
DELTA_RANGE = (-0.99, 100.0)  # change against the baseline, as a fraction
OTHER_COLOUR = "#555555"
# Values drawn on each panel; a row outside (a hostile or broken report: 1e308 s, a negative
# speedup) is left out of the chart with a note, and still listed in index.html's table.
TIME_RANGE = (1e-12, 1e6)  # seconds
SPEEDUP_RANGE = (1e-6, 1e6)
FRACTION_RANGE = (0.0, 1e3)
MAX_ROWS = 400  # per panel: taller figures pass Agg's 65,536-pixel limit
MAX_SLUG = 80


class PlotsUnavailable(RuntimeError):
    """Charts cannot be drawn here (matplotlib missing); the message says what to install."""


def family_of(nodeid: str) -> str:
    """``tests/qkv/test_perf.py::test_x[a]`` -> ``qkv``; a test file at the top level -> its stem."""
    parts = PurePosixPath(nodeid.split("::", 1)[0]).parts
    if len(parts) >= 3 and parts[0] == "tests":
        return parts[1]
    if len(parts) >= 2:
        return parts[-2]
    return PurePosixPath(parts[0]).stem if parts else "tests"


def short_test(nodeid: str) -> str:
    """The test's name and parameters without the module and the ``test_`` prefix."""
    name = nodeid.split("::", 1)[-1]
    return name.removeprefix("test_")


def _clip(text: str, limit: int = MAX_LABEL) -> str:
    if len(text) <= limit:
        return text
    keep = (limit - 1) // 2
    return text[:keep] + "\u2026" + text[-(limit - 1 - keep) :]


def _label(test: str, extra: str = "", sep: str = " \u00b7 ") -> str:
    """``test · extra`` within MAX_LABEL characters: the test's name is shortened before its parameters."""
    full = f"{test}{sep}{extra}" if extra else test
    if len(full) <= MAX_LABEL:
        return full
    name, bracket, params = test.partition("[")
    room = MAX_LABEL - (len(full) - len(name))
    if room >= 8:
        return f"{name[: room - 1]}\u2026{bracket}{params}" + (f"{sep}{extra}" if extra else "")
    return _clip(full)


def _common_suffix(keys: Sequence[str]) -> str:
    """The longest ``_``-separated tail shared by all ``keys`` (``a_bandwidth_fraction``, ``b_bandwidth_fraction``)."""
    if not keys:
        return ""
    split = [k.split("_") for k in keys]
    tail: list[str] = []
    for parts in zip(*(reversed(p) for p in split), strict=False):
        if len(set(parts)) != 1:
            break
        tail.insert(0, parts[0])
    return "_".join(tail)


def _slug(family: str) -> str:
    """A file name for ``family``'s chart: safe characters, short enough for any file system."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", family).strip(".") or "family"
    if len(slug) > MAX_SLUG:
        import hashlib

        slug = slug[: MAX_SLUG - 9] + "-" + hashlib.sha256(family.encode("utf-8", "replace")).hexdigest()[:8]
    return slug


def _plain(text: Any, limit: int = MAX_LABEL) -> str:
    """``text`` as matplotlib draws it literally: no mathtext (``$``), no control characters, clipped."""
    clean = "".join(c if c.isprintable() else "?" for c in _clip(str(text), limit))
    return clean.replace("$", r"\$")


def _plottable(
    row: Mapping[str, Any], span: tuple[float, float], keys: Sequence[str] = ("low", "value", "high")
) -> bool:
    """Whether the row's numbers are finite, inside ``span`` and ordered low <= value <= high."""
    values = [row[k] for k in keys]
    if not all(isinstance(v, float) and math.isfinite(v) and span[0] <= v <= span[1] for v in values):
        return False
    return list(values) == sorted(values)


def _number(value: Any) -> float:
    """``value`` as a float; NaN for anything that is not a number within the float range."""
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return math.nan


def group_by_family(report: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Tests of the report per family, in report order."""
    families: dict[str, list[dict[str, Any]]] = {}
    for test in report.get("tests", []):
        families.setdefault(family_of(test["nodeid"]), []).append(test)
    return families


# -- rows of each panel ---------------------------------------------------------------------
def _base_name(variant: str) -> str:
    """``fused@200`` -> ``fused``: the variant without the shape suffix some families add."""
    return variant.split("@", 1)[0].split("#", 1)[0]


def _named_in(test: str, *variants: str) -> bool:
    return all(_base_name(v) in test for v in variants)


def gate_of(record: Mapping[str, Any]) -> dict[str, float] | None:
    """The stored baseline's median, the gate's threshold and the change now / stored with its
    interval (as fractions: 0.05 is 5% slower) of one measurement record; None without a check."""
    reg = record.get("regression")
    if not isinstance(reg, dict):
        return None
    change = [_number(reg.get(k)) - 1.0 for k in ("slowdown", "ci_low", "ci_high")]
    threshold = _number(reg.get("threshold"))
    if not math.isfinite(threshold):  # reports before the threshold was recorded: the tolerance rule
        threshold = max(
            _number(reg.get("tolerance")) / 2.0, _number(reg.get("band")) if reg.get("band") is not None else 0.0
        )
    stored = record.get("baseline")
    return {
        "delta": change[0],
        "delta_low": change[1],
        "delta_high": change[2],
        "threshold": threshold,
        "baseline": _number(stored.get("median_s")) if isinstance(stored, dict) else math.nan,
    }


def measurement_rows(tests: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per measured variant; the variant is named unless the test id already says it.
    Rows of a checked measurement carry its ``gate_of`` numbers."""
    rows = []
    for t in tests:
        test = short_test(t["nodeid"])
        measurements = t.get("measurements", [])
        for m in measurements:
            s = m["measurement"]
            verdict = str((m.get("regression") or {}).get("verdict") or m.get("verdict") or "measured")
            alone = len(measurements) == 1 and _named_in(test, s["name"])
            rows.append(
                {
                    "label": _label(test, "" if alone else s["name"]),
                    "value": _number(s["median_s"]),
                    "low": _number(s["ci_low_s"]),
                    "high": _number(s["ci_high_s"]),
                    "verdict": verdict,
                    "throttled": bool(s.get("throttled")),
                    "gate": gate_of(m),
                }
            )
    return rows


def comparison_rows(tests: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per comparison; ``fast vs baseline`` is added unless the test id already names both."""
    rows = []
    for t in tests:
        test = short_test(t["nodeid"])
        for c in t.get("comparisons", []):
            named = _named_in(test, c["fast"], c["baseline"]) and len(t.get("comparisons", [])) == 1
            rows.append(
                {
                    "label": _label(test, "" if named else f"{c['fast']} vs {c['baseline']}", sep=": "),
                    "value": _number(c["speedup"]),
                    "low": _number(c["ci_low"]),
                    "high": _number(c["ci_high"]),
                    "margin": None if c.get("at_least") is None else _number(c["at_least"]),
                    "verdict": str(c.get("verdict", "measured")),
                }
            )
    return rows


def fraction_rows(tests: Iterable[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], str | None]:
    """Rows of the figures whose key contains ``fraction``, and their key when all share one."""
    found = []
    for t in tests:
        for f in t.get("figures", []):
            if "fraction" in f["key"] and f.get("value") is not None and math.isfinite(_number(f["value"])):
                found.append((short_test(t["nodeid"]), f["key"], _number(f["value"])))
    keys = sorted({key for _, key, _ in found})
    suffix = _common_suffix(keys)
    rows = []
    for test, key, value in found:
        head = key[: len(key) - len(suffix)].rstrip("_") if suffix else key
        rows.append({"label": _label(test, head), "value": value})
    title = (keys[0] if len(keys) == 1 else f"<x>_{suffix} (x after the \u00b7)" if suffix else None) if keys else None
    return rows, title


# -- sweeps: one test function over a number in its id ---------------------------------------
_NUMBER = re.compile(r"^[0-9]+(\.[0-9]+)?([eE][0-9]+)?$")


def _id_parts(nodeid: str) -> tuple[str, list[str]] | None:
    """``path::test_x[fused-200]`` -> (``test_x``, [``fused``, ``200``]); None without parameters."""
    name = nodeid.split("::")[-1]
    func, bracket, rest = name.partition("[")
    if not bracket or not rest.endswith("]"):
        return None
    return func, rest[:-1].split("-")


def split_sweeps(tests: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[Mapping[str, Any]]]:
    """The family's sweeps, and the tests that are in none.

    A sweep is a test function whose ids split on '-' into the same number of parts, one part a
    number taking at least ``MIN_SWEEP_POINTS`` values (the most, if several are): its x axis.
    The other parts name the series. Each sweep is ``{"name", "axis", "position", "tests": [(x,
    series, test), ...]}``.
    """
    groups: dict[tuple[str, int], list[tuple[list[str], Mapping[str, Any]]]] = {}
    for t in tests:
        parts = _id_parts(str(t["nodeid"]))
        if parts is not None:
            groups.setdefault((parts[0], len(parts[1])), []).append((parts[1], t))
    sweeps: list[dict[str, Any]] = []
    swept: set[int] = set()
    for (func, width), members in groups.items():
        if len(members) < MIN_SWEEP_POINTS:
            continue
        best: tuple[int, int] | None = None
        for k in range(width):
            values = [params[k] for params, _ in members]
            if all(_NUMBER.match(v) for v in values):
                distinct = len(set(float(v) for v in values))
                if distinct >= MIN_SWEEP_POINTS and (best is None or distinct >= best[1]):
                    best = (k, distinct)
        if best is None:
            continue
        k = best[0]
        pattern = "-".join("x" if i == k else "\u00b7" for i in range(width))
        sweeps.append(
            {
                "name": func.removeprefix("test_"),
                "axis": f"x in {func.removeprefix('test_')}[{pattern}]",
                "tests": [(float(params[k]), "-".join(params[:k] + params[k + 1 :]), t) for params, t in members],
            }
        )
        swept.update(id(t) for _, t in members)
    return sweeps, [t for t in tests if id(t) not in swept]


def _series_points(sweep: Mapping[str, Any], what: str) -> dict[str, list[dict[str, Any]]]:
    """Points of a sweep per series: ``what`` is "times" (each measured variant), "speedups"
    (each comparison), "deltas" (each measured variant checked against a stored baseline) or
    "fractions" (each recorded figure whose key contains ``fraction``)."""
    series: dict[str, list[dict[str, Any]]] = {}
    for x, name, t in sweep["tests"]:
        if what == "speedups":
            for c in t.get("comparisons", []):
                pair = f"{_base_name(str(c['fast']))} vs {_base_name(str(c['baseline']))}"
                label = (
                    (name or pair)
                    if len(t.get("comparisons", [])) == 1
                    else (f"{name} \u00b7 {pair}" if name else pair)
                )
                margin = None if c.get("at_least") is None else _number(c["at_least"])
                series.setdefault(label, []).append(
                    {
                        "x": x,
                        "value": _number(c["speedup"]),
                        "low": _number(c["ci_low"]),
                        "high": _number(c["ci_high"]),
                        "margin": margin,
                        "verdict": str(c.get("verdict", "measured")),
                    }
                )
            continue
        if what == "fractions":
            for f in t.get("figures", []):
                if "fraction" in str(f["key"]) and f.get("value") is not None:
                    label = f"{name} \u00b7 {f['key']}" if name else str(f["key"])
                    series.setdefault(label, []).append({"x": x, "value": _number(f["value"]), "verdict": "measured"})
            continue
        seen: dict[str, int] = {}
        measurements = t.get("measurements", [])
        for m in measurements:
            s = m["measurement"]
            variant = _base_name(str(s["name"]))
            seen[variant] = seen.get(variant, 0) + 1
            named = len(measurements) == 1 and (not name or variant in name)
            label = (name or variant) if named else (f"{name} \u00b7 {variant}" if name else variant)
            label += f" #{seen[variant]}" if seen[variant] > 1 else ""
            gate = gate_of(m)
            if what == "deltas" and gate is None:
                continue
            series.setdefault(label, []).append(
                {
                    "x": x,
                    "value": _number(s["median_s"]),
                    "low": _number(s["ci_low_s"]),
                    "high": _number(s["ci_high_s"]),
                    "verdict": str((m.get("regression") or {}).get("verdict") or m.get("verdict") or "measured"),
                    "gate": gate,
                }
            )
    return {label: sorted(points, key=lambda p: p["x"]) for label, points in series.items()}


# -- drawing ------------------------------------------------------------------------------
def _matplotlib() -> Any:
    try:
        import matplotlib
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401
        from matplotlib.figure import Figure  # noqa: F401
    except ImportError as exc:
        raise PlotsUnavailable(
            f"matplotlib is not installed ({exc}); install it (pip install matplotlib) to draw the charts"
        ) from None
    import matplotlib

    return matplotlib


def _span(values: Sequence[float]) -> float:
    positive = [v for v in values if v > 0]
    return max(positive) / min(positive) if positive else 1.0


# An interval wider than this factor around its own point is drawn clipped (with an arrow and
# its end written out), so one runaway interval does not squash every other row.
CLIP_FACTOR = 3.0


def _axis_range(rows: Sequence[Mapping[str, Any]], extra: Sequence[float], log: bool) -> tuple[float, float]:
    lows = [
        max(r["low"], r["value"] / CLIP_FACTOR) if log else max(r["low"], r["value"] - (CLIP_FACTOR - 1) * r["value"])
        for r in rows
    ]
    highs = [min(r["high"], r["value"] * CLIP_FACTOR) for r in rows]
    return min(lows + list(extra)), max(highs + list(extra))


def _style_rows(ax: Any, labels: Sequence[str]) -> None:
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=8, family="monospace")
    ax.set_ylim(len(labels) - 0.5, -0.5)  # first row at the top
    ax.grid(axis="x", which="major", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.tick_params(axis="x", labelsize=8)
    for y in range(len(labels)):
        if y % 2:
            ax.axhspan(y - 0.5, y + 0.5, color="#f4f4f4", zorder=0, linewidth=0)


def _legend_above(ax: Any, handles: Sequence[Any]) -> None:
    ax.legend(
        handles=handles,
        fontsize=7,
        loc="lower right",
        bbox_to_anchor=(1.0, 1.0),
        ncol=len(handles),
        frameon=False,
        borderaxespad=0.2,
        handletextpad=0.3,
        columnspacing=1.0,
    )


def _draw_intervals(
    ax: Any,
    rows: Sequence[Mapping[str, Any]],
    *,
    log: bool,
    lo: float,
    hi: float,
    marker: str,
    text: Callable[[Mapping[str, Any]], str],
) -> None:
    """Points with interval bars, clipped to [lo, hi] with an arrow where an interval runs past."""
    for y, r in enumerate(rows):
        colour = VERDICT_COLOURS.get(r["verdict"], OTHER_COLOUR)
        left, right = max(r["low"], lo), min(r["high"], hi)
        ax.errorbar(
            r["value"],
            y,
            xerr=[[r["value"] - left], [right - r["value"]]],
            fmt=marker,
            ms=4.5,
            color=colour,
            ecolor=colour,
            elinewidth=1.3,
            capsize=3,
            zorder=3,
        )
        if r["high"] > hi:
            ax.plot([hi], [y], marker=">", ms=6, color=colour, zorder=3)
        if r["low"] < lo:
            ax.plot([lo], [y], marker="<", ms=6, color=colour, zorder=3)
        _row_label(ax, text(r), (max(right, r.get("margin") or 0), y), dx=7, zorder=4)


def _clipped_note(r: Mapping[str, Any], lo: float, hi: float, fmt: Any) -> str:
    ends = ([f"from {fmt(r['low'])}"] if r["low"] < lo else []) + ([f"to {fmt(r['high'])}"] if r["high"] > hi else [])
    return f" (interval {' '.join(ends)})" if ends else ""


def _band(gate: Mapping[str, float] | None) -> tuple[float, float, float] | None:
    """(baseline, low end, high end) of the gate's band around a stored median, when drawable."""
    if not gate:
        return None
    b, t = gate["baseline"], gate["threshold"]
    if not (math.isfinite(b) and math.isfinite(t) and b > 0 and 0 <= t < 1):
        return None
    return b, b * (1 - t), b * (1 + t)


def _draw_times(ax: Any, rows: list[dict[str, Any]], confidence: str) -> list[Any]:
    """The rows panel of medians; returns its legend's handles (drawn above the panel here, or by
    the caller above a row of two panels)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import EngFormatter

    bands = [(y, _band(r.get("gate"))) for y, r in enumerate(rows)]
    drawn = [(y, b) for y, b in bands if b is not None and TIME_RANGE[0] <= b[1] and b[2] <= TIME_RANGE[1]]
    ends = [end for _, b in drawn for end in (b[1], b[2])]
    log = _span([r["value"] for r in rows] + ends) > LOG_SPAN_TIMES
    lo, hi = _axis_range(rows, ends, log)

    def t(v: float) -> str:
        return fmt_time(v).replace("us", "\u00b5s")

    for y, (base, low, high) in drawn:
        ax.barh(y, high - low, left=low, height=0.7, color=BAND_COLOUR, zorder=1, linewidth=0, gid="baseline-band")
        ax.plot([base], [y], marker="|", ms=12, mew=1.8, color=BASELINE_COLOUR, zorder=2, gid="baseline")
    _draw_intervals(
        ax,
        rows,
        log=log,
        lo=lo,
        hi=hi,
        marker="o",
        text=lambda r: t(r["value"]) + _clipped_note(r, lo, hi, t) + (" THROTTLED" if r["throttled"] else ""),
    )
    if log:
        ax.set_xscale("log")
        ax.set_xlim(lo / 1.4, hi * 5.0)
    else:  # zoomed on the values, not from 0: a 5% difference stays visible
        left = max(0.0, lo - 0.08 * ((hi - lo) or hi))
        ax.set_xlim(left, hi + 0.55 * (hi - left))
    ax.xaxis.set_major_formatter(EngFormatter(unit="s", places=None))
    _style_rows(ax, [r["label"] for r in rows])
    ax.set_title("Median GPU time per launch", fontsize=10, loc="left", fontweight="bold")
    ax.set_xlabel(
        f"time per launch ({'log' if log else 'linear, zoomed'} scale); bars: {confidence} interval of the median;\n"
        + ("grey tick in a box: stored baseline \u00b1 the gate's threshold; " if drawn else "")
        + "an arrow: an interval cut at the axis",
        fontsize=8,
    )
    present = sorted({r["verdict"] for r in rows})[:8]
    handles: list[Any] = [
        Line2D(
            [],
            [],
            marker="o",
            ms=5,
            linestyle="none",
            color=VERDICT_COLOURS.get(v, OTHER_COLOUR),
            label=_plain(f"baseline check: {v}", 40),
        )
        for v in present
    ]
    if drawn:
        handles += [
            Line2D([], [], marker="|", ms=9, mew=1.8, linestyle="none", color=BASELINE_COLOUR, label="stored baseline"),
            Patch(color=BAND_COLOUR, label="\u00b1 the gate's threshold"),
        ]
    return handles


def _delta_limit(pairs: Sequence[tuple[float, float, float, float]]) -> float:
    """Half-width of a change axis holding (value, low, high, threshold) tuples: the data and 1.6x
    the thresholds, within max(4x the largest threshold, 30%) (past it an interval is clipped)."""
    thresholds = [t for *_, t in pairs if math.isfinite(t)] or [0.025]
    extent = max([abs(v) for p in pairs for v in p[:3] if math.isfinite(v)] + [0.0])
    cap = max(4 * max(thresholds), 0.3)
    return min(max(1.6 * max(thresholds), 1.12 * extent, 0.02), cap)


def _draw_deltas(ax: Any, rows: list[dict[str, Any]]) -> None:
    """Beside the times: each row's change now / stored - 1 with its interval, the band +/- the
    threshold of its gate; the axis shares the rows (and their labels) of the times panel."""
    from matplotlib.ticker import PercentFormatter

    gated = [(y, r["gate"], r["verdict"]) for y, r in enumerate(rows) if r.get("gate")]
    pairs = [
        (g["delta"], g["delta_low"], g["delta_high"], g["threshold"])
        for _, g, _ in gated
        if _plottable({"low": g["delta_low"], "value": g["delta"], "high": g["delta_high"]}, DELTA_RANGE)
    ]
    limit = _delta_limit(pairs)
    for y, g, verdict in gated:
        if math.isfinite(g["threshold"]):
            ax.barh(
                y,
                2 * g["threshold"],
                left=-g["threshold"],
                height=0.7,
                color=BAND_COLOUR,
                linewidth=0,
                zorder=1,
                gid="threshold-band",
            )
        row = {"low": g["delta_low"], "value": g["delta"], "high": g["delta_high"]}
        if not _plottable(row, DELTA_RANGE):
            _row_label(ax, "not drawn", (0, y), color="#777777")
            continue
        colour = VERDICT_COLOURS.get(verdict, OTHER_COLOUR)
        value = min(max(g["delta"], -limit), limit)
        left, right = max(g["delta_low"], -limit), min(g["delta_high"], limit)
        ax.errorbar(
            value,
            y,
            xerr=[[max(value - left, 0)], [max(right - value, 0)]],
            fmt="s",
            ms=4,
            color=colour,
            ecolor=colour,
            elinewidth=1.3,
            capsize=2.5,
            zorder=3,
            gid="delta",
        )
        if g["delta_high"] > limit:
            ax.plot([limit], [y], marker=">", ms=6, color=colour, zorder=3)
        if g["delta_low"] < -limit:
            ax.plot([-limit], [y], marker="<", ms=6, color=colour, zorder=3)
        _row_label(ax, f"{100 * g['delta']:+.1f}%", (right, y), dx=5, zorder=4)
    for y, r in enumerate(rows):
        if not r.get("gate"):
            _row_label(ax, "no check", (0, y), dx=0, color="#999999", ha="center")
    ax.axvline(0.0, color="#888888", linestyle="--", linewidth=0.9, zorder=1)
    ax.set_xlim(-limit, limit * 1.35)
    ax.xaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0 if limit >= 0.1 else 1))
    ax.tick_params(axis="y", left=False, labelleft=False)
    ax.grid(axis="x", color="#dddddd", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.tick_params(axis="x", labelsize=8)
    ax.set_title("Change vs baseline", fontsize=10, loc="left", fontweight="bold")
    ax.set_xlabel(
        "now / stored \u2212 1, with its interval;\ngrey: \u00b1 the gate's threshold;\n"
        "fails when all of the interval is right of it",
        fontsize=8,
    )


def _draw_speedups(ax: Any, rows: list[dict[str, Any]]) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter

    margins = [r["margin"] for r in rows if r["margin"] is not None]
    log = _span([r["value"] for r in rows] + margins + [1.0]) > LOG_SPAN_SPEEDUP
    lo, hi = _axis_range(rows, [*margins, 1.0], log)

    def x(v: float) -> str:
        return f"{v:.3g}x"

    _draw_intervals(
        ax,
        rows,
        log=log,
        lo=lo,
        hi=hi,
        marker="D",
        text=lambda r: (
            x(r["value"])
            + (f" (need \u2265{r['margin']:.3g}x)" if r["margin"] is not None else "")
            + _clipped_note(r, lo, hi, x)
        ),
    )
    for y, r in enumerate(rows):
        if r["margin"] is not None:
            ax.plot([r["margin"]], [y], marker="|", ms=13, mew=2.2, color="#c62828", linestyle="none", zorder=3)
    ax.axvline(1.0, color="#888888", linestyle="--", linewidth=0.9, zorder=1)
    if log:
        ax.set_xscale("log")
        ax.set_xlim(lo / 1.6, hi * 4.0)
    else:
        pad = (hi - lo) or 0.1
        ax.set_xlim(max(0.0, lo - 0.15 * pad), hi + 0.6 * pad)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}x"))
    _style_rows(ax, [r["label"] for r in rows])
    ax.set_title("Speedup t(baseline) / t(fast)", fontsize=10, loc="left", fontweight="bold")
    ax.set_xlabel(
        f"speedup ({'log' if log else 'linear'} scale) from interleaved A/B rounds; bars: bootstrap interval;\n"
        "left of the dashed 1x line the 'fast' variant is the slower one",
        fontsize=8,
    )
    present = sorted({r["verdict"] for r in rows})[:8]
    handles = [
        Line2D(
            [], [], marker="D", ms=5, linestyle="none", color=VERDICT_COLOURS.get(v, OTHER_COLOUR), label=_plain(v, 40)
        )
        for v in present
    ]
    if margins:
        handles.append(
            Line2D([], [], marker="|", ms=10, mew=2, linestyle="none", color="#c62828", label="required margin")
        )
    handles.append(Line2D([], [], linestyle="--", color="#888888", label="1x"))
    _legend_above(ax, handles)


def _row_label(ax: Any, text: str, xy: tuple[float, float], dx: float = 4, color: str = "#333333", **kw: Any) -> None:
    """Small text beside a row's bar or point, ``dx`` points to the right of ``xy``."""
    ax.annotate(text, xy, xytext=(dx, 0), textcoords="offset points", va="center", fontsize=7, color=color, **kw)


def _draw_fractions(ax: Any, rows: list[dict[str, Any]], key: str | None) -> None:
    from matplotlib.ticker import PercentFormatter

    ys = list(range(len(rows)))
    values = [r["value"] for r in rows]
    ax.barh(ys, values, height=0.6, color="#5c8fc4", zorder=2)
    ax.axvline(1.0, color="#c62828", linestyle="--", linewidth=1.0, zorder=3)
    for y, v in zip(ys, values, strict=False):
        _row_label(ax, f"{100 * v:.1f}%", (v, y))
    ax.set_xlim(0, max(1.12, max(values) * 1.15))
    ax.xaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))
    _style_rows(ax, [r["label"] for r in rows])
    ax.set_title(
        _plain(f"Recorded {key}" if key else "Recorded fractions", 120), fontsize=10, loc="left", fontweight="bold"
    )
    ax.set_xlabel(
        "share of the measured copy bandwidth or of the roofline the test recorded; dashed line: 100%", fontsize=8
    )


def _colours(n: int) -> list[Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def _x_scale(ax: Any, xs: Sequence[float]) -> bool:
    """A log x axis when the swept number spans more than 20x (token counts, sizes); returns it."""
    log = bool(xs) and min(xs) > 0 and max(xs) / min(xs) > 20
    if log:
        ax.set_xscale("log")
    values = sorted(set(xs))
    if len(values) <= 12:
        from matplotlib.ticker import FixedLocator, NullLocator

        ax.xaxis.set_major_locator(FixedLocator(values))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticklabels([f"{v:g}" for v in values])
    return log


def _kept(
    series: Mapping[str, list[dict[str, Any]]], span: tuple[float, float], dropped: list[int]
) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for label, points in series.items():
        good = [p for p in points if _plottable(p, span) and math.isfinite(p["x"])]
        dropped[0] += len(points) - len(good)
        if good:
            out[_plain(label, 60)] = good
    return out


def _draw_sweep_values(
    ax: Any,
    sweep: Mapping[str, Any],
    series: Mapping[str, list[dict[str, Any]]],
    speedups: bool,
    colours: Mapping[str, Any],
    confidence: str,
) -> None:
    """Medians (or speedups) over the swept number, a line per series; for times the stored
    baseline dashed with the gate's band, for speedups the required margin dashed."""
    from matplotlib.ticker import EngFormatter, FuncFormatter

    values: list[float] = []
    for label, points in series.items():
        colour = colours[label]
        xs = [p["x"] for p in points]
        ys = [p["value"] for p in points]
        values += [p["low"] for p in points] + [p["high"] for p in points]
        ax.plot(xs, ys, "-o", ms=3.5, lw=1.3, color=colour, zorder=3, label=label, gid="series")
        ax.errorbar(
            xs,
            ys,
            yerr=[[p["value"] - p["low"] for p in points], [p["high"] - p["value"] for p in points]],
            fmt="none",
            ecolor=colour,
            elinewidth=1,
            capsize=2,
            zorder=3,
        )
        for p in points:
            if p["verdict"] in ("fail", "inconclusive"):
                ax.plot(
                    [p["x"]],
                    [p["value"]],
                    marker="o",
                    ms=9,
                    mfc="none",
                    mew=1.6,
                    color=VERDICT_COLOURS[p["verdict"]],
                    zorder=4,
                )
        if speedups:
            margins = [
                (p["x"], p["margin"])
                for p in points
                if p.get("margin") is not None and _plottable(p, SPEEDUP_RANGE, ("margin",))
            ]
            if margins:
                ax.plot(*zip(*margins, strict=False), linestyle="--", lw=1.1, color=colour, zorder=2, gid="margin")
                values += [m for _, m in margins]
            continue
        bands = [
            (p["x"], b)
            for p in points
            for b in [_band(p.get("gate"))]
            if b is not None and TIME_RANGE[0] <= b[1] and b[2] <= TIME_RANGE[1]
        ]
        if bands:
            bx = [x for x, _ in bands]
            ax.plot(
                bx, [b[0] for _, b in bands], linestyle="--", lw=0.9, color=colour, alpha=0.9, zorder=2, gid="baseline"
            )
            ax.fill_between(
                bx,
                [b[1] for _, b in bands],
                [b[2] for _, b in bands],
                color=colour,
                alpha=0.14,
                linewidth=0,
                zorder=1,
                gid="baseline-band",
            )
            values += [b[1] for _, b in bands] + [b[2] for _, b in bands]
    xs_all = [p["x"] for points in series.values() for p in points]
    log_x = _x_scale(ax, xs_all)
    span = _span(values) if values else 1.0
    if span > (LOG_SPAN_SPEEDUP if speedups else LOG_SPAN_TIMES):
        ax.set_yscale("log")
    else:  # zoomed on the data: a 5% change is a visible step, not a pixel above an axis from 0
        lo, hi = min(values), max(values)
        pad = 0.08 * ((hi - lo) or hi or 1.0)
        ax.set_ylim(lo - pad, hi + pad)
    if speedups:
        ax.axhline(1.0, color="#888888", linestyle="--", linewidth=0.9, zorder=1)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}x"))
        ax.set_title(_plain(f"{sweep['name']}: speedup", 70), fontsize=10, loc="left", fontweight="bold")
        what = "t(baseline) / t(fast) with its interval; dashed: the required margin;\na ring: the claim failed or is undecided"
    else:
        ax.yaxis.set_major_formatter(EngFormatter(unit="s", places=None))
        ax.set_title(_plain(f"{sweep['name']}: median time per launch", 70), fontsize=10, loc="left", fontweight="bold")
        what = (
            f"median with its {confidence} interval; dashed: stored baseline, shaded: \u00b1 the gate's\n"
            "threshold around it; a ring: the baseline check failed or is undecided"
        )
    ax.set_xlabel(_plain(f"{sweep['axis']} ({'log' if log_x else 'linear'} scale)", 120) + "\n" + what, fontsize=8)
    ax.grid(color="#e4e4e4", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.tick_params(labelsize=8)


def _draw_sweep_deltas(ax: Any, series: Mapping[str, list[dict[str, Any]]], colours: Mapping[str, Any]) -> None:
    """The change now / stored - 1 over the swept number, with the band +/- the gate's threshold."""
    from matplotlib.ticker import PercentFormatter

    thresholds = sorted(
        {
            round(p["gate"]["threshold"], 6)
            for points in series.values()
            for p in points
            if math.isfinite(p["gate"]["threshold"])
        }
    )
    pairs = [
        (p["gate"]["delta"], p["gate"]["delta_low"], p["gate"]["delta_high"], p["gate"]["threshold"])
        for points in series.values()
        for p in points
    ]
    limit = _delta_limit(pairs)
    for t in thresholds:
        ax.axhspan(
            -t,
            t,
            color=BAND_COLOUR,
            alpha=0.7 if len(thresholds) == 1 else 0.45,
            linewidth=0,
            zorder=0,
            gid="threshold-band",
        )
    if thresholds:
        ax.axhline(max(thresholds), color=VERDICT_COLOURS["fail"], linestyle=":", linewidth=1.1, zorder=1)
    ax.axhline(0.0, color="#888888", linestyle="--", linewidth=0.9, zorder=1)
    xs_all = sorted({p["x"] for points in series.values() for p in points})
    log_x = bool(xs_all) and xs_all[0] > 0 and xs_all[-1] / xs_all[0] > 20
    n = len(series)
    for i, (label, points) in enumerate(series.items()):
        shift = (i - (n - 1) / 2) * (0.035 if log_x else 0.012 * ((xs_all[-1] - xs_all[0]) or 1.0)) if n > 1 else 0.0
        for p in points:
            g = p["gate"]
            x = p["x"] * math.exp(shift) if log_x else p["x"] + shift
            value = min(max(g["delta"], -limit), limit)
            low, high = max(g["delta_low"], -limit), min(g["delta_high"], limit)
            colour = colours.get(label, OTHER_COLOUR)
            ax.errorbar(
                [x],
                [value],
                yerr=[[max(value - low, 0)], [max(high - value, 0)]],
                fmt="s",
                ms=3.5,
                color=colour,
                elinewidth=1.1,
                capsize=2,
                zorder=3,
                gid="delta",
            )
            if p["verdict"] in ("fail", "inconclusive"):
                ax.plot(
                    [x], [value], marker="s", ms=9, mfc="none", mew=1.6, color=VERDICT_COLOURS[p["verdict"]], zorder=4
                )
                ax.annotate(
                    _plain(f"{label} {100 * g['delta']:+.1f}%", 50),
                    (x, value),
                    xytext=(5, 4),
                    textcoords="offset points",
                    fontsize=7,
                    color=VERDICT_COLOURS[p["verdict"]],
                    zorder=5,
                )
    _x_scale(ax, xs_all)
    ax.set_ylim(-limit, limit)
    ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0 if limit >= 0.1 else 1))
    ax.grid(color="#e4e4e4", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.tick_params(labelsize=8)
    ax.set_title("Change vs stored baseline", fontsize=10, loc="left", fontweight="bold")
    shown = ", ".join(f"\u00b1{100 * t:g}%" for t in thresholds) or "none recorded"
    ax.set_xlabel(
        f"now / stored \u2212 1 with its interval, series side by side;\ngrey: \u00b1 the gate's threshold ({shown}); "
        "a check fails when\nits whole interval lies above the dotted line",
        fontsize=8,
    )


def _sweep_panels(sweep: Mapping[str, Any], confidence: str, dropped: list[int]) -> dict[str, Any] | None:
    """What one sweep draws: the series of its left panel and of its change panel, or None."""
    speedups = any(t.get("comparisons") for _, _, t in sweep["tests"])
    values = _kept(
        _series_points(sweep, "speedups" if speedups else "times"), SPEEDUP_RANGE if speedups else TIME_RANGE, dropped
    )
    deltas: dict[str, list[dict[str, Any]]] = {}
    for label, points in _series_points(sweep, "deltas").items():
        good = [
            p
            for p in points
            if _plottable(
                {"low": p["gate"]["delta_low"], "value": p["gate"]["delta"], "high": p["gate"]["delta_high"]},
                DELTA_RANGE,
            )
        ]
        dropped[0] += len(points) - len(good)
        if good:
            deltas[_plain(label, 60)] = good
    fractions: dict[str, list[dict[str, Any]]] = {}
    for label, points in _series_points(sweep, "fractions").items():
        good = [p for p in points if _plottable(p, FRACTION_RANGE, ("value",))]
        dropped[0] += len(points) - len(good)
        if good:
            fractions[_plain(label, 60)] = good
    if not values and not deltas and not fractions:
        return None
    return {
        "sweep": sweep,
        "speedups": speedups,
        "values": values,
        "deltas": deltas,
        "fractions": fractions,
        "confidence": confidence,
    }


def _draw_sweep_fractions(
    ax: Any,
    sweep: Mapping[str, Any],
    series: Mapping[str, list[dict[str, Any]]],
    colours: Mapping[str, Any],
    key: str | None = None,
) -> None:
    from matplotlib.ticker import PercentFormatter

    for label, points in series.items():
        ax.plot(
            [p["x"] for p in points],
            [p["value"] for p in points],
            "-o",
            ms=3.5,
            lw=1.3,
            color=colours[label],
            label=label,
        )
    ax.axhline(1.0, color="#c62828", linestyle="--", linewidth=1.0)
    xs = [p["x"] for points in series.values() for p in points]
    log_x = _x_scale(ax, xs)
    top = max(p["value"] for points in series.values() for p in points)
    ax.set_ylim(0, max(1.08, top * 1.1))
    ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))
    ax.grid(color="#e4e4e4", linewidth=0.6)
    ax.tick_params(labelsize=8)
    keys = [key] if key else sorted({label.rsplit(" \u00b7 ", 1)[-1] for label in series})
    ax.set_title(
        _plain(f"{sweep['name']}: recorded {', '.join(keys)}", 110), fontsize=10, loc="left", fontweight="bold"
    )
    ax.set_xlabel(_plain(f"{sweep['axis']} ({'log' if log_x else 'linear'} scale); dashed: 100%", 160), fontsize=8)


def _legend_below(sub: Any, labels: Sequence[str], colours: Mapping[str, Any]) -> None:
    """One legend of a sweep's series under its row, as many columns as the width holds."""
    from matplotlib.lines import Line2D

    if len(labels) < 2:
        return
    widest = max(len(label) for label in labels)
    ncol = max(1, min(len(labels), int(WIDTH_IN * 72 / (widest * 4.4 + 28))))
    handles = [Line2D([], [], marker="o", ms=4, lw=1.3, color=colours[label], label=label) for label in labels]
    sub.legend(handles=handles, fontsize=7, ncol=ncol, loc="outside lower center", frameon=False)


def plot_family(family: str, tests: Sequence[Mapping[str, Any]], path: Path, *, subtitle: str = "") -> Path | None:
    """Draw ``family``'s chart to ``path``; None (nothing written) when it has nothing to plot."""
    _matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    confidence = _confidence_label(tests)
    sweeps, rest = split_sweeps(tests)
    left_out: list[str] = []
    dropped = [0]
    sweep_panels = [p for p in (_sweep_panels(sw, confidence, dropped) for sw in sweeps) if p is not None]
    if dropped[0]:
        left_out.append(f"{dropped[0]} sweep points outside the axes' ranges or out of order")
    fractions, fraction_key = fraction_rows(rest)
    panels: list[tuple[str, Any]] = []
    for p in sweep_panels:
        if p["values"] or p["deltas"]:
            panels.append(("sweep", p))
        if p["fractions"]:
            panels.append(("sweep-fractions", p))
    for kind, rows, span, keys in (
        ("times", measurement_rows(rest), TIME_RANGE, ("low", "value", "high")),
        ("speedups", comparison_rows(rest), SPEEDUP_RANGE, ("low", "value", "high")),
        ("fractions", fractions, FRACTION_RANGE, ("value",)),
    ):
        for r in rows:
            if r.get("margin") is not None and not _plottable(r, SPEEDUP_RANGE, ("margin",)):
                r["margin"] = None
        kept = [r for r in rows if _plottable(r, span, keys)]
        if len(kept) < len(rows):
            left_out.append(f"{len(rows) - len(kept)} {kind} outside {span[0]:g}..{span[1]:g} or out of order")
        if len(kept) > MAX_ROWS:
            left_out.append(f"{len(kept) - MAX_ROWS} {kind} past the first {MAX_ROWS}")
            kept = kept[:MAX_ROWS]
        if kept:
            panels.append((kind, kept))
    if not panels:
        return None
    for kind, rows in panels:
        if not kind.startswith("sweep"):
            for r in rows:
                r["label"] = _plain(r["label"])
    heights = [
        SWEEP_IN if kind == "sweep" else 2.8 if kind == "sweep-fractions" else PANEL_IN + ROW_IN * len(rows)
        for kind, rows in panels
    ]
    fig = Figure(figsize=(WIDTH_IN, sum(heights) + 0.6), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    # One subfigure per panel row: a row of long test labels does not narrow the sweeps above it.
    rows_of = fig.subfigures(len(panels), 1, height_ratios=heights, squeeze=False)[:, 0]
    for sub, (kind, content) in zip(rows_of, panels, strict=False):
        if kind == "sweep":
            both = bool(content["deltas"]) and bool(content["values"])
            axes = sub.subplots(1, 2, width_ratios=[1.5, 1.0], squeeze=False)[0] if both else [sub.subplots()]
            labels = list(content["values"] or content["deltas"])
            colours = dict(zip(labels, _colours(len(labels)), strict=False))
            spare = iter(_colours(len(labels) + len(content["deltas"]))[len(labels) :])
            for label in content["deltas"]:  # a compared variant takes its comparison's colour, or one of its own
                pair = colours.get(label.rsplit(" \u00b7 ", 1)[0])
                if label not in colours:
                    colours[label] = pair if pair is not None else next(spare, OTHER_COLOUR)
                    if pair is None:
                        labels.append(label)
            if content["values"]:
                _draw_sweep_values(
                    axes[0], content["sweep"], content["values"], content["speedups"], colours, confidence
                )
            else:
                _draw_sweep_deltas(axes[0], content["deltas"], colours)
            if both:
                _draw_sweep_deltas(axes[1], content["deltas"], colours)
            _legend_below(sub, labels, colours)
        elif kind == "sweep-fractions":
            fraction_keys = sorted({label.rsplit(" \u00b7 ", 1)[-1] for label in content["fractions"]})
            if len(fraction_keys) == 1 and all(
                " \u00b7 " in label for label in content["fractions"]
            ):  # the title names the key
                content = {
                    **content,
                    "fractions": {
                        label.rsplit(" \u00b7 ", 1)[0]: points for label, points in content["fractions"].items()
                    },
                    "fraction_key": fraction_keys[0],
                }
            labels = list(content["fractions"])
            colours = dict(zip(labels, _colours(len(labels)), strict=False))
            _draw_sweep_fractions(
                sub.subplots(), content["sweep"], content["fractions"], colours, content.get("fraction_key")
            )
            _legend_below(sub, labels, colours)
        elif kind == "times" and any(r.get("gate") for r in content):
            axes = sub.subplots(1, 2, width_ratios=[2.3, 1.0], sharey=True)
            handles = _draw_times(axes[0], content, confidence)
            _draw_deltas(axes[1], content)
            sub.legend(
                handles=handles,
                fontsize=7,
                ncol=len(handles),
                loc="outside upper right",
                frameon=False,
                handletextpad=0.3,
                columnspacing=1.0,
            )
        else:
            ax = sub.subplots()
            if kind == "times":
                _legend_above(ax, _draw_times(ax, content, confidence))
            elif kind == "speedups":
                _draw_speedups(ax, content)
            else:
                _draw_fractions(ax, content, fraction_key)
    title = _plain(family) + (f"  \u2014  {_plain(subtitle)}" if subtitle else "")
    if left_out:
        title += "\n" + _plain("not drawn (listed in index.html): " + "; ".join(left_out), 200)
    fig.suptitle(title, fontsize=11, x=0.01, ha="left")
    path.parent.mkdir(parents=True, exist_ok=True)
    _save_small_png(fig, path)
    return path


def _save_small_png(fig: Any, path: Path) -> None:
    """Save as a 256-colour palette PNG (a third of the RGBA size; these charts have few colours)."""
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    try:
        from PIL import Image  # matplotlib depends on Pillow
    except ImportError:
        path.write_bytes(buffer.getvalue())
        return
    buffer.seek(0)
    with Image.open(buffer) as image:
        image.convert("RGB").quantize(colors=256, method=Image.Quantize.FASTOCTREE).save(
            path, format="PNG", optimize=True
        )


def _confidence_label(tests: Sequence[Mapping[str, Any]]) -> str:
    for t in tests:
        for m in t.get("measurements", []):
            level = m["measurement"].get("confidence")
            if level:
                return f"{100 * float(level):g}%"
    return "confidence"


# -- the HTML index -------------------------------------------------------------------------
def _e(value: Any) -> str:
    return html.escape(str(value))


def _verdict_cell(verdict: str) -> str:
    colour = VERDICT_COLOURS.get(verdict.split("/")[0], OTHER_COLOUR)
    return f'<td style="color:{colour};font-weight:600">{_e(verdict)}</td>'


def _result_cells(what: str, value: str, interval: str, required: str, verdict: str) -> str:
    """One result's cells of the family table (already escaped), its verdict coloured."""
    return f"<td>{what}</td><td>{value}</td><td>{interval}</td><td>{required}</td>" + _verdict_cell(verdict)


def _family_table(tests: Sequence[Mapping[str, Any]]) -> str:
    rows = [
        "<tr><th>test</th><th>outcome</th><th>what</th><th>value</th><th>interval</th><th>required</th><th>verdict</th></tr>"
    ]
    for t in tests:
        name = _e(short_test(t["nodeid"]))
        entries: list[str] = []
        for c in t.get("comparisons", []):
            need = "none (report)" if c.get("at_least") is None else f"&ge; {c['at_least']:.3f}x"
            entries.append(
                _result_cells(
                    f"speedup {_e(c['fast'])} vs {_e(c['baseline'])}",
                    f"{c['speedup']:.4g}x",
                    f"[{c['ci_low']:.4g}, {c['ci_high']:.4g}]",
                    need,
                    str(c.get("verdict", "")),
                )
            )
        for m in t.get("measurements", []):
            s = m["measurement"]
            delta = baseline_delta(m) + (" vs baseline" if m.get("regression") else "")
            entries.append(
                _result_cells(
                    f"median {_e(s['name'])}",
                    _e(fmt_time(s["median_s"])),
                    f"[{_e(fmt_time(s['ci_low_s']))}, {_e(fmt_time(s['ci_high_s']))}]",
                    _e(delta),
                    str(m.get("verdict", "")),
                )
            )
        for f in t.get("figures", []):
            value = f["value"]
            if value is None:
                shown = "-"
            else:
                shown = (
                    f"{100 * value:.1f}%" if "fraction" in f["key"] else f"{value:.4g} {f.get('unit') or ''}".strip()
                )
            entries.append(f"<td>{_e(f['key'])}</td><td>{_e(shown)}</td><td></td><td></td><td></td>")
        for c in t.get("counters", []):
            derived = c.get("derived") or {}
            shown = ", ".join(f"{k} {v:.3g}" for k, v in derived.items() if v is not None)
            entries.append(f"<td>counters {_e(c.get('label', c.get('kernel', '')))}</td><td colspan=4>{_e(shown)}</td>")
        if not entries:
            entries = ["<td colspan=5>(no results)</td>"]
        span = len(entries)
        first = f'<td rowspan="{span}">{name}</td><td rowspan="{span}">{_e(t.get("outcome", ""))}</td>'
        rows.append(f"<tr>{first}{entries[0]}</tr>")
        rows += [f"<tr>{e}</tr>" for e in entries[1:]]
    return "<table>\n" + "\n".join(rows) + "\n</table>"


def write_index(
    report: Mapping[str, Any],
    families: Mapping[str, Sequence[Mapping[str, Any]]],
    images: Mapping[str, Path],
    out_dir: Path,
) -> Path:
    devices = report.get("devices") or {}
    device_text = (
        "; ".join(
            f"{d.get('name', key)} (driver {d.get('driver_version', '?')}, CUDA {d.get('cuda_runtime_version', '?')})"
            for key, d in devices.items()
        )
        or "no device recorded"
    )
    summary = ", ".join(f"{n} {k}" for k, n in sorted((report.get("summary") or {}).items())) or "none"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>pytest-gpuperf report</title>',
        "<style>body{font-family:sans-serif;margin:1.5em;max-width:1250px}table{border-collapse:collapse;font-size:13px;"
        "margin-bottom:1.5em}td,th{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top}"
        "th{background:#eee}img{max-width:100%;border:1px solid #ddd}code{background:#f4f4f4}</style></head><body>",
        "<h1>pytest-gpuperf report</h1>",
        f"<p>Report created {_e(report.get('created', '?'))}; page written "
        f"{_e(datetime.now(timezone.utc).isoformat(timespec='seconds'))}. Device: {_e(device_text)}.</p>",
        f"<p>Verdicts: {_e(summary)}. Cache mode {_e((report.get('settings') or {}).get('cache', '?'))}, "
        f"confidence {_e((report.get('settings') or {}).get('confidence', '?'))}.</p>",
        "<ul>"
        + "".join(f'<li><a href="#{_e(_slug(f))}">{_e(f)}</a> ({len(ts)} tests)</li>' for f, ts in families.items())
        + "</ul>",
    ]
    for family, tests in families.items():
        parts.append(f'<h2 id="{_e(_slug(family))}">{_e(family)}</h2>')
        if family in images:
            parts.append(
                f'<p><a href="{_e(images[family].name)}"><img src="{_e(images[family].name)}" alt="{_e(family)} chart"></a></p>'
            )
        parts.append(_family_table(tests))
    skipped = report.get("skipped") or []
    if skipped:
        parts.append(
            "<h2>Skipped GPU parts</h2><ul>"
            + "".join(f"<li>{s['count']} &times; {_e(s['reason'])}</li>" for s in skipped)
            + "</ul>"
        )
    parts.append("</body></html>")
    path = out_dir / "index.html"
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return path


def write_plots(report: Mapping[str, Any], out_dir: str | Path) -> list[Path]:
    """One PNG per family with results, then ``index.html``; returns the paths written (index last).

    Raises PlotsUnavailable when matplotlib is missing (nothing is written then).
    """
    _matplotlib()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    families = group_by_family(report)
    devices = list((report.get("devices") or {}).values())
    subtitle = devices[0].get("name", "") if len(devices) == 1 else (f"{len(devices)} GPUs" if devices else "")
    images: dict[str, Path] = {}
    for family, tests in families.items():
        n = len(tests)
        written = plot_family(
            family, tests, out / f"{_slug(family)}.png", subtitle=f"{subtitle}, {n} test{'s' * (n != 1)}".lstrip(", ")
        )
        if written is not None:
            images[family] = written
    index = write_index(report, families, images, out)
    return [*images.values(), index]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pytest_gpuperf.report.plots REPORT.json OUT_DIR``: charts of a saved JSON report (``.json.gz`` too)."""
    import argparse
    import sys

    from pytest_gpuperf._store.reports import ReportFileError, load_report

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("report", type=Path)
    parser.add_argument("out_dir", type=Path)
    ns = parser.parse_args(argv)
    try:
        paths = write_plots(load_report(ns.report), ns.out_dir)
    except (ReportFileError, PlotsUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
