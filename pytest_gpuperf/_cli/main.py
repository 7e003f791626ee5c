"""The ``gpuperf`` command: inspect, check and maintain stored baselines, render saved reports.

    gpuperf list [DIR]                    devices, files, entry counts and recording dates
    gpuperf check [DIR]                   validate every baseline, budget and report file under DIR
    gpuperf diff OLD NEW                  two baseline folders, two device folders or two files
    gpuperf diff --git REV [DIR]          the working tree's baselines against those at REV
    gpuperf prune [DIR] [--dry-run] [--keep-tests-from PATH]... [--node-ids FILE] [--remove-uncollected]
    gpuperf report FILE [--markdown | --text | --annotations] [--failures-first] [--max-chars N]
    gpuperf export --format github-action-benchmark FILE [-o OUT]
    gpuperf migrate PATH... [--dry-run]   rewrite files of an older schema version as the current one
    gpuperf margins [REPORT...] [--file MARGINS [--write] [--only GLOB]... [--reset]] [--commit SHA] [--markdown]
    gpuperf --version

Exit status: 0 done, 1 a file or folder is missing, corrupt or misplaced (the message names
the file and the field) or a step failed (git, test collection), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from pytest_gpuperf._store.baselines import BaselineFile, BaselineStore
from pytest_gpuperf._store.layout import (
    DEFAULT_DIR,
    baseline_paths,
    is_device_folder,
    load_device_folder,
    load_folder,
    other_kind,
    require_folder,
)
from pytest_gpuperf._store.prune import collect_node_ids, plan_prune, read_node_ids
from pytest_gpuperf._store.reports import ReportFileError, load_report
from pytest_gpuperf.errors import BaselineFileError, GpuPerfError
from pytest_gpuperf.options import BY_NAME
from pytest_gpuperf.report.baseline_diff import Thresholds, device_changes, diff_baselines, format_diff
from pytest_gpuperf.report.render import format_report
from pytest_gpuperf.report.summary import _table

PROG = "gpuperf"

__all__ = ["main", "build_parser", "load_report", "ReportFileError", "version"]


def version() -> str:
    """The installed distribution's version, or the package's own when it is not installed."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("pytest-gpuperf")
    except PackageNotFoundError:
        from pytest_gpuperf.version import __version__

        return __version__


# -- reading baselines for diff ------------------------------------------------------------
def _load_side(path: Path) -> tuple[str, dict[str, BaselineFile]]:
    """One side of a diff and its level: 'file' (one baseline file), 'device' (a device folder)
    or 'root' (a baselines folder). Files and device folders are keyed by module file name."""
    if path.is_file():
        f = BaselineFile.read(path)
        if f is None:  # removed since is_file()
            raise BaselineFileError(f"baseline file {path} does not exist")
        return "file", {path.name: f}
    if is_device_folder(path):
        return "device", load_device_folder(path)
    return "root", load_folder(path)


def _git(args: Sequence[str], cwd: Path) -> str:
    from pytest_gpuperf._store.git_output import run_git

    if not shutil.which("git"):
        raise GpuPerfError("git is not installed; compare two folders instead: gpuperf diff OLD NEW")
    done = run_git(args, cwd)  # what git prints is capped (_store.git_output)
    out = done.stdout.decode("utf-8", "replace")
    if done.returncode != 0:
        raise GpuPerfError(f"git {' '.join(args)} failed: {done.stderr.strip() or out.strip()}")
    return out


def load_git(rev: str, root: Path) -> dict[str, BaselineFile]:
    """The baseline files under ``root`` as they were at git revision ``rev``."""
    from pytest_gpuperf._store import jsonio
    from pytest_gpuperf._store.git_output import blob_size

    if rev.startswith("-"):
        raise GpuPerfError(f"{rev!r} is not a git revision")
    here = root if root.is_dir() else Path.cwd()
    top = Path(_git(["rev-parse", "--show-toplevel"], here).strip()).resolve()
    try:
        rel = root.resolve().relative_to(top).as_posix()
    except ValueError:
        raise GpuPerfError(f"{root} is not inside the git work tree {top}") from None
    try:
        commit = _git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], top).strip()
    except GpuPerfError:
        raise GpuPerfError(f"{rev!r} is not a commit of the git repository at {top}") from None
    prefix = PurePosixPath(rel)
    found: dict[str, BaselineFile] = {}
    for name in _git(["ls-tree", "-r", "-z", "--name-only", commit, "--", rel], top).split("\0"):
        if not name.endswith(".json"):
            continue
        inner = PurePosixPath(name).relative_to(prefix) if rel != "." else PurePosixPath(name)
        if len(inner.parts) != 2:  # <device>/<module>.json only, as the store lays them out
            continue
        size = blob_size(f"{commit}:{name}", top)
        if size is not None and size > jsonio.MAX_JSON_BYTES:  # refused before any of it is read
            raise BaselineFileError(
                f"baseline file {rev}:{name} is {size:,} bytes, larger than the {jsonio.MAX_JSON_BYTES // 2**20} MiB "
                "pytest-gpuperf reads; it is not a file pytest-gpuperf wrote"
            )
        text = _git(["cat-file", "blob", f"{commit}:{name}"], top)
        if other_kind(text) is None:
            found[inner.as_posix()] = BaselineFile.parse(Path(f"{rev}:{name}"), text)
    return found


