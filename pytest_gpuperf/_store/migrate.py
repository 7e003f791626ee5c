"""Files of an older schema version rewritten, in place, as the current one (``gpuperf migrate PATH...``).

The versions and the steps between them are :mod:`pytest_gpuperf._store.schema_versions`; a file of
any older version is brought up to date by applying the steps in order. A file already current is left untouched (not
even rewritten); a version newer than ``CURRENT`` (written by a later pytest-gpuperf) or one with no
chain of steps is an error naming the file, and nothing is changed.

A migrated file is written beside the original, read back through the plugin's own reader of its
kind, and only then renamed over the original (atomically: a reader, or a crash, never sees half a
file). Baseline and budget files are rewritten under their ``.lock``, as the plugin's updates are.
Gzipped reports stay gzipped.

Versions read today (docs/schemas.md): report 1, baselines 1, static-budgets 1 and 2 (1 has no
SASS instruction counts; the plugin reads it as it is, and this command rewrites it as 2).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_gpuperf._store.baselines import BaselineFile, locked_for_writing
from pytest_gpuperf._store.budgets import BudgetFile
from pytest_gpuperf._store.files import temporary_beside
from pytest_gpuperf._store.jsonio import GZIP_MAGIC, open_regular, read_json
from pytest_gpuperf._store.reports import load_report
from pytest_gpuperf._store.schema_versions import CURRENT, PREFIX, MigrationError, migrate_document, parse_schema
from pytest_gpuperf.errors import GpuPerfError


@dataclass(frozen=True)
class MigrationOutcome:
    """One file: its kind and versions before and after, or the error that kept it as it was."""

    path: Path
    kind: str | None  # None: not a pytest-gpuperf file (left alone)
    old: int | None = None
    new: int | None = None
    error: str | None = None

    @property
    def migrated(self) -> bool:
        return self.error is None and self.old is not None and self.old != self.new


def migrate_file(path: Path, *, dry_run: bool = False) -> MigrationOutcome:
    """Migrate one file in place (see the module doc); problems are returned, never raised."""
    try:
        with _locked(path):
            data = read_json(path, "file", MigrationError)
            found = parse_schema(data)
            if found is None:
                return MigrationOutcome(path, None)
            kind, version = found
            if version == CURRENT[kind]:
                return MigrationOutcome(path, kind, version, version)
            new = migrate_document(data, kind, version)
            if not dry_run:
                _replace(path, new, kind)
            return MigrationOutcome(path, kind, version, CURRENT[kind])
    except FileNotFoundError:
        return MigrationOutcome(path, None, error=f"{path} does not exist")
    except GpuPerfError as exc:
        text = str(exc)
        return MigrationOutcome(path, None, error=text if str(path) in text else f"{path}: {text}")


def files_under(paths: Sequence[Path]) -> Iterator[Path]:
    """Each named file, and every ``*.json`` / ``*.json.gz`` below each named folder (links not
    followed), each once."""
    seen: set[Path] = set()

    def new(path: Path) -> bool:
        key = path.resolve()
        if key in seen:
            return False
        seen.add(key)
        return True

    for path in paths:
        if path.is_dir() and not path.is_symlink():
            for folder, dirs, names in os.walk(path):
                dirs.sort()
                for name in sorted(names):
                    if name.endswith((".json", ".json.gz")) and not name.startswith(".") and new(Path(folder) / name):
                        yield Path(folder) / name
        elif new(path):
            yield path


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold the file's lock while it is read and rewritten, as the plugin's updates do; reports
    (not kept under a baselines folder) have no lock."""
    try:
        kind = _peek_kind(path)
    except OSError:
        kind = None
    if kind in ("baselines", "static-budgets") and not path.name.endswith(".gz"):
        with locked_for_writing(path, path.parent, kind=f"{kind} file"):
            yield
    else:
        yield


def _peek_kind(path: Path) -> str | None:
    with open_regular(path, "file", MigrationError) as fh:
        head = fh.read(4096)
    if head[:2] == GZIP_MAGIC:
        return "report"
    text = head.decode("utf-8", "replace")
    for kind in CURRENT:
        if f'"{PREFIX}{kind}/' in text:
            return kind
    return None


def _replace(path: Path, data: dict[str, Any], kind: str) -> None:
    """Write ``data`` beside ``path``, read it back through the reader of ``kind``, rename it over ``path``."""
    text = json.dumps(data, indent=2, allow_nan=False) + "\n"
    packed = path.name.endswith(".gz")
    payload = gzip.compress(text.encode("utf-8"), mtime=0) if packed else text.encode("utf-8")
    tmp = temporary_beside(path, ".migrate.json.gz" if packed else ".migrate.json")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        os.fchmod(fd, stat.S_IMODE(path.stat().st_mode))
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            READERS[kind](tmp)
        except GpuPerfError as exc:
            raise MigrationError(
                f"{path}: the migrated {kind} file would not be read back ({exc}); nothing was changed"
            ) from None
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


READERS: dict[str, Callable[[Path], Any]] = {
    "report": load_report,
    "baselines": BaselineFile.read,
    "static-budgets": BudgetFile.read,
}
