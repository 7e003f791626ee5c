"""Atomic file writes (a reader, or a crash, never sees half a file), the symlink check that
guards them, the temporary files they leave when killed, and checked JSON objects."""

from __future__ import annotations

import json
import os
import re
import secrets
import stat
from pathlib import Path
from typing import Any

from pytest_gpuperf._store.jsonio import finite_payload, json_type, parse_text, read_json
from pytest_gpuperf._store.private_dir import cache_folder
from pytest_gpuperf.errors import BaselineFileError

NOTES_FIELD = "notes"


def atomic_write_json(path: Path, payload: Any) -> None:
    """Write ``payload`` as JSON to ``path`` atomically (see ``atomic_write_text``).

    JSON has no NaN or infinity: such a value is written as null, and a top-level object gets
    a ``notes`` entry naming the field (a strict reader would refuse the file otherwise).
    """
    clean, notes = finite_payload(payload)
    if notes and isinstance(clean, dict):
        before = clean.get(NOTES_FIELD)
        clean[NOTES_FIELD] = [*(before if isinstance(before, list) else []), *notes]
    atomic_write_text(path, json.dumps(clean, indent=2, allow_nan=False) + "\n")


def atomic_write_text(path: Path, text: str, *, fsync: bool = True) -> None:
    """Write ``text`` to a temporary file beside ``path``, fsync it (unless ``fsync`` is False:
    for records that need not survive a power cut), then rename it over ``path``.

    The file gets the mode an ordinary write would give it: a new one 0o666 less the umask (the
    kernel applies it; ``mkstemp`` would make it readable by its owner alone, and a baseline or
    report written on a shared runner must stay readable by the job that uploads or reviews it),
    and a rewritten one its old mode.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_beside(path)
    try:
        try:
            os.fchmod(fd, stat.S_IMODE(path.stat().st_mode))
        except FileNotFoundError:
            pass
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def symlinked_component(path: Path, below: Path) -> Path | None:
    """The first folder or file from ``below`` (exclusive) down to ``path`` that is a symbolic
    link, or None. Components that do not exist yet are not links. ``path`` must lie under
    ``below``; ``below`` itself is the user's choice and may be a link."""
    current = Path(below)
    for part in Path(path).relative_to(below).parts:
        current = current / part
        if current.is_symlink():
            return current
    return None


def _create_beside(path: Path) -> tuple[int, Path]:
    """A new, empty file ``.<name>.<random>.tmp`` in ``path``'s folder, opened for writing."""
    while True:
        tmp = temporary_beside(path)
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:
            continue


def temporary_beside(path: Path, suffix: str = ".tmp") -> Path:
    """A fresh name for the temporary file that is renamed over ``path``:
    ``.<name>.<12 hex digits><suffix>``. A writer killed before the rename leaves it behind;
    ``is_leftover`` recognises it, so readers and ``gpuperf check`` pass it by."""
    return path.with_name(f".{path.name}.{secrets.token_hex(6)}{suffix}")


# .<name>.<12 hex digits>.tmp (atomic_write_text) or .<name>.<12 hex digits>.migrate.json[.gz] (gpuperf migrate)
_LEFTOVER = re.compile(r"\..+\.[0-9a-f]{12}(\.tmp|\.migrate\.json|\.migrate\.json\.gz)")


def stored_files(folder: Path, pattern: str) -> list[Path]:
    """The files under ``folder`` matching ``pattern`` (a glob), sorted; leftovers of killed
    atomic writes are left out (``is_leftover``)."""
    return sorted(p for p in folder.glob(pattern) if not is_leftover(p))


def is_leftover(path: Path) -> bool:
    """Whether ``path`` is named as a temporary file of an atomic write (``temporary_beside``):
    never a file pytest-gpuperf reads, and safe to delete once no writer runs."""
    return _LEFTOVER.fullmatch(path.name) is not None


def private_dir(name: str) -> Path:
    """A folder of this user's only under the per-user cache root, for things the plugin later
    loads or runs: ``<cache root>/<name>``, created with mode 0700 and checked, as the build
    caches are (see :func:`pytest_gpuperf._store.private_dir.cache_folder`)."""
    return cache_folder(name)


def read_json_object(path: Path, kind: str) -> dict[str, Any] | None:
    """The JSON object stored at ``path``, or None when the file does not exist.

    An unreadable, invalid or non-object file raises ``BaselineFileError`` naming the file
    (and a syntax error's line and column); such a file is never overwritten.
    """
    try:
        data = read_json(path, kind, BaselineFileError, hint=_RESTORE)
    except FileNotFoundError:
        return None
    return _object(data, path, kind)


def parse_json_object(text: str, path: Path, kind: str) -> dict[str, Any]:
    """``text`` (the content of ``path``) as a JSON object; errors as in ``read_json_object``."""
    return _object(parse_text(text, path, kind, BaselineFileError, hint=_RESTORE), path, kind)


_RESTORE = ". Fix it or restore it from version control; it will not be overwritten."


def _object(data: Any, path: Path, kind: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise BaselineFileError(
            f"{kind} {path}: field '<top level>' must be a JSON object, got a JSON {json_type(data)}; "
            "it is not a file pytest-gpuperf wrote"
        )
    return data
