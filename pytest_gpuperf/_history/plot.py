"""``gpuperf history show --plot``: each series' values and intervals over its runs, one panel
per series, change points as vertical lines (drawn with matplotlib, imported here only)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pytest_gpuperf._history.findings import Change
from pytest_gpuperf._history.series import TIME_BASIS, Series

__all__ = ["draw"]


def draw(path: Path, drawn: Sequence[tuple[Series, Sequence[Change]]], last: int | None = None) -> None:
    """Write the figure to ``path`` (its suffix, .png or .svg, picks the format)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(drawn), 1, figsize=(10, 2.8 * len(drawn)), squeeze=False)
    for ax, (series, changes) in zip(axes[:, 0], drawn, strict=True):
        points = series.usable[-last:] if last else series.usable
        scale = 1e6 if series.basis == TIME_BASIS else 1.0
        xs = list(range(len(points)))
        ys = [(p.value or 0.0) * scale for p in points]
        lows = [y - (p.low or p.value or 0.0) * scale for y, p in zip(ys, points, strict=True)]
        highs = [(p.high or p.value or 0.0) * scale - y for y, p in zip(ys, points, strict=True)]
        ax.errorbar(xs, ys, yerr=[lows, highs], fmt="o", markersize=3, capsize=2, color="tab:blue")
        at = {p.run_id: i for i, p in enumerate(points)}
        for c in changes:
            if c.after.run_id in at:
                color = "tab:red" if c.label.kind == "code" else "tab:orange"
                ax.axvline(at[c.after.run_id] - 0.5, color=color, linestyle="--", linewidth=1)
        ticks = xs[:: max(1, len(xs) // 8)]
        ax.set_xticks(ticks)
        ax.set_xticklabels([f"{points[i].created[:10]}\n{(points[i].commit or '-')[:7]}" for i in ticks], fontsize=7)
        ax.set_ylabel("us" if series.basis == TIME_BASIS else f"x {series.basis}", fontsize=8)
        ax.set_title(f"{series.key} on {series.device_key}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
