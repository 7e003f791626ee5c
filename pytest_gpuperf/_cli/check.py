"""``gpuperf check [DIR]``: every file under a folder validated as the kind its schema names
(``_store.check``); one line per problem, exit status 1 when there is any."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_gpuperf._store.check import CheckResult, check_folder
from pytest_gpuperf._store.layout import DEFAULT_DIR

if TYPE_CHECKING:
    from pytest_gpuperf._cli.arguments import Subparsers


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "check",
        help="validate every baseline, budget and report file under a folder; exit 1 on any problem",
        description="Validate every file under DIR (any depth) as the kind its schema names: timing baselines, the "
        "compile-time tier's budgets, saved reports. Misplaced files (which the plugin would never read), device keys "
        "that differ from their folder, links and files that are not pytest-gpuperf JSON are problems too. One line "
        "per problem; exit status 1 when there is any.",
    )
    p.add_argument(
        "dir", nargs="?", default=DEFAULT_DIR, metavar="DIR", help=f"folder to check (default: {DEFAULT_DIR})"
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    root = Path(args.dir)
    result = check_folder(root)
    for note in result.notes:
        print(f"NOTE {note}")
    for problem in result.problems:
        print(f"ERROR {problem}")
    print(summary_line(result, root))
    return 1 if result.problems else 0


def summary_line(result: CheckResult, root: Path) -> str:
    counts = ", ".join(f"{kind}: {n}" for kind, n in sorted(result.kinds.items())) or "none of ours"
    verdict = f"{len(result.problems)} problem(s)" if result.problems else "all valid"
    return f"{root}: {result.files} file(s) checked ({counts}): {verdict}"
