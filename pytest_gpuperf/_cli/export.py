"""``gpuperf export --format FORMAT FILE [-o OUT]``: a saved report in another tool's format
(``_report.export``)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_gpuperf._cli.arguments import CommandLineError
from pytest_gpuperf._report.export import FORMATS, export
from pytest_gpuperf._store.files import atomic_write_text
from pytest_gpuperf._store.reports import load_report
from pytest_gpuperf.errors import GpuPerfError

if TYPE_CHECKING:
    from pytest_gpuperf._cli.arguments import Subparsers


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "export",
        help="convert a saved report for another tool (github-action-benchmark's customSmallerIsBetter JSON)",
        description="Write a saved --gpu-perf-json report in another tool's format. github-action-benchmark: one "
        "customSmallerIsBetter entry per measured variant (median in microseconds, the interval as range, GPU and "
        "verdict in extra); docs/ci-results.md shows the trend workflow that reads it.",
    )
    p.add_argument("file", metavar="FILE")
    p.add_argument("--format", required=True, choices=FORMATS)
    p.add_argument("-o", "--output", metavar="OUT", help="file to write (default: standard output)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    output = None if args.output in (None, "-") else Path(args.output)
    if output is not None and (args.output.endswith(("/", os.sep)) or output.is_dir()):
        raise CommandLineError(
            f"-o {args.output} names a folder; give the file to write, e.g. -o {output / 'bench.json'}"
        )
    text = export(load_report(Path(args.file)), args.format)
    if output is None:
        sys.stdout.write(text)
        return 0
    try:
        atomic_write_text(output, text)
    except (FileExistsError, NotADirectoryError):  # a file where a folder of the path should be
        raise GpuPerfError(f"cannot write {output}: a part of its folder, {output.parent}, is a file") from None
    except OSError as exc:
        raise GpuPerfError(f"cannot write {output}: {exc.strerror or exc}") from None
    return 0