# -- list ------------------------------------------------------------------------------
def format_list(root: Path) -> tuple[str, bool]:
    """The listing of ``root`` and whether every file in it is valid."""
    require_folder(root)
    ok = True
    sections: list[str] = []
    totals = {"devices": 0, "files": 0, "entries": 0}
    paths, others = baseline_paths(root)
    for device in sorted({p.parent.name for p in paths}):
        totals["devices"] += 1
        rows = [["file", "entries", "recorded"]]
        info: dict[str, Any] | None = None
        errors: list[str] = []
        for path in (p for p in paths if p.parent.name == device):
            try:
                f = BaselineFile.read(path)
            except BaselineFileError as exc:
                ok = False
                errors.append(f"  ERROR {exc}")
                continue
            if f is None:
                continue
            info = info or f.device
            dates = sorted(e.recorded_at[:10] for e in f.entries.values())
            when = "-" if not dates else dates[0] if dates[0] == dates[-1] else f"{dates[0]} .. {dates[-1]}"
            rows.append([path.name, str(len(f.entries)), when])
            totals["files"] += 1
            totals["entries"] += len(f.entries)
        head = device
        if info:
            head += (
                f": {info.get('name', '?')}, compute capability {info.get('compute_capability', '?')}, "
                f"{info.get('sm_count', '?')} SMs; driver {info.get('driver_version') or '?'}, "
                f"CUDA {info.get('cuda_runtime_version') or '?'}, CuPy {info.get('cupy_version') or '?'}"
            )
        sections.append("\n".join([head] + ([_table(rows)] if len(rows) > 1 else []) + errors))
    top = f"{root}: {totals['devices']} device(s), {totals['files']} file(s), {totals['entries']} entries"
    for folder in sorted({p.parent.name for p in others}):
        n = sum(1 for p in others if p.parent.name == folder)
        top += f"\n{folder}/: {n} file(s) of another kind, not listed (gpuperf check validates them)"
    return "\n\n".join([top] + sections) + "\n", ok


# -- commands -------------------------------------------------------------------------------
def _cmd_list(args: argparse.Namespace) -> int:
    text, ok = format_list(Path(args.dir))
    sys.stdout.write(text)
    return 0 if ok else 1


def _cmd_check(args: argparse.Namespace) -> int:
    from pytest_gpuperf._store.check import check_folder

    root = Path(args.dir)
    result = check_folder(root)
    for note in result.notes:
        print(f"NOTE {note}")
    for problem in result.problems:
        print(f"ERROR {problem}")
    print(result.summary(root))
    return 1 if result.problems else 0


def _cmd_diff(args: argparse.Namespace) -> int:
    gate = Thresholds(
        tolerance=args.tolerance,
        machine_noise=args.machine_noise,
        confidence=args.confidence,
        calibrated_noise=args.calibrated_noise,
        level_noise=args.level_noise,
    )
    by_module = False
    if args.git is not None:
        if len(args.paths) > 1:
            raise _Usage("diff --git REV takes at most one folder (default: baselines)")
        root = Path(args.paths[0] if args.paths else DEFAULT_DIR)
        old = load_git(args.git, root)
        new = load_folder(root) if root.exists() else {}
    else:
        if len(args.paths) != 2:
            raise _Usage("diff takes two baseline folders (OLD NEW), two device folders, two files, or --git REV [DIR]")
        (old_level, old), (new_level, new) = (_load_side(Path(p)) for p in args.paths)
        if old_level != new_level:
            names = {"file": "a baseline file", "device": "a device folder", "root": "a baselines folder"}
            raise _Usage(
                f"{args.paths[0]} is {names[old_level]} but {args.paths[1]} is {names[new_level]}; "
                "compare two of the same level (two baselines folders, two device folders or two files)"
            )
        if old_level == "file":  # two files are one module on two devices (or two versions): pair them
            name = _pair_name(args.paths)
            old, new = {name: next(iter(old.values()))}, {name: next(iter(new.values()))}
        by_module = old_level != "root"
    sys.stdout.write(
        format_diff(diff_baselines(old, new), device_changes(old, new, by_module), show_all=args.all, gate=gate)
    )
    return 0


