"""The history database: schema versions and migrations, and the files it refuses
(pytest_gpuperf/_history/database.py)."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pytest_gpuperf._history import database
from pytest_gpuperf._history.database import SCHEMA_VERSION, HistoryError, open_database
from pytest_gpuperf.errors import UnsafePathError


def _version(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("PRAGMA user_version").fetchone()[0])


def test_a_new_database_gets_the_current_schema(home: Path) -> None:
    path = home / "sub" / "history.sqlite"
    open_database(path, create=True).close()
    assert _version(path) == SCHEMA_VERSION
    with sqlite3.connect(path) as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"runs", "environments", "measurements"}


def test_a_missing_database_is_not_created_by_a_reader(home: Path) -> None:
    with pytest.raises(HistoryError, match=r"no history database at .*gpuperf history --db .* ingest REPORT"):
        open_database(home / "none.sqlite")
    assert not (home / "none.sqlite").exists()


def test_a_newer_schema_is_refused_and_left_alone(home: Path) -> None:
    path = home / "h.sqlite"
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(HistoryError, match=rf"schema version {SCHEMA_VERSION + 1}, newer than the {SCHEMA_VERSION} this gpuperf knows; upgrade"):
        open_database(path)
    assert _version(path) == SCHEMA_VERSION + 1


def test_migrations_run_in_order_in_one_transaction(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A version-1 database, made by hand, reaches a next version with its rows; a migration that
    fails leaves it at version 1 with nothing of the failed step."""
    path = home / "v1.sqlite"
    with sqlite3.connect(path) as db:
        database._create_v1(db)
        db.execute("PRAGMA user_version = 1")
        db.execute("INSERT INTO runs (digest, created, source, ingested) VALUES ('d', '2026-01-01', 'r.json', 'now')")

    def broken(db: sqlite3.Connection) -> None:
        db.execute("ALTER TABLE runs ADD COLUMN note TEXT")
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(database, "MIGRATIONS", [database._create_v1, broken])
    monkeypatch.setattr(database, "SCHEMA_VERSION", 2)
    with pytest.raises(HistoryError, match="cannot be read"):
        open_database(path)
    assert _version(path) == 1
    with sqlite3.connect(path) as db:
        assert "note" not in {r[1] for r in db.execute("PRAGMA table_info(runs)")}

    def add_note(db: sqlite3.Connection) -> None:
        db.execute("ALTER TABLE runs ADD COLUMN note TEXT")
        db.execute("UPDATE runs SET note = 'migrated'")

    monkeypatch.setattr(database, "MIGRATIONS", [database._create_v1, add_note])
    db = open_database(path)
    assert db.execute("SELECT digest, note FROM runs").fetchall() == [("d", "migrated")]
    db.close()
    assert _version(path) == 2


def test_an_empty_sqlite_file_at_version_0_is_migrated(home: Path) -> None:
    path = home / "empty.sqlite"
    sqlite3.connect(path).close()
    open_database(path).close()
    assert _version(path) == SCHEMA_VERSION


def test_another_programs_database_is_refused(home: Path) -> None:
    path = home / "other.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE t (x)")
    with pytest.raises(HistoryError, match="tables of its own but no gpuperf schema version"):
        open_database(path)


def test_a_file_that_is_not_a_database_is_one_line(home: Path) -> None:
    path = home / "history.sqlite"
    path.write_text("not sqlite at all\n" * 100)
    with pytest.raises(HistoryError) as err:
        open_database(path)
    message = str(err.value)
    assert "\n" not in message and str(path) in message and "move it away" in message


def test_a_world_writable_folder_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(UnsafePathError, match=r"writable by every user and lacks the sticky bit"):
        open_database(shared / "history.sqlite", create=True)
    assert not (shared / "history.sqlite").exists()
    below = shared / "mine"
    below.mkdir(mode=0o700)
    with pytest.raises(UnsafePathError, match=rf"lies inside {shared}"):
        open_database(below / "history.sqlite", create=True)


def test_a_sticky_shared_folder_is_accepted(tmp_path: Path) -> None:
    shared = tmp_path / "tmp-like"
    shared.mkdir()
    shared.chmod(0o1777)
    open_database(shared / "history.sqlite", create=True).close()


def test_a_symlinked_database_is_refused(home: Path) -> None:
    real = home / "real.sqlite"
    open_database(real, create=True).close()
    (home / "link.sqlite").symlink_to(real)
    with pytest.raises(UnsafePathError, match="symbolic link"):
        open_database(home / "link.sqlite")
