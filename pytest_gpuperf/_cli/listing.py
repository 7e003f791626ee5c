"""``gpuperf list [DIR]``: devices, files, entry counts and recording dates of stored baselines."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_gpuperf._report.table import text_table
from pytest_gpuperf._store.baselines import BaselineFile
from pytest_gpuperf._store.layout import DEFAULT_DIR, baseline_paths, require_folder
from pytest_gpuperf.errors import BaselineFileError

if TYPE_CHECKING:
    from pytest_gpuperf._cli.arguments import Subparsers


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser("list", help="devices, files, entry counts and recording dates of stored baselines")
    p.add_argument(
        "dir", nargs="?", default=DEFAULT_DIR, metavar="DIR", help=f"baseline folder (default: {DEFAULT_DIR})"
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    text, ok = format_list(Path(args.dir))
    sys.stdout.write(text)
    return 0 if ok else 1


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
        sections.append("\n".join([head] + ([text_table(rows, indent="  ")] if len(rows) > 1 else []) + errors))
    top = f"{root}: {totals['devices']} device(s), {totals['files']} file(s), {totals['entries']} entries"
    for folder in sorted({p.parent.name for p in others}):
        n = sum(1 for p in others if p.parent.name == folder)
        top += f"\n{folder}/: {n} file(s) of another kind, not listed (gpuperf check validates them)"
    return "\n\n".join([top] + sections) + "\n", ok
