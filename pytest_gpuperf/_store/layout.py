"""Where each kind of file lives under a baselines folder, and loading the timing baselines.

    <root>/<device key>/<module>.json    timing baselines (schema pytest-gpuperf/baselines/1)
    <root>/static/<file>.json            the compile-time tier's budgets (static-budgets/1, /2)

The plugin reads nothing else, so a file at another depth is never used, nor a temporary file
a killed writer left beside a file (``files.is_leftover``). ``level_problem``
recognises the usual slip of passing a device folder, the budgets folder or the project root
where the baselines folder is expected.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_gpuperf._store.baselines import BaselineFile, BaselineStore
from pytest_gpuperf._store.budgets import BUDGETS_FOLDER
from pytest_gpuperf._store.files import stored_files
from pytest_gpuperf._store.jsonio import parse_text, read_json
from pytest_gpuperf.errors import BaselineFileError, GpuPerfError

DEFAULT_DIR = "baselines"
STORED_KINDS = ("baselines", "static-budgets")  # the kinds kept under a baselines folder


def schema_of(value: Any) -> str | None:
    """The ``schema`` string of a parsed JSON document, or None."""
    schema = value.get("schema") if isinstance(value, dict) else None
    return schema if isinstance(schema, str) else None


def kind_of(schema: str | None) -> str | None:
    """``'pytest-gpuperf/baselines/1'`` -> ``'baselines'``; None for anything not ours."""
    if schema is None or not schema.startswith("pytest-gpuperf/") or schema.count("/") != 2:
        return None
    return schema.split("/")[1]


def other_kind(text: str) -> str | None:
    """The schema of another pytest-gpuperf file kind kept beside the baselines (the
    compile-time tier's budgets), or None for a timing baseline file, valid or not, which the
    store's reader then judges."""
    try:  # within the reader's caps: the text may be a git blob no one has checked
        schema = schema_of(parse_text(text, Path("-"), "file", GpuPerfError))
    except GpuPerfError:
        return None
    kind = kind_of(schema)
    return schema if kind is not None and kind != "baselines" else None


def peek_kind(path: Path) -> str | None:
    """The pytest-gpuperf kind of the file at ``path``, or None when unreadable or not ours."""
    try:
        return kind_of(schema_of(read_json(path, "file", GpuPerfError)))
    except (OSError, GpuPerfError):
        return None


def baseline_paths(root: Path) -> tuple[list[Path], list[Path]]:
    """The timing baseline files under ``root``, and the files of other kinds found beside them."""
    mine: list[Path] = []
    others: list[Path] = []
    for path in BaselineStore(root).files():
        kind = peek_kind(path)
        (others if kind is not None and kind != "baselines" else mine).append(path)
    return mine, others


def level_problem(root: Path) -> str | None:
    """What is wrong with ``root`` as a baselines folder when it is one level too deep or too
    high, or None. Only files of our stored kinds count, so unrelated JSON misleads nothing."""
    if any(peek_kind(p) in STORED_KINDS for p in stored_files(root, "*/*.json")):
        return None
    direct = {peek_kind(p) for p in stored_files(root, "*.json")}
    if "baselines" in direct:
        return (
            f"{root} looks like a device folder (it holds baseline files directly); "
            f"pass its parent, the baselines folder: {root.parent}"
        )
    if "static-budgets" in direct:
        return (
            f"{root} looks like the compile-time budgets folder ({BUDGETS_FOLDER}/); "
            f"pass its parent, the baselines folder: {root.parent}"
        )
    below = sorted({p.parent.parent for p in stored_files(root, "*/*/*.json") if peek_kind(p) in STORED_KINDS})
    if below:
        return f"{root} holds no baseline files itself, but {below[0]} does; pass that folder"
    return None


def require_folder(root: Path) -> None:
    """Raise unless ``root`` is an existing folder at the baselines folder's level."""
    if not root.is_dir():
        hint = "" if not root.is_file() else "; it is a file: pass the folder that holds the device folders"
        raise BaselineFileError(f"baseline folder {root} does not exist (pass the folder, e.g. {DEFAULT_DIR}/){hint}")
    problem = level_problem(root)
    if problem:
        raise BaselineFileError(problem)


def load_folder(root: Path) -> dict[str, BaselineFile]:
    """``'<device key>/<module>.json'`` -> validated file, for every baseline file under ``root``."""
    require_folder(root)
    found: dict[str, BaselineFile] = {}
    for path in baseline_paths(root)[0]:
        f = BaselineFile.read(path)
        if f is not None:  # removed since it was listed
            found[path.relative_to(root).as_posix()] = f
    return found


def load_device_folder(folder: Path) -> dict[str, BaselineFile]:
    """``'<module>.json'`` -> validated file, for the baseline files directly in one device folder."""
    found: dict[str, BaselineFile] = {}
    for path in stored_files(folder, "*.json"):
        if peek_kind(path) in (None, "baselines"):
            f = BaselineFile.read(path)
            if f is not None:
                found[path.name] = f
    return found


def is_device_folder(path: Path) -> bool:
    """A folder holding JSON files directly and none a level down (``<root>/<device key>/``);
    its files are then read, and judged, as baseline files."""
    return path.is_dir() and bool(stored_files(path, "*.json")) and not stored_files(path, "*/*.json")
