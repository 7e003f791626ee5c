"""``gpuperf report FILE``: a saved ``--gpu-perf-json`` report as markdown (the default), aligned
text, or GitHub Actions workflow commands (``_report.render``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_gpuperf._report.render import cut, format_annotations, format_report
from pytest_gpuperf._store.reports import load_report

if TYPE_CHECKING:
    from pytest_gpuperf._cli.arguments import Subparsers


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser("report", help="render a saved --gpu-perf-json report (markdown by default)")
    p.add_argument("file", metavar="FILE")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--markdown", action="store_true", help="GitHub-flavoured markdown (the default)")
    fmt.add_argument("--text", action="store_true", help="aligned plain text, like the terminal summary")
    fmt.add_argument(
        "--annotations",
        action="store_true",
        help="GitHub Actions workflow commands: a warning for each inconclusive result (an error where it failed "
        "its test), a notice for regression checks blind to their tolerance",
    )
    p.add_argument(
        "--failures-first",
        action="store_true",
        help="list failed gates first, then undecided ones, then the rest (for a pull request comment)",
    )
    p.add_argument(
        "--max-chars",
        type=_positive_chars,
        metavar="N",
        help="cut the output after a whole line within N characters, saying how much was left out",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.annotations:
        sys.stdout.write(format_annotations(load_report(Path(args.file))))
        return 0
    text = format_report(load_report(Path(args.file)), markdown=not args.text, failures_first=args.failures_first)
    sys.stdout.write(cut(text, args.max_chars, "the workflow run's artifacts") if args.max_chars else text)
    return 0


def _positive_chars(text: str) -> int:
    value = int(text)
    if value < 200:
        raise argparse.ArgumentTypeError(f"must be at least 200 characters, got {value}")
    return value
