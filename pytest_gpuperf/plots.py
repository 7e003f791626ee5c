"""Charts of a JSON report: one PNG per kernel family and an ``index.html`` that links them.

``write_plots(report, out_dir)`` takes the dict ``report.build_json`` makes (or a committed
``--gpu-perf-json`` file, loaded) and draws, per family (tests grouped by the folder under
``tests/``: ``tests/qkv/test_perf.py`` -> ``qkv``), up to three panels:

1. every measured variant's median with its confidence interval (log axis when the times
   span more than 20x), labelled with the median;
2. every comparison's speedup t(baseline) / t(fast) with its bootstrap interval, the
   required margin as a red bar, and the colour of its verdict (log axis when wide);
3. every recorded figure whose key contains ``fraction`` (share of copy bandwidth or of a
   roofline) as a bar against 1.0.

``index.html`` has a verdict table per family and links the images by relative path, so the
folder is self-contained (copy or upload it whole). matplotlib is imported only here and
drawn through its Agg canvas, without pyplot, so the user's backend is left alone.
"""
from __future__ import annotations

import html
import math
import re
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Mapping, Sequence

from pytest_gpuperf.report import fmt_time

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
}
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
    for parts in zip(*(reversed(p) for p in split)):
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


def _plottable(row: Mapping[str, Any], span: tuple[float, float], keys: Sequence[str] = ("low", "value", "high")) -> bool:
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


