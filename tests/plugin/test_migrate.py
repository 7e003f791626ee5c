"""``gpuperf migrate``: older schema versions rewritten in place and atomically, current files left
alone, unknown versions refused. Today only the budgets have an older version (1 -> 2); the other
kinds are exercised with a synthetic version 0 registered for the test."""
from __future__ import annotations

import gzip
import json
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from pytest_gpuperf._store import migrate, schema_versions
from pytest_gpuperf._store.baselines import BaselineFile
from pytest_gpuperf._store.check import check_folder
from pytest_gpuperf._cli.main import main
from pytest_gpuperf._cli.migrate import outcome_line
from pytest_gpuperf._store.budgets import BudgetFile
from pytest_gpuperf._store.reports import ReportFileError, load_report

ROOT = Path(__file__).resolve().parents[2]
ENTRY = {"median_s": 1e-5, "ci_low_s": 0.9e-5, "ci_high_s": 1.1e-5, "confidence": 0.99, "n": 40, "spread": 0.01,
         "mode": "cold", "method": "graph", "recorded_at": "2026-11-27T00:00:00+00:00"}


def _version_0(data: dict[str, Any]) -> dict[str, Any]:
    """A made-up older layout: entries as a list with their key inside, times in microseconds."""
    entries = {}
    for item in data["entries"]:
        item = dict(item)
        key = item.pop("key")
        for name in ("median", "ci_low", "ci_high"):
            item[f"{name}_s"] = item.pop(f"{name}_us") * 1e-6
        entries[key] = item
    return {"schema": "pytest-gpuperf/baselines/1", "device": data["gpu"], "entries": entries}


