"""``gpuperf``'s entry point: the parser, assembled from one module per subcommand, and ``main``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from pytest_gpuperf._cli import (
    bisect,
    check,
    diff,
    export,
    history,
    levels,
    listing,
    margins,
    migrate,
    plan,
    plots,
    prune,
    report,
)
from pytest_gpuperf._cli.arguments import CommandLineError
from pytest_gpuperf.errors import GpuPerfError

PROG = "gpuperf"
# In --help's order.
SUBCOMMANDS = (listing, check, diff, prune, report, export, plots, migrate, margins, levels, plan, bisect, history)

__all__ = ["main", "build_parser", "version"]


def version() -> str:
    """The installed distribution's version, or the package's own when it is not installed."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("pytest-gpuperf")
    except PackageNotFoundError:
        from pytest_gpuperf._version import __version__

        return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Inspect and maintain pytest-gpuperf baselines and reports."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in SUBCOMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except CommandLineError as exc:
        parser.error(str(exc))
    except GpuPerfError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    return 0  # unreachable: parser.error exits


if __name__ == "__main__":
    raise SystemExit(main())
