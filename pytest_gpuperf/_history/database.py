"""The history database: one SQLite file, its schema, and the migrations between schema versions.

The schema version is SQLite's ``PRAGMA user_version``: 0 for a file no version of gpuperf has
written to, ``SCHEMA_VERSION`` for the current one. ``MIGRATIONS[i]`` takes a database from version
``i`` to ``i + 1``; opening a database runs the missing ones in order, all in one transaction
together with the new version number, so a failed migration leaves the file as it was. A database
of a newer version than this gpuperf knows is refused, never rewritten.

The file is refused in a folder that every user may write without the sticky bit (there another
user could replace it between runs) and when it is a symbolic link.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pytest_gpuperf._store.private_dir import replaceable_from
from pytest_gpuperf.errors import GpuPerfError, UnsafePathError

__all__ = [
    "DEFAULT_PATH",
    "HISTORY_ENV",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "HistoryError",
    "default_path",
    "open_database",
    "transaction",
]

HISTORY_ENV = "GPU_PERF_HISTORY"
DEFAULT_PATH = Path(".gpuperf") / "history.sqlite"


class HistoryError(GpuPerfError):
    """A history database that is missing, corrupt, of a newer schema, or cannot be written."""


def default_path() -> Path:
    """``$GPU_PERF_HISTORY`` when set, else ``.gpuperf/history.sqlite`` under the current folder."""
    env = os.environ.get(HISTORY_ENV)
    return Path(env).expanduser() if env else DEFAULT_PATH


def _create_v1(db: sqlite3.Connection) -> None:
    """Version 1: runs, the environment of each device in a run, and measurements."""
    _statements(
        db,
        """
        CREATE TABLE runs (
            id INTEGER PRIMARY KEY,
            digest TEXT NOT NULL UNIQUE,
            created TEXT NOT NULL,
            commit_sha TEXT,
            branch TEXT,
            dirty INTEGER,
            gpuperf_version TEXT,
            source TEXT NOT NULL,
            ingested TEXT NOT NULL
        );
        CREATE TABLE environments (
            run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            device_key TEXT NOT NULL,
            name TEXT,
            uuid TEXT,
            driver_version TEXT,
            cuda_runtime_version TEXT,
            cuda_driver_version TEXT,
            cupy_version TEXT,
            PRIMARY KEY (run_id, device_key)
        );
        CREATE TABLE measurements (
            run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            key TEXT NOT NULL,
            device_key TEXT NOT NULL,
            ordinal INTEGER NOT NULL,
            module TEXT,
            median_s REAL,
            ci_low_s REAL,
            ci_high_s REAL,
            confidence REAL,
            reference TEXT,
            ratio REAL,
            ratio_low REAL,
            ratio_high REAL,
            verdict TEXT NOT NULL,
            skip_reason TEXT,
            PRIMARY KEY (run_id, key, device_key, ordinal)
        );
        CREATE INDEX measurements_by_series ON measurements (key, device_key);
        CREATE INDEX runs_by_time ON runs (created, id);
        """,
    )


def _statements(db: sqlite3.Connection, script: str) -> None:
    """Run each statement of ``script`` inside the open transaction (``executescript`` would
    commit it first)."""
    for statement in script.split(";"):
        if statement.strip():
            db.execute(statement)


# MIGRATIONS[i] takes a database from version i to i + 1; append, never edit a released one.
MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_create_v1]
SCHEMA_VERSION = len(MIGRATIONS)


def _refuse_unsafe_folder(path: Path) -> None:
    folder = path.absolute().parent
    try:
        mode = os.stat(folder).st_mode
    except OSError:
        mode = 0
    if mode & stat.S_IWOTH and not mode & stat.S_ISVTX:
        raise UnsafePathError(
            f"history database {path}: its folder {folder} is writable by every user and lacks the sticky bit, "
            "so another user could replace the database; keep it in a folder of your own (--db or GPU_PERF_HISTORY)"
        )
    above = replaceable_from(folder)
    if above is not None:
        raise UnsafePathError(
            f"history database {path} lies inside {above}, which every user can write and which lacks the sticky "
            "bit, so another user could replace it; keep it in a folder of your own (--db or GPU_PERF_HISTORY)"
        )
    if path.is_symlink():
        raise UnsafePathError(f"history database {path} is a symbolic link; give the file's own path")


def open_database(path: Path, *, create: bool = False) -> sqlite3.Connection:
    """The database at ``path``, migrated to ``SCHEMA_VERSION``; created (with its folder) when
    ``create`` is true and it does not exist, else a missing file is a ``HistoryError``."""
    path = Path(path)
    if not path.exists():
        if not create:
            raise HistoryError(
                f"no history database at {path}; create it with gpuperf history --db {path} ingest REPORT"
            )
        path.absolute().parent.mkdir(parents=True, exist_ok=True)
    elif not path.is_file():
        raise HistoryError(f"history database {path} is not a file")
    _refuse_unsafe_folder(path)
    try:
        db = sqlite3.connect(path, isolation_level=None)  # transactions are begun explicitly
    except sqlite3.Error as exc:
        raise HistoryError(f"cannot open the history database {path}: {exc}") from None
    try:
        db.execute("PRAGMA foreign_keys = ON")
        _migrate(db, path)
    except sqlite3.DatabaseError as exc:
        db.close()
        raise HistoryError(
            f"history database {path} cannot be read ({exc}); it is not a gpuperf history database or it is "
            "damaged: restore it from its copy (the gpu-perf-history branch in CI) or move it away to start anew"
        ) from None
    except BaseException:
        db.close()
        raise
    return db


def _migrate(db: sqlite3.Connection, path: Path) -> None:
    version = int(db.execute("PRAGMA user_version").fetchone()[0])
    if version > SCHEMA_VERSION:
        raise HistoryError(
            f"history database {path} has schema version {version}, newer than the {SCHEMA_VERSION} this gpuperf "
            "knows; upgrade pytest-gpuperf to read it"
        )
    if version == SCHEMA_VERSION:
        return
    if version == 0 and db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
        raise HistoryError(
            f"{path} is an SQLite database with tables of its own but no gpuperf schema version; "
            "give the path of a gpuperf history database, or a new file"
        )
    with transaction(db):
        for migration in MIGRATIONS[version:]:
            migration(db)
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION:d}")


@contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One ``BEGIN IMMEDIATE`` .. ``COMMIT``; any exception rolls everything back."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
