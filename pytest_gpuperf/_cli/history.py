"""``gpuperf history``: keep every run's results in an SQLite file (``ingest``), show a series
(``show``) and the change points of all of them (``changes``); docs/history.md."""

from __future__ import annotations

import argparse
import fnmatch
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_gpuperf._history.database import HISTORY_ENV, HistoryError, default_path, open_database

if TYPE_CHECKING:
    from pytest_gpuperf._cli.arguments import Subparsers
    from pytest_gpuperf._history.changes import Method
    from pytest_gpuperf._history.findings import Change

INSTALL_HINT = "pip install 'pytest-gpuperf[history]'"
SLOWER_CODE = "slower-code"


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "history",
        help="keep results of every run in an SQLite history; show a series; find its change points",
        description="A history of runs in one SQLite file: ingest saved reports (idempotent), show one test's "
        "series per GPU model, and find change points, each labelled code or environment (docs/history.md).",
    )
    p.add_argument(
        "--db",
        type=Path,
        default=None,
        metavar="PATH",
        help=f"the history database (default: ${HISTORY_ENV}, else .gpuperf/history.sqlite)",
    )
    commands = p.add_subparsers(dest="history_command", required=True, metavar="COMMAND")

    ingest = commands.add_parser(
        "ingest",
        help="add saved reports to the history; a report already in it is left alone",
        description="Add each report (.json or .json.gz) to the history, or every report in a folder at any depth "
        "(a downloaded CI artifact). A run is known by the digest of its report's content: the same report again, "
        "under any name, gzipped or not, is left alone and said so. All reports are checked before any is written, "
        "and written in one transaction.",
    )
    ingest.add_argument("reports", nargs="+", type=Path, metavar="REPORT", help="a report file or a folder of them")
    ingest.set_defaults(run=run_ingest)

    show = commands.add_parser(
        "show",
        help="one test's series per GPU model: a table of its runs, optionally a plot",
        description="One row per run of each series of TEST (every variant) or TEST::VARIANT (a glob with * or ? "
        "selects keys), per GPU model: date, commit (* when the working tree was dirty), GPU, value with its interval, "
        "verdict; a line marks each change point.",
    )
    show.add_argument("test", metavar="TEST[::VARIANT]", help="the test or test::variant")
    show.add_argument("--gpu", metavar="KEY", help="only this GPU model (its device key)")
    show.add_argument("--branch", metavar="NAME", help="only runs of this branch")
    show.add_argument("--last", type=_positive, metavar="N", help="only the newest N runs")
    show.add_argument("--plot", type=Path, metavar="FILE", help="also draw the series to FILE (.png or .svg)")
    _method_arguments(show)
    show.set_defaults(run=run_show)

    changes = commands.add_parser(
        "changes",
        help="change points of every series, labelled code or environment; exit 1 on --fail-on",
        description="The change points of every series, each with its size (after/before) and interval, labelled "
        "environment when the GPU model, driver, CUDA or CuPy version changed around it, else code with its commit "
        f"range. With --fail-on {SLOWER_CODE}, exit 1 when a change shown is a slowdown labelled code.",
    )
    changes.add_argument("--series", action="append", metavar="GLOB", help="only keys (test::variant) that match")
    changes.add_argument("--gpu", metavar="KEY", help="only this GPU model (its device key)")
    changes.add_argument("--branch", metavar="NAME", help="only runs of this branch")
    changes.add_argument("--since", metavar="DATE|COMMIT", help="only changes at or after this date or commit")
    changes.add_argument(
        "--new", action="store_true", help="only the changes the last ingested run brought (for CI after ingest)"
    )
    changes.add_argument("--format", choices=("text", "markdown", "json"), default="text", help="output format")
    changes.add_argument(
        "--fail-on", choices=(SLOWER_CODE,), metavar="WHAT", help=f"exit 1 when a change shown is {SLOWER_CODE}"
    )
    _method_arguments(changes)
    changes.set_defaults(run=run_changes)
    p.set_defaults(run=run_ingest)


def _method_arguments(p: argparse.ArgumentParser) -> None:
    from pytest_gpuperf._history.findings import DEFAULT_WINDOW

    p.add_argument(
        "--confidence", type=_fraction, default=0.99, metavar="P", help="of the test and intervals (default: 0.99)"
    )
    p.add_argument(
        "--min-change",
        type=_fraction,
        default=0.01,
        metavar="FRACTION",
        help="report a change only when its interval lies wholly beyond this size (default: 0.01)",
    )
    p.add_argument(
        "--window",
        type=_non_negative,
        default=DEFAULT_WINDOW,
        metavar="N",
        help=f"analyse each series' newest N points; 0: all (default: {DEFAULT_WINDOW})",
    )


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def _method(args: argparse.Namespace) -> Method:
    from pytest_gpuperf._history.changes import Method

    return Method(confidence=args.confidence, min_change=args.min_change)


