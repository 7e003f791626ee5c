"""Drawing a family's chart with matplotlib (through its Agg canvas, without pyplot, so the user's
backend is left alone): panels of times, changes against the stored baseline, speedups and
fractions, and sweeps as lines; the PNG written small. Artists that show the gate carry a ``gid``
(``baseline``, ``baseline-band``, ``threshold-band``, ``delta``) so tests, and readers of an SVG,
can find them."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_gpuperf._report.plots.shape import (
    DELTA_RANGE,
    FRACTION_RANGE,
    MAX_LABEL,
    OTHER_COLOUR,
    SPEEDUP_RANGE,
    TIME_RANGE,
    VERDICT_COLOURS,
    clip,
    comparison_rows,
    fraction_rows,
    measurement_rows,
    plottable,
    series_points,
    split_sweeps,
)
from pytest_gpuperf._report.summary import fmt_time

DPI = 100
WIDTH_IN = 12.0
ROW_IN = 0.24  # height per plotted row
PANEL_IN = 1.1  # title, axis and tick labels of a panel
SWEEP_IN = 3.4  # height of a sweep's row of panels
LOG_SPAN_TIMES = 20.0
LOG_SPAN_SPEEDUP = 8.0
BASELINE_COLOUR = "#444444"
BAND_COLOUR = "#d6d6d6"
MAX_ROWS = 400  # per panel: taller figures pass Agg's 65,536-pixel limit


class PlotsUnavailable(RuntimeError):
    """Charts cannot be drawn here (matplotlib missing); the message says what to install."""


def _plain(text: Any, limit: int = MAX_LABEL) -> str:
    """``text`` as matplotlib draws it literally: no mathtext (``$``), no control characters, clipped."""
    clean = "".join(c if c.isprintable() else "?" for c in clip(str(text), limit))
    return clean.replace("$", r"\$")


def require_matplotlib() -> Any:
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
        if plottable({"low": g["delta_low"], "value": g["delta"], "high": g["delta_high"]}, DELTA_RANGE)
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
        if not plottable(row, DELTA_RANGE):
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
        f"speedup ({'log' if log else 'linear'} scale) from interleaved A/B rounds; bars: batch-means t interval;\n"
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
        good = [p for p in points if plottable(p, span) and math.isfinite(p["x"])]
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
                if p.get("margin") is not None and plottable(p, SPEEDUP_RANGE, ("margin",))
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
        series_points(sweep, "speedups" if speedups else "times"), SPEEDUP_RANGE if speedups else TIME_RANGE, dropped
    )
    deltas: dict[str, list[dict[str, Any]]] = {}
    for label, points in series_points(sweep, "deltas").items():
        good = [
            p
            for p in points
            if plottable(
                {"low": p["gate"]["delta_low"], "value": p["gate"]["delta"], "high": p["gate"]["delta_high"]},
                DELTA_RANGE,
            )
        ]
        dropped[0] += len(points) - len(good)
        if good:
            deltas[_plain(label, 60)] = good
    fractions: dict[str, list[dict[str, Any]]] = {}
    for label, points in series_points(sweep, "fractions").items():
        good = [p for p in points if plottable(p, FRACTION_RANGE, ("value",))]
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
    require_matplotlib()
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
            if r.get("margin") is not None and not plottable(r, SPEEDUP_RANGE, ("margin",)):
                r["margin"] = None
        kept = [r for r in rows if plottable(r, span, keys)]
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
