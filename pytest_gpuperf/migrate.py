"""``gpuperf migrate PATH...``: files of an older schema version rewritten, in place, as the current one.

Every file pytest-gpuperf writes names its kind and version (``"schema": "pytest-gpuperf/<kind>/<n>"``).
The version this pytest-gpuperf writes is the one of its writer (``CURRENT``). ``MIGRATIONS[kind][n]``
turns a version ``n`` document into a version ``n + 1`` one, so a file of any older version is
brought up to date by applying the steps in order. A file already current is left untouched (not
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
import secrets
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_gpuperf.baselines import SCHEMA as BASELINES_SCHEMA
from pytest_gpuperf.baselines import BaselineFile, locked_for_writing
from pytest_gpuperf.compile.static import BUDGET_SCHEMA, BudgetFile
from pytest_gpuperf.errors import GpuPerfError
from pytest_gpuperf.jsonio import GZIP_MAGIC, read_json, shown
from pytest_gpuperf.report import REPORT_SCHEMA
from pytest_gpuperf.report_file import load_report

Migration = Callable[[dict[str, Any]], dict[str, Any]]
PREFIX = "pytest-gpuperf/"


class MigrationError(GpuPerfError):
    """A file cannot be migrated: not ours, unreadable, of an unknown version, or invalid after migration."""


def version_of(schema: str) -> int:
    """``'pytest-gpuperf/baselines/1'`` -> 1."""
    return int(schema.rsplit("/", 1)[1])


CURRENT: dict[str, int] = {
    "report": version_of(REPORT_SCHEMA),
    "baselines": version_of(BASELINES_SCHEMA),
    "static-budgets": version_of(BUDGET_SCHEMA),
}

# kind -> {version n: the step from n to n + 1}. Register a step with @migration(kind, n) when
# a writer's schema version is bumped; tests/plugin/test_schemas.py checks every older version
# the readers accept has a chain to the current one.
MIGRATIONS: dict[str, dict[int, Migration]] = {kind: {} for kind in CURRENT}


def migration(kind: str, from_version: int) -> Callable[[Migration], Migration]:
    """Register ``function`` as the step of ``kind`` from ``from_version`` to ``from_version + 1``."""

    def register(function: Migration) -> Migration:
        MIGRATIONS[kind][from_version] = function
        return function

    return register


@migration("static-budgets", 1)
def _budgets_add_instruction_counts(data: dict[str, Any]) -> dict[str, Any]:
    """Version 2 added the optional ``sass_instructions`` of a kernel's budget; a version 1 file
    is a version 2 file without them, so only the label changes (no count is invented: a module
    that gates its code size records them at its next --gpu-perf-update-baselines)."""
    return {**data, "schema": f"{PREFIX}static-budgets/2"}


def steps(kind: str, version: int) -> list[int]:
    """The versions to step from to bring ``kind`` at ``version`` to ``CURRENT[kind]``; raises
    MigrationError for a newer version or a missing step."""
    current = CURRENT[kind]
    if version > current:
        raise MigrationError(
            f"{kind} version {version} is newer than this pytest-gpuperf writes ({current}); "
            "upgrade pytest-gpuperf to read it"
        )
    missing = [n for n in range(version, current) if n not in MIGRATIONS[kind]]
    if missing:
        raise MigrationError(
            f"{kind} version {version} cannot be migrated: no step from version {missing[0]} to {missing[0] + 1} "
            f"(this pytest-gpuperf migrates {kind} files from versions {sorted(readable(kind))})"
        )
    return list(range(version, current))


def readable(kind: str) -> set[int]:
    """The versions of ``kind`` that ``gpuperf migrate`` brings to the current one (the current included)."""
    found = {CURRENT[kind]}
    n = CURRENT[kind] - 1
    while n in MIGRATIONS[kind]:
        found.add(n)
        n -= 1
    return found


def parse_schema(data: Any) -> tuple[str, int] | None:
    """(kind, version) of a pytest-gpuperf document, or None when it is not one of ours."""
    schema = data.get("schema") if isinstance(data, dict) else None
    if not isinstance(schema, str) or not schema.startswith(PREFIX) or schema.count("/") != 2:
        return None
    kind, number = schema.split("/")[1:]
    if kind not in CURRENT:
        return None
    try:
        version = int(number)
    except ValueError:
        raise MigrationError(f"field 'schema' {shown(schema)} does not end in a version number") from None
    return kind, version


def migrate_document(data: dict[str, Any], kind: str, version: int) -> dict[str, Any]:
    """``data`` (``kind`` at ``version``) brought to the current version."""
    for n in steps(kind, version):
        data = MIGRATIONS[kind][n](data)
        if parse_schema(data) != (kind, n + 1):
            raise MigrationError(
                f"the {kind} step from version {n} wrote schema {shown(data.get('schema'))}, not version {n + 1}"
            )
    return data


@dataclass(frozen=True)
class Outcome:
    path: Path
    kind: str | None  # None: not a pytest-gpuperf file (left alone)
    old: int | None = None
    new: int | None = None
    error: str | None = None

    @property
    def migrated(self) -> bool:
        return self.error is None and self.old is not None and self.old != self.new

    def line(self, dry_run: bool) -> str:
        if self.error:
            return f"ERROR {self.error}"
        if self.kind is None:
            return f"skipped {self.path}: not a pytest-gpuperf file"
        if self.migrated:
            verb = "would migrate" if dry_run else "migrated"
            return f"{verb} {self.path}: {self.kind} version {self.old} -> {self.new}"
        return f"current {self.path}: {self.kind} version {self.new}"


def migrate_file(path: Path, *, dry_run: bool = False) -> Outcome:
    """Migrate one file in place (see the module doc); problems are returned, never raised."""
    try:
        with _locked(path):
            data = read_json(path, "file", MigrationError)
            found = parse_schema(data)
            if found is None:
                return Outcome(path, None)
            kind, version = found
            if version == CURRENT[kind]:
                return Outcome(path, kind, version, version)
            new = migrate_document(data, kind, version)
            if not dry_run:
                _replace(path, new, kind)
            return Outcome(path, kind, version, CURRENT[kind])
    except FileNotFoundError:
        return Outcome(path, None, error=f"{path} does not exist")
    except GpuPerfError as exc:
        text = str(exc)
        return Outcome(path, None, error=text if str(path) in text else f"{path}: {text}")


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
    with open(path, "rb") as fh:
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
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.migrate{'.json.gz' if packed else '.json'}")
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
