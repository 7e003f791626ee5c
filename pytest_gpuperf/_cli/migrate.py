"""``gpuperf migrate PATH... [--dry-run]``: files of an older schema version rewritten, in place,
as the current one (``_store.migrate``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_gpuperf._store.migrate import MigrationOutcome, files_under, migrate_file

if TYPE_CHECKING:
    from pytest_gpuperf._cli.arguments import Subparsers


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "migrate",
        help="rewrite report, baseline and budget files of an older schema version as the current one, in place",
        description="Rewrite each named file, and every .json/.json.gz file under each named folder, that holds an "
        "older schema version of a pytest-gpuperf report, baseline or budget file as the current version, in place "
        "and atomically (the new file is read back before it replaces the old). Current files are left untouched; "
        "a newer version than this pytest-gpuperf writes, or an unreadable file, is an error (exit 1). "
        "Files of other tools are skipped. docs/schemas.md lists the versions read.",
    )
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--dry-run", action="store_true", help="say what would be migrated and change nothing")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    outcomes = [migrate_file(path, dry_run=args.dry_run) for path in files_under([Path(p) for p in args.paths])]
    for outcome in outcomes:
        print(outcome_line(outcome, args.dry_run))
    errors = sum(1 for o in outcomes if o.error)
    moved = sum(1 for o in outcomes if o.migrated)
    current = sum(1 for o in outcomes if o.kind and not o.migrated and not o.error)
    verb = "would be migrated" if args.dry_run else "migrated"
    print(
        f"{moved} file(s) {verb}, {current} already current, {errors} error(s)"
        + (" (dry run: nothing changed)" if args.dry_run else "")
    )
    return 1 if errors or not outcomes else 0


def outcome_line(outcome: MigrationOutcome, dry_run: bool) -> str:
    if outcome.error:
        return f"ERROR {outcome.error}"
    if outcome.kind is None:
        return f"skipped {outcome.path}: not a pytest-gpuperf file"
    if outcome.migrated:
        verb = "would migrate" if dry_run else "migrated"
        return f"{verb} {outcome.path}: {outcome.kind} version {outcome.old} -> {outcome.new}"
    return f"current {outcome.path}: {outcome.kind} version {outcome.new}"