def _db_path(args: argparse.Namespace) -> Path:
    return Path(args.db) if args.db is not None else default_path()


def run_ingest(args: argparse.Namespace) -> int:
    from pytest_gpuperf._history.ingest import describe, ingest

    db = open_database(_db_path(args), create=True)
    try:
        results, passed = ingest(db, args.reports)
    finally:
        db.close()
    for line in passed:
        print(line)
    for item in results:
        print(describe(item))
    added = sum(item.added for item in results)
    print(f"{added} run(s) added, {len(results) - added} already in {_db_path(args)}")
    return 0


def _changes(series: list, method: Method, window: int) -> list[Change]:  # type: ignore[type-arg]
    from pytest_gpuperf._history.changes import MissingLibrary
    from pytest_gpuperf._history.findings import changes_of

    try:
        return [c for s in series for c in changes_of(s, method, window)]
    except MissingLibrary:
        raise HistoryError(f"change points need the ruptures package: {INSTALL_HINT}") from None


def run_show(args: argparse.Namespace) -> int:
    from pytest_gpuperf._history.render import series_table
    from pytest_gpuperf._history.series import all_keys, load_series, matches_test

    path = _db_path(args)
    db = open_database(path)
    try:
        keys = [k for k in all_keys(db) if matches_test(k, args.test)]
        series = load_series(db, keys=keys, device=args.gpu, branch=args.branch)
    finally:
        db.close()
    if not series:
        raise HistoryError(
            f"no series of {args.test!r} in {path}"
            + (f" on {args.gpu}" if args.gpu else "")
            + "; gpuperf history changes lists every series that has change points"
        )
    method = _method(args)
    drawn = [(s, _changes([s], method, args.window)) for s in series]
    sys.stdout.write("\n".join(series_table(s, changes, args.last) for s, changes in drawn))
    if args.plot:
        from pytest_gpuperf._history.plot import draw

        if args.plot.suffix.lower() not in (".png", ".svg"):
            raise HistoryError(f"--plot {args.plot}: name a .png or .svg file")
        try:
            draw(args.plot, drawn, args.last)
        except ImportError:
            raise HistoryError("--plot needs matplotlib: pip install 'pytest-gpuperf[plots]'") from None
        print(f"plot written to {args.plot}")
    return 0


def _since(db: object, since: str) -> str:
    """The earliest ``created`` a change shown may have: the date, or the first run of the commit."""
    import sqlite3

    assert isinstance(db, sqlite3.Connection)
    try:
        when = datetime.fromisoformat(since.replace("Z", "+00:00"))
    except ValueError:
        row = db.execute("SELECT min(created) FROM runs WHERE commit_sha LIKE ? || '%'", (since.lower(),)).fetchone()
        if row is None or row[0] is None:
            raise HistoryError(
                f"--since {since}: neither an ISO date (2026-11-25) nor the commit of a run in the history"
            ) from None
        return str(row[0])
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).isoformat(timespec="seconds")


def run_changes(args: argparse.Namespace) -> int:
    from pytest_gpuperf._history.changes import MissingLibrary
    from pytest_gpuperf._history.findings import new_changes, newest_run
    from pytest_gpuperf._history.labels import CODE
    from pytest_gpuperf._history.render import changes_json, changes_markdown, changes_text
    from pytest_gpuperf._history.series import load_series

    db = open_database(_db_path(args))
    try:
        series = load_series(db, device=args.gpu, branch=args.branch)
        if args.series:
            series = [s for s in series if any(fnmatch.fnmatchcase(s.key, g) for g in args.series)]
        since = _since(db, args.since) if args.since else None
        newest = newest_run(db)
    finally:
        db.close()
    method = _method(args)
    if args.new:
        try:
            found = new_changes(series, newest, method, args.window) if newest is not None else []
        except MissingLibrary:
            raise HistoryError(f"change points need the ruptures package: {INSTALL_HINT}") from None
    else:
        found = _changes(series, method, args.window)
    if since:
        found = [c for c in found if c.after.created >= since]
    render = {"text": changes_text, "markdown": changes_markdown, "json": changes_json}[args.format]
    sys.stdout.write(render(found, method, len(series)))
    if args.fail_on == SLOWER_CODE and any(c.slower and c.label.kind == CODE for c in found):
        return 1
    return 0