def measurement_rows(tests: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per measured variant; the variant is named unless the test id already says it."""
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


# -- drawing ------------------------------------------------------------------------------
def _matplotlib() -> Any:
    try:
        import matplotlib  # noqa: F401
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401
        from matplotlib.figure import Figure  # noqa: F401
    except ImportError as exc:
        raise PlotsUnavailable(f"matplotlib is not installed ({exc}); install it (pip install matplotlib) to draw the charts") from None
    import matplotlib

    return matplotlib


def _span(values: Sequence[float]) -> float:
    positive = [v for v in values if v > 0]
    return max(positive) / min(positive) if positive else 1.0


# An interval wider than this factor around its own point is drawn clipped (with an arrow and
# its end written out), so one runaway interval does not squash every other row.
CLIP_FACTOR = 3.0


def _axis_range(rows: Sequence[Mapping[str, Any]], extra: Sequence[float], log: bool) -> tuple[float, float]:
    lows = [max(r["low"], r["value"] / CLIP_FACTOR) if log else max(r["low"], r["value"] - (CLIP_FACTOR - 1) * r["value"]) for r in rows]
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
    ax.legend(handles=handles, fontsize=7, loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=len(handles), frameon=False,
              borderaxespad=0.2, handletextpad=0.3, columnspacing=1.0)


def _draw_intervals(
    ax: Any, rows: Sequence[Mapping[str, Any]], *, log: bool, lo: float, hi: float, marker: str, text: Any
) -> None:
    """Points with interval bars, clipped to [lo, hi] with an arrow where an interval runs past."""
    for y, r in enumerate(rows):
        colour = VERDICT_COLOURS.get(r["verdict"], OTHER_COLOUR)
        left, right = max(r["low"], lo), min(r["high"], hi)
        ax.errorbar(r["value"], y, xerr=[[r["value"] - left], [right - r["value"]]], fmt=marker, ms=4.5, color=colour,
                    ecolor=colour, elinewidth=1.3, capsize=3, zorder=3)
        if r["high"] > hi:
            ax.plot([hi], [y], marker=">", ms=6, color=colour, zorder=3)
        if r["low"] < lo:
            ax.plot([lo], [y], marker="<", ms=6, color=colour, zorder=3)
        ax.annotate(text(r), (max(right, r.get("margin") or 0), y), xytext=(7, 0), textcoords="offset points",
                    va="center", fontsize=7, color="#333333", zorder=4)


def _clipped_note(r: Mapping[str, Any], lo: float, hi: float, fmt: Any) -> str:
    ends = ([f"from {fmt(r['low'])}"] if r["low"] < lo else []) + ([f"to {fmt(r['high'])}"] if r["high"] > hi else [])
    return f" (interval {' '.join(ends)})" if ends else ""


def _draw_times(ax: Any, rows: list[dict[str, Any]], confidence: str) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.ticker import EngFormatter

    log = _span([r["value"] for r in rows]) > LOG_SPAN_TIMES
    lo, hi = _axis_range(rows, (), log)
    t = lambda v: fmt_time(v).replace("us", "\u00b5s")  # noqa: E731
    _draw_intervals(
        ax, rows, log=log, lo=lo, hi=hi, marker="o",
        text=lambda r: t(r["value"]) + _clipped_note(r, lo, hi, t) + (" THROTTLED" if r["throttled"] else ""),
    )
    if log:
        ax.set_xscale("log")
        ax.set_xlim(lo / 1.4, hi * 5.0)
    else:
        ax.set_xlim(0, hi * 1.45)
    ax.xaxis.set_major_formatter(EngFormatter(unit="s", places=None))
    _style_rows(ax, [r["label"] for r in rows])
    ax.set_title("Median GPU time per launch", fontsize=10, loc="left", fontweight="bold")
    ax.set_xlabel(
        f"time per launch ({'log' if log else 'linear'} scale); bars: {confidence} interval of the median, often hidden by "
        "the dot;\nan arrow marks an interval cut at the edge of the axis (its end is written beside the value)",
        fontsize=8,
    )
    present = sorted({r["verdict"] for r in rows})[:8]
    _legend_above(ax, [Line2D([], [], marker="o", ms=5, linestyle="none", color=VERDICT_COLOURS.get(v, OTHER_COLOUR),
                              label=_plain(f"baseline check: {v}", 40)) for v in present])


def _draw_speedups(ax: Any, rows: list[dict[str, Any]]) -> None:
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter

    margins = [r["margin"] for r in rows if r["margin"] is not None]
    log = _span([r["value"] for r in rows] + margins + [1.0]) > LOG_SPAN_SPEEDUP
    lo, hi = _axis_range(rows, [*margins, 1.0], log)
    x = lambda v: f"{v:.3g}x"  # noqa: E731
    _draw_intervals(
        ax, rows, log=log, lo=lo, hi=hi, marker="D",
        text=lambda r: x(r["value"]) + (f" (need \u2265{r['margin']:.3g}x)" if r["margin"] is not None else "")
        + _clipped_note(r, lo, hi, x),
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
    handles = [Line2D([], [], marker="D", ms=5, linestyle="none", color=VERDICT_COLOURS.get(v, OTHER_COLOUR),
                      label=_plain(v, 40)) for v in present]
    if margins:
        handles.append(Line2D([], [], marker="|", ms=10, mew=2, linestyle="none", color="#c62828", label="required margin"))
    handles.append(Line2D([], [], linestyle="--", color="#888888", label="1x"))
    _legend_above(ax, handles)


def _draw_fractions(ax: Any, rows: list[dict[str, Any]], key: str | None) -> None:
    from matplotlib.ticker import PercentFormatter

    ys = list(range(len(rows)))
    values = [r["value"] for r in rows]
    ax.barh(ys, values, height=0.6, color="#5c8fc4", zorder=2)
    ax.axvline(1.0, color="#c62828", linestyle="--", linewidth=1.0, zorder=3)
    for y, v in zip(ys, values):
        ax.annotate(f"{100 * v:.1f}%", (v, y), xytext=(4, 0), textcoords="offset points", va="center", fontsize=7, color="#333333")
    ax.set_xlim(0, max(1.12, max(values) * 1.15))
    ax.xaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))
    _style_rows(ax, [r["label"] for r in rows])
    ax.set_title(_plain(f"Recorded {key}" if key else "Recorded fractions", 120), fontsize=10, loc="left", fontweight="bold")
    ax.set_xlabel("share of the measured copy bandwidth or of the roofline the test recorded; dashed line: 100%", fontsize=8)


def plot_family(family: str, tests: Sequence[Mapping[str, Any]], path: Path, *, subtitle: str = "") -> Path | None:
    """Draw ``family``'s chart to ``path``; None (nothing written) when it has nothing to plot."""
    _matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fractions, fraction_key = fraction_rows(tests)
    panels: list[tuple[str, list[dict[str, Any]]]] = []
    left_out: list[str] = []
    for kind, rows, span, keys in (
        ("times", measurement_rows(tests), TIME_RANGE, ("low", "value", "high")),
        ("speedups", comparison_rows(tests), SPEEDUP_RANGE, ("low", "value", "high")),
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
    for r in (r for _, rows in panels for r in rows):
        r["label"] = _plain(r["label"])
    heights = [PANEL_IN + ROW_IN * len(rows) for _, rows in panels]
    fig = Figure(figsize=(WIDTH_IN, sum(heights) + 0.6), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(panels), 1, gridspec_kw={"height_ratios": heights}, squeeze=False)[:, 0]
    confidence = _confidence_label(tests)
    for ax, (kind, rows) in zip(axes, panels):
        if kind == "times":
            _draw_times(ax, rows, confidence)
        elif kind == "speedups":
            _draw_speedups(ax, rows)
        else:
            _draw_fractions(ax, rows, fraction_key)
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
        image.convert("RGB").quantize(colors=256, method=Image.Quantize.FASTOCTREE).save(path, format="PNG", optimize=True)


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
                f"<td>speedup {_e(c['fast'])} vs {_e(c['baseline'])}</td><td>{c['speedup']:.4g}x</td>"
                f"<td>[{c['ci_low']:.4g}, {c['ci_high']:.4g}]</td><td>{need}</td>" + _verdict_cell(str(c.get("verdict", "")))
            )
        for m in t.get("measurements", []):
            s = m["measurement"]
            reg = m.get("regression")
            delta = f"{100 * (reg['slowdown'] - 1):+.1f}% vs baseline" if reg else ("no baseline" if m.get("note") else "-")
            entries.append(
                f"<td>median {_e(s['name'])}</td><td>{_e(fmt_time(s['median_s']))}</td>"
                f"<td>[{_e(fmt_time(s['ci_low_s']))}, {_e(fmt_time(s['ci_high_s']))}]</td><td>{_e(delta)}</td>"
                + _verdict_cell(str(m.get("verdict", "")))
            )
        for f in t.get("figures", []):
            value = f["value"]
            if value is None:
                shown = "-"
            else:
                shown = f"{100 * value:.1f}%" if "fraction" in f["key"] else f"{value:.4g} {f.get('unit') or ''}".strip()
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


def write_index(report: Mapping[str, Any], families: Mapping[str, Sequence[Mapping[str, Any]]], images: Mapping[str, Path], out_dir: Path) -> Path:
    devices = report.get("devices") or {}
    device_text = "; ".join(
        f"{d.get('name', key)} (driver {d.get('driver_version', '?')}, CUDA {d.get('cuda_runtime_version', '?')})"
        for key, d in devices.items()
    ) or "no device recorded"
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
        "<ul>" + "".join(f'<li><a href="#{_e(_slug(f))}">{_e(f)}</a> ({len(ts)} tests)</li>' for f, ts in families.items()) + "</ul>",
    ]
    for family, tests in families.items():
        parts.append(f'<h2 id="{_e(_slug(family))}">{_e(family)}</h2>')
        if family in images:
            parts.append(f'<p><a href="{_e(images[family].name)}"><img src="{_e(images[family].name)}" alt="{_e(family)} chart"></a></p>')
        parts.append(_family_table(tests))
    skipped = report.get("skipped") or []
    if skipped:
        parts.append("<h2>Skipped GPU parts</h2><ul>" + "".join(f"<li>{s['count']} &times; {_e(s['reason'])}</li>" for s in skipped) + "</ul>")
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
        written = plot_family(family, tests, out / f"{_slug(family)}.png", subtitle=f"{subtitle}, {n} test{'s' * (n != 1)}".lstrip(", "))
        if written is not None:
            images[family] = written
    index = write_index(report, families, images, out)
    return [*images.values(), index]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m pytest_gpuperf.plots REPORT.json OUT_DIR``: charts of a saved JSON report (``.json.gz`` too)."""
    import argparse
    import sys

    from pytest_gpuperf.report_file import ReportFileError, load_report

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
