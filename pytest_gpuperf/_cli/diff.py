"""``gpuperf diff``: two sets of baselines (folders, device folders or files, or a folder at a git
revision against the working tree), judged as the regression gate would (``_report.baseline_diff``)."""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from pytest_gpuperf._cli.arguments import CommandLineError, setting_type
from pytest_gpuperf._plugin.options import BY_NAME
from pytest_gpuperf._report.baseline_diff import Thresholds, device_changes, diff_baselines, format_diff
from pytest_gpuperf._store import jsonio
from pytest_gpuperf._store.baselines import BaselineFile
from pytest_gpuperf._store.git_output import blob_size, run_git
from pytest_gpuperf._store.layout import DEFAULT_DIR, is_device_folder, load_device_folder, load_folder, other_kind
from pytest_gpuperf.errors import BaselineFileError, GpuPerfError

if TYPE_CHECKING:
    from pytest_gpuperf._cli.arguments import Subparsers

GATE_SETTINGS = ("tolerance", "machine-noise", "calibrated-noise", "level-noise", "confidence")


def add_parser(sub: Subparsers) -> None:
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
    for name in GATE_SETTINGS:
        s = BY_NAME[name]
        p.add_argument(
            f"--{name}",
            type=setting_type(name),
            default=s.default,
            metavar=s.metavar,
            help=f"as the gate's {s.flag} (default: {s.default:g})",
        )
    p.set_defaults(run=run)


def default_gate() -> Thresholds:
    """The regression gate as the plugin's options set it by default."""
    return Thresholds(**{name.replace("-", "_"): BY_NAME[name].default for name in GATE_SETTINGS})


def run(args: argparse.Namespace) -> int:
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
            raise CommandLineError("diff --git REV takes at most one folder (default: baselines)")
        root = Path(args.paths[0] if args.paths else DEFAULT_DIR)
        old = load_git(args.git, root)
        new = load_folder(root) if root.exists() else {}
    else:
        if len(args.paths) != 2:
            raise CommandLineError(
                "diff takes two baseline folders (OLD NEW), two device folders, two files, or --git REV [DIR]"
            )
        (old_level, old), (new_level, new) = (_load_side(Path(p)) for p in args.paths)
        if old_level != new_level:
            names = {"file": "a baseline file", "device": "a device folder", "root": "a baselines folder"}
            raise CommandLineError(
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


def _pair_name(paths: Sequence[str]) -> str:
    a, b = Path(paths[0]).name, Path(paths[1]).name
    return a if a == b else f"{a} -> {b}"


def _git(args: Sequence[str], cwd: Path) -> str:
    if not shutil.which("git"):
        raise GpuPerfError("git is not installed; compare two folders instead: gpuperf diff OLD NEW")
    done = run_git(args, cwd)  # what git prints is capped (_store.git_output)
    out = done.stdout.decode("utf-8", "replace")
    if done.returncode != 0:
        raise GpuPerfError(f"git {' '.join(args)} failed: {done.stderr.strip() or out.strip()}")
    return out


def load_git(rev: str, root: Path) -> dict[str, BaselineFile]:
    """The baseline files under ``root`` as they were at git revision ``rev``."""
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