def _pair_name(paths: Sequence[str]) -> str:
    a, b = Path(paths[0]).name, Path(paths[1]).name
    return a if a == b else f"{a} -> {b}"


def _cmd_prune(args: argparse.Namespace) -> int:
    root = Path(args.dir)
    files = load_folder(root)
    if not files:
        raise BaselineFileError(f"{root} holds no baseline files (<device key>/<module>.json); nothing was pruned")
    if args.node_ids is not None:
        if args.keep_tests_from:
            raise _Usage("prune takes --node-ids or --keep-tests-from, not both")
        ids, whole = read_node_ids(args.node_ids), True
    else:
        if args.keep_tests_from and args.remove_uncollected:
            raise _Usage(
                "--remove-uncollected needs the whole suite collected: with --keep-tests-from, every other module "
                "counts as not collected"
            )
        ids, whole = collect_node_ids(args.keep_tests_from or []), not args.keep_tests_from
    plan = plan_prune(files, ids, whole_suite=whole, remove_uncollected=args.remove_uncollected)
    for line in plan.kept_lines():
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


def _cmd_report(args: argparse.Namespace) -> int:
    from pytest_gpuperf.report.render import cut, format_annotations

    if args.annotations:
        sys.stdout.write(format_annotations(load_report(Path(args.file))))
        return 0
    text = format_report(load_report(Path(args.file)), markdown=not args.text, failures_first=args.failures_first)
    sys.stdout.write(cut(text, args.max_chars, "the workflow run's artifacts") if args.max_chars else text)
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from pytest_gpuperf._store.files import atomic_write_text
    from pytest_gpuperf.report.export import export

    output = None if args.output in (None, "-") else Path(args.output)
    if output is not None and (args.output.endswith(("/", os.sep)) or output.is_dir()):
        raise _Usage(f"-o {args.output} names a folder; give the file to write, e.g. -o {output / 'bench.json'}")
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


def _cmd_migrate(args: argparse.Namespace) -> int:
    from pytest_gpuperf._store.migrate import files_under, migrate_file

    outcomes = [migrate_file(path, dry_run=args.dry_run) for path in files_under([Path(p) for p in args.paths])]
    for outcome in outcomes:
        print(outcome.line(args.dry_run))
    errors = sum(1 for o in outcomes if o.error)
    moved = sum(1 for o in outcomes if o.migrated)
    current = sum(1 for o in outcomes if o.kind and not o.migrated and not o.error)
    verb = "would be migrated" if args.dry_run else "migrated"
    print(
        f"{moved} file(s) {verb}, {current} already current, {errors} error(s)"
        + (" (dry run: nothing changed)" if args.dry_run else "")
    )
    return 1 if errors or not outcomes else 0


def _positive_chars(text: str) -> int:
    value = int(text)
    if value < 200:
        raise argparse.ArgumentTypeError(f"must be at least 200 characters, got {value}")
    return value


def _cmd_margins(args: argparse.Namespace) -> int:
    from pytest_gpuperf._store.margins import UsageError, command

    try:
        text, status = command(
            [Path(r) for r in args.reports],
            Path(args.file) if args.file else None,
            only=args.only or (),
            commit=args.commit,
            reset=args.reset,
            write=args.write,
            markdown=args.markdown,
        )
    except UsageError as exc:
        raise _Usage(str(exc)) from None
    sys.stdout.write(text)
    return status


def _cmd_levels(args: argparse.Namespace) -> int:
    from pytest_gpuperf._store.levels import UsageError, command

    try:
        text, status = command(
            [Path(r) for r in args.reports],
            Path(args.dir),
            band=args.band,
            min_runs=args.min_runs,
            only=args.only or (),
            write=args.write,
        )
    except UsageError as exc:
        raise _Usage(str(exc)) from None
    sys.stdout.write(text)
    return status


def _at_least_two(text: str) -> int:
    value = int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"must be at least 2 runs, got {value}")
    return value


class _Usage(Exception):
    pass


