"""``gpuperf prune``: remove stored entries whose tests no longer exist (``_store.prune`` decides
which), with the node ids collected from the suite or read from a file."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_gpuperf._cli.arguments import CommandLineError
from pytest_gpuperf._store.baselines import BaselineStore
from pytest_gpuperf._store.layout import DEFAULT_DIR, load_folder
from pytest_gpuperf._store.prune import Plan, plan_prune
from pytest_gpuperf.errors import BaselineFileError, GpuPerfError

if TYPE_CHECKING:
    from pytest_gpuperf._cli.arguments import Subparsers


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "prune",
        help="remove entries whose tests no longer exist",
        description="Remove baseline entries whose test node id is no longer collected. Node ids come from "
        "'pytest --collect-only -q' run in the current folder (the project root), or from --node-ids. With "
        "--keep-tests-from PATH (repeat it for more paths), only the files of modules collected from those paths "
        "are pruned. Entries whose test is collected are never removed. A file whose module had no test collected "
        "(a deleted module, but also one skipped at import or failing to collect, or a run from the wrong folder) is "
        "kept, with a line naming it, unless --remove-uncollected is given; when no file's module was collected, "
        "prune stops with an error and removes nothing.",
    )
    p.add_argument(
        "dir", nargs="?", default=DEFAULT_DIR, metavar="DIR", help=f"baseline folder (default: {DEFAULT_DIR})"
    )
    p.add_argument("--dry-run", action="store_true", help="print what would be removed and change nothing")
    # One path per flag: a list-taking flag would swallow the baseline folder after it.
    p.add_argument(
        "--keep-tests-from",
        action="append",
        metavar="PATH",
        default=None,
        help="a test path to collect; repeat for more (default: the whole suite)",
    )
    p.add_argument(
        "--node-ids", metavar="FILE", help="a file of node ids, one a line ('-': standard input), instead of collecting"
    )
    p.add_argument(
        "--remove-uncollected",
        action="store_true",
        help="also remove the entries of files whose module had no test collected (deleted test modules); "
        "check the kept lines of a run without it first",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    root = Path(args.dir)
    files = load_folder(root)
    if not files:
        raise BaselineFileError(f"{root} holds no baseline files (<device key>/<module>.json); nothing was pruned")
    if args.node_ids is not None:
        if args.keep_tests_from:
            raise CommandLineError("prune takes --node-ids or --keep-tests-from, not both")
        ids, whole = read_node_ids(args.node_ids), True
    else:
        if args.keep_tests_from and args.remove_uncollected:
            raise CommandLineError(
                "--remove-uncollected needs the whole suite collected: with --keep-tests-from, every other module "
                "counts as not collected"
            )
        ids, whole = collect_node_ids(args.keep_tests_from or []), not args.keep_tests_from
    plan = plan_prune(files, ids, whole_suite=whole, remove_uncollected=args.remove_uncollected)
    for line in kept_lines(plan):
        print(line)
    store = BaselineStore(root)
    verb = "would remove" if args.dry_run else "removed"
    count = 0
    for name, keys in plan.stale.items():
        removed = keys if args.dry_run else store.remove_entries(root / name, keys)
        for key in removed:
            print(f"{verb} {name} :: {key}")
        if removed and len(removed) == len(files[name].entries):
            print(f"{verb} {name} (no entries left)")
        count += len(removed)
    done = "would be removed" if args.dry_run else "removed"
    everything = count and count == sum(len(f.entries) for f in files.values())
    print(
        f"{count} stale entr{'y' if count == 1 else 'ies'} {done} from {len(plan.stale)} file(s) under {root}"
        + (": every entry there" if everything else "")
        + (" (dry run: nothing changed)" if args.dry_run else "")
    )
    return 0


def kept_lines(plan: Plan) -> list[str]:
    """One line per file left alone because no test of its module was collected."""
    return [
        f"kept {name}: no test of its module was collected (deleted or renamed, skipped at import, or failing to "
        f"collect); pass --remove-uncollected to remove its {n} entr{'y' if n == 1 else 'ies'}"
        for name, n in plan.uncollected.items()
    ]


def collect_node_ids(paths: Sequence[str]) -> list[str]:
    """Test node ids as ``pytest --collect-only -q`` lists them (run in the current folder)."""
    cmd = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *paths]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise GpuPerfError(
            f"collecting the tests failed ({' '.join(cmd[1:])} exited {proc.returncode}); nothing was pruned:\n{tail}"
        )
    ids: list[str] = []
    for line in proc.stdout.splitlines():
        if not line.strip():
            break  # the node ids come first, then a blank line and the summary
        if "::" in line:
            ids.append(line.strip())
    if not ids:
        raise GpuPerfError(
            "pytest listed no test node ids (is -q in addopts, making the listing per file?); nothing was pruned. "
            "Pass the ids with --node-ids FILE instead."
        )
    return ids


def read_node_ids(source: str) -> list[str]:
    """Node ids from a file (``-``: standard input), one a line; comments and summaries skipped."""
    try:
        data = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
        text = data.decode("utf-8")
    except OSError as exc:
        raise GpuPerfError(f"cannot read the node id file {source}: {exc}") from None
    except UnicodeDecodeError:
        raise GpuPerfError(f"the node id file {source} is not UTF-8 text; nothing was pruned") from None
    ids = [line.strip() for line in text.splitlines() if "::" in line and not line.lstrip().startswith("#")]
    if not ids:
        raise GpuPerfError(
            f"{source} holds no test node ids (lines like tests/x/test_perf.py::test_y[p]); nothing was pruned"
        )
    return ids