@pytest.fixture
def version_0(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(schema_versions.MIGRATIONS["baselines"], 0, _version_0)


def _old_file(path: Path) -> dict[str, Any]:
    old = {"schema": "pytest-gpuperf/baselines/0", "gpu": {"name": "Fake GPU", "key": "fake"},
           "entries": [{"key": "test_x::fast", **{k: v for k, v in ENTRY.items() if not k.endswith("_s")},
                        "median_us": 10.0, "ci_low_us": 9.0, "ci_high_us": 11.0}]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(old))
    return old


def test_every_version_the_readers_accept_has_a_chain_to_the_current_one() -> None:
    assert schema_versions.CURRENT == {"report": 1, "baselines": 1, "static-budgets": 2}
    for kind, current in schema_versions.CURRENT.items():
        assert schema_versions.readable(kind) == set(range(1, current + 1)), kind
        for version in range(1, current):
            assert schema_versions.steps(kind, version) == list(range(version, current))


def test_a_synthetic_older_baseline_file_is_rewritten_in_place(tmp_path: Path, version_0: None,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "baselines" / "fake" / "tests.x.json"
    _old_file(path)
    path.chmod(0o640)
    problems = check_folder(tmp_path / "baselines").problems
    assert len(problems) == 1 and f"gpuperf migrate {path} rewrites as version 1" in problems[0], problems
    assert main(["migrate", str(tmp_path / "baselines")]) == 0
    out = capsys.readouterr().out
    assert f"migrated {path}: baselines version 0 -> 1" in out and "1 file(s) migrated, 0 already current, 0 error(s)" in out
    stored = BaselineFile.read(path)
    assert stored is not None and stored.device["key"] == "fake"
    assert stored.entries["test_x::fast"].median_s == pytest.approx(1e-5)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640, "the file keeps its mode"
    assert sorted(p.name for p in path.parent.iterdir()) == ["tests.x.json", "tests.x.json.lock"], "no temporary left behind"
    before = path.read_bytes()
    assert main(["migrate", str(path)]) == 0  # current now: left untouched
    assert f"current {path}: baselines version 1" in capsys.readouterr().out
    assert path.read_bytes() == before
    assert check_folder(tmp_path / "baselines").problems == []


def test_a_dry_run_changes_nothing(tmp_path: Path, version_0: None, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "b" / "fake" / "m.json"
    _old_file(path)
    before = path.read_bytes()
    assert main(["migrate", "--dry-run", str(path)]) == 0
    assert "would migrate" in capsys.readouterr().out
    assert path.read_bytes() == before


def test_a_newer_or_unmigratable_version_is_an_error_and_nothing_changes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({"schema": "pytest-gpuperf/baselines/7", "device": {}, "entries": {}}))
    older = tmp_path / "older.json"
    _old_file(older)  # version 0 with no step registered
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({"schema": "pytest-gpuperf/report/one"}))
    texts = {p: p.read_bytes() for p in (newer, older, odd)}
    assert main(["migrate", str(newer), str(older), str(odd)]) == 1
    out = capsys.readouterr().out
    assert f"ERROR {newer}: baselines version 7 is newer than this pytest-gpuperf writes (1); upgrade pytest-gpuperf" in out
    assert f"ERROR {older}: baselines version 0 cannot be migrated: no step from version 0 to 1" in out
    assert "does not end in a version number" in out and "3 error(s)" in out
    assert all(p.read_bytes() == text for p, text in texts.items())


def test_a_step_whose_result_the_reader_refuses_leaves_the_original(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(schema_versions.MIGRATIONS["baselines"], 0, lambda d: {"schema": "pytest-gpuperf/baselines/1", "device": {},
                                                                       "entries": {"k": {"median_s": -1}}})
    path = tmp_path / "d" / "m.json"
    _old_file(path)
    before = path.read_bytes()
    assert main(["migrate", str(path)]) == 1
    out = capsys.readouterr().out
    assert "the migrated baselines file would not be read back" in out and "median_s" in out and "nothing was changed" in out
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["m.json", "m.json.lock"]


def test_a_gzipped_report_stays_gzipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def from_0(data: dict[str, Any]) -> dict[str, Any]:
        return {**data, "schema": "pytest-gpuperf/report/1", "tests": data.pop("results")}

    monkeypatch.setitem(schema_versions.MIGRATIONS["report"], 0, from_0)
    path = tmp_path / "run.json.gz"
    old = {"schema": "pytest-gpuperf/report/0", "created": "2026-11-27T00:00:00+00:00", "settings": {}, "devices": {},
           "results": [{"nodeid": "t.py::test_a", "outcome": "passed", "measurements": [], "comparisons": [], "figures": []}],
           "skipped": [], "baseline_changes": [], "summary": {}}
    path.write_bytes(gzip.compress(json.dumps(old).encode()))
    with pytest.raises(ReportFileError, match=f"an older version; gpuperf migrate {path} rewrites it as version 1"):
        load_report(path)
    outcome = migrate.migrate_file(path)
    assert outcome.migrated and outcome_line(outcome, False) == f"migrated {path}: report version 0 -> 1"
    assert path.read_bytes()[:2] == b"\x1f\x8b"
    assert load_report(path)["tests"][0]["nodeid"] == "t.py::test_a"


def test_version_1_budgets_become_version_2_and_the_rest_is_current(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "baselines"
    shutil.copytree(ROOT / "baselines", root)
    (root / "notes.json").write_text("[]")  # another tool's file: skipped, not an error
    old = {p.name: json.loads(p.read_text()) for p in (root / "static").glob("*.json")}
    versions = {name: data["schema"] for name, data in old.items()}
    assert "pytest-gpuperf/static-budgets/1" in versions.values()
    assert main(["migrate", str(root)]) == 0
    out = capsys.readouterr().out
    assert f"skipped {root / 'notes.json'}: not a pytest-gpuperf file" in out
    for name, data in old.items():
        path = root / "static" / name
        new = json.loads(path.read_text())
        assert new == {**data, "schema": "pytest-gpuperf/static-budgets/2"}, "only the label changes"
        assert BudgetFile.read(path) is not None
        if versions[name].endswith("/1"):
            assert f"migrated {path}: static-budgets version 1 -> 2" in out
    for path in sorted(root.glob("nvidia-*/*.json")):
        assert path.read_bytes() == (ROOT / "baselines" / path.relative_to(root)).read_bytes()