def _setting_type(name: str) -> Callable[[str], float]:
    """An argparse type that validates like the plugin's option of that name."""
    setting = BY_NAME[name]

    def parse(text: str) -> float:
        try:
            value: float = setting.parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return value

    parse.__name__ = name  # argparse names the type in its message
    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Inspect and maintain pytest-gpuperf baselines and reports."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("list", help="devices, files, entry counts and recording dates of stored baselines")
    p.add_argument(
        "dir", nargs="?", default=DEFAULT_DIR, metavar="DIR", help=f"baseline folder (default: {DEFAULT_DIR})"
    )
    p.set_defaults(run=_cmd_list)

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
    p.set_defaults(run=_cmd_check)

    p = sub.add_parser(
        "diff",
        help="compare two sets of baselines, or the working tree with a git revision; prints a markdown table",
        description="Compare baselines: OLD NEW (two baselines folders; two device folders or two files, paired by "
        "module), or --git REV [DIR] (DIR at REV against DIR in the working tree). Each change is judged as the "
        "regression gate would judge a run measuring NEW against the baseline OLD: 'slower' fails the gate, "
        "'inconclusive' is slower past half the tolerance but within noise, 'faster' is faster past half the "
        "tolerance beyond noise, otherwise 'within tolerance'.",
    )
    p.add_argument("paths", nargs="*", metavar="PATH")
    p.add_argument(
        "--git", metavar="REV", help="compare DIR (default: baselines) at this git revision with the working tree"
    )
    p.add_argument("--all", action="store_true", help="also list identical entries")
    for name in ("tolerance", "machine-noise", "calibrated-noise", "level-noise", "confidence"):
        s = BY_NAME[name]
        p.add_argument(
            f"--{name}",
            type=_setting_type(name),
            default=s.default,
            metavar=s.metavar,
            help=f"as the gate's {s.flag} (default: {s.default:g})",
        )
    p.set_defaults(run=_cmd_diff)

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
    p.set_defaults(run=_cmd_prune)

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
    p.set_defaults(run=_cmd_report)

    from pytest_gpuperf.report.export import FORMATS

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
    p.set_defaults(run=_cmd_export)

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
    p.set_defaults(run=_cmd_migrate)
    p = sub.add_parser(
        "margins",
        help="derive speedup margins from saved reports; show or update a margins file",
        description="Derive gated margins from saved --gpu-perf-json reports by the rule "
        "margin = floor(100 * 0.95 * ci_low) / 100, ci_low the lowest lower end of a comparison's interval over "
        "the reports. With REPORTs alone: the margin of every interleaved comparison in them. With --file: the "
        "file's entries (each names its test and variants) derived again from the lowest of their recorded evidence "
        "and the reports; --write saves them. With --file alone: the file as a table, checked against the rule "
        "(exit 1 on a problem).",
    )
    p.add_argument("reports", nargs="*", metavar="REPORT", help="a saved report (.json or .json.gz)")
    p.add_argument("--file", metavar="MARGINS", help="a margins file (kernels/<family>/margins.json here)")
    p.add_argument("--write", action="store_true", help="save the derived entries to the margins file")
    p.add_argument(
        "--only", action="append", metavar="GLOB", help="update only the entries whose key matches; repeat for more"
    )
    p.add_argument(
        "--reset", action="store_true", help="derive from the reports alone, forgetting the recorded evidence"
    )
    p.add_argument("--commit", metavar="SHA", help="the commit the reports measured, where they record none")
    p.add_argument("--markdown", action="store_true", help="print the table as markdown (for a README)")
    p.set_defaults(run=_cmd_margins)
    p = sub.add_parser(
        "levels",
        help="find the levels of kernels that hold one of a few times per run; store them in their baselines",
        description="Read saved --gpu-perf-json reports of several runs (A/A runs of unchanged code, on several "
        "machines of one GPU model) and find, for each variant calibrated against a reference kernel, the levels "
        "its time relative to the reference sat at: runs whose interval reaches no further than --band from their "
        "estimate, grouped within --band; a group of --min-runs or more runs is a level. With --write, the levels of "
        "every variant that has two or more, at least twice --band apart, are stored in its baseline entry; its "
        "regression check then passes a run that sits at a level (within --gpu-perf-level-noise, with an interval as "
        "narrow) or across two, and fails one clear of every level and slower than one (docs/statistics.md). A report "
        "given twice counts once. Exit 1 when --write could not store a variant's levels.",
    )
    p.add_argument("reports", nargs="+", metavar="REPORT", help="a saved report (.json or .json.gz)")
    p.add_argument(
        "--dir", default=DEFAULT_DIR, metavar="DIR", help=f"baseline folder to store levels in (default: {DEFAULT_DIR})"
    )
    p.add_argument(
        "--band",
        type=_setting_type("level-noise"),
        default=BY_NAME["level-noise"].default,
        metavar="FRACTION",
        help="how narrow a run must be, and how close to a level's first run (default: %(default)g)",
    )
    p.add_argument(
        "--min-runs", type=_at_least_two, default=2, metavar="N", help="runs that make a level (default: %(default)s)"
    )
    p.add_argument(
        "--only", action="append", metavar="GLOB", help="only the keys (test::variant) that match; repeat for more"
    )
    p.add_argument("--write", action="store_true", help="store the levels found in the baseline entries")
    p.set_defaults(run=_cmd_levels)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except _Usage as exc:
        parser.error(str(exc))
    except GpuPerfError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    return 0  # unreachable: parser.error exits


if __name__ == "__main__":
    raise SystemExit(main())
