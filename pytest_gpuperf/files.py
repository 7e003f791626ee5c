"""Atomic file writes: a reader (or a crash) never sees half a file."""
from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from pytest_gpuperf.errors import BaselineFileError


def atomic_write_json(path: Path, payload: Any) -> None:
    """Write ``payload`` as JSON to ``path`` atomically (see ``atomic_write_text``)."""
    atomic_write_text(path, json.dumps(payload, indent=2) + "\n")


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path``, fsync it, then rename it over ``path``.

    The file keeps the mode an ordinary write would give it (an existing file's, else 0o666 less
    the umask): ``mkstemp`` creates files readable by their owner alone, and a baseline or report
    written on a shared runner must stay readable by the job that uploads or reviews it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _mode_for(path))
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _mode_for(path: Path) -> int:
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def read_json_object(path: Path, kind: str) -> dict[str, Any] | None:
    """The JSON object stored at ``path``, or None when the file does not exist.

    An unreadable, invalid or non-object file raises ``BaselineFileError`` naming the file
    (and a syntax error's line and column); such a file is never overwritten.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BaselineFileError(f"{kind} {path} cannot be read: {exc}") from exc
    return parse_json_object(text, path, kind)


def parse_json_object(text: str, path: Path, kind: str) -> dict[str, Any]:
    """``text`` (the content of ``path``) as a JSON object; errors as in ``read_json_object``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineFileError(
            f"{kind} {path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}). "
            "Fix it or restore it from version control; it will not be overwritten."
        ) from None
    if not isinstance(data, dict):
        raise BaselineFileError(f"{kind} {path}: field '<top level>' must be a JSON object")
    return data
