"""``gpuperf plots REPORT OUT_DIR``: charts of a saved report (``.json.gz`` too), one PNG per
kernel family and an ``index.html`` (``_report.plots``); prints the paths written."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_gpuperf._report.plots import PlotsUnavailable, write_plots
from pytest_gpuperf._store.reports import load_report
from pytest_gpuperf.errors import GpuPerfError

if TYPE_CHECKING:
    from pytest_gpuperf._cli.arguments import Subparsers


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "plots",
        help="draw a saved --gpu-perf-json report: one PNG per kernel family and an index.html (needs matplotlib)",
        description="Charts of a saved --gpu-perf-json report (.json or .json.gz), as --gpu-perf-plots draws them "
        "at the end of a run: one PNG per kernel family and an index.html that links them. Prints each path written.",
    )
    p.add_argument("report", metavar="REPORT")
    p.add_argument("out_dir", metavar="OUT_DIR")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    report = load_report(Path(args.report))
    try:
        paths = write_plots(report, Path(args.out_dir))
    except PlotsUnavailable as exc:
        raise GpuPerfError(str(exc)) from None
    for path in paths:
        print(path)
    return 0
