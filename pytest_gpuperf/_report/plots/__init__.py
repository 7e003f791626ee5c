"""Charts of a JSON report: one PNG per kernel family and an ``index.html`` that links them.

``write_plots(report, out_dir)`` takes the dict ``summary.build_json`` makes (or a committed
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

The work is in three modules: ``shape`` (the report's results as rows, sweeps and labels),
``draw`` (matplotlib, imported only there) and ``page`` (``index.html``, a verdict table per
family beside its chart).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_gpuperf._report.plots.draw import PlotsUnavailable, plot_family, require_matplotlib
from pytest_gpuperf._report.plots.page import write_index
from pytest_gpuperf._report.plots.shape import group_by_family, slug

__all__ = ["PlotsUnavailable", "write_plots"]


def write_plots(report: Mapping[str, Any], out_dir: str | Path) -> list[Path]:
    """One PNG per family with results, then ``index.html``; returns the paths written (index last).

    Raises PlotsUnavailable when matplotlib is missing (nothing is written then).
    """
    require_matplotlib()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    families = group_by_family(report)
    devices = list((report.get("devices") or {}).values())
    subtitle = devices[0].get("name", "") if len(devices) == 1 else (f"{len(devices)} GPUs" if devices else "")
    images: dict[str, Path] = {}
    for family, tests in families.items():
        n = len(tests)
        written = plot_family(
            family, tests, out / f"{slug(family)}.png", subtitle=f"{subtitle}, {n} test{'s' * (n != 1)}".lstrip(", ")
        )
        if written is not None:
            images[family] = written
    index = write_index(report, families, images, out)
    return [*images.values(), index]
