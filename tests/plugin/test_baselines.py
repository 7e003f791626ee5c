"""The baseline store: round trip, validation, atomic and concurrent updates."""
from __future__ import annotations

import json
import multiprocessing
import os
import stat
from pathlib import Path

import pytest

from pytest_gpuperf._store.baselines import SCHEMA, BaselineFile, BaselineStore, BaselineEntry, module_file_name
from pytest_gpuperf.errors import BaselineFileError

DEVICE = {"name": "Fake GPU", "key": "fake-gpu-sm90-132sm-80gib", "driver_version": "1"}
KEY = DEVICE["key"]
MODULE = "tests/fam/test_perf.py"


def entry(median: float) -> BaselineEntry:
    return BaselineEntry(
        median_s=median,
        ci_low_s=median * 0.99,
        ci_high_s=median * 1.01,
        confidence=0.99,
        n=100,
        spread=0.01,
        mode="cold",
        method="graph",
        recorded_at="2026-11-21T00:00:00+00:00",
        extra={"batch": 8},
    )


def test_module_file_name() -> None:
    assert module_file_name("tests/merge_attn_states/test_perf.py") == "tests.merge_attn_states.test_perf.json"


def test_round_trip(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    changes = store.update(KEY, MODULE, DEVICE, {"test_a::fast": entry(1e-5)})
    assert [(c.key, c.old) for c in changes] == [("test_a::fast", None)]
    again = BaselineStore(tmp_path).lookup(KEY, MODULE, "test_a::fast")
    assert again == entry(1e-5)
    data = json.loads(store.path_for(KEY, MODULE).read_text())
    assert data["schema"] == SCHEMA and data["device"] == DEVICE
    assert not list(store.path_for(KEY, MODULE).parent.glob("*.tmp")), "temporary files left behind"


def test_update_keeps_other_entries_and_reports_changes(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    store.update(KEY, MODULE, DEVICE, {"test_a::fast": entry(1e-5), "test_b::slow": entry(2e-5)})
    changes = store.update(KEY, MODULE, DEVICE, {"test_a::fast": entry(1.1e-5)})
    assert len(changes) == 1 and changes[0].old == entry(1e-5) and changes[0].delta == pytest.approx(0.1)
    f = BaselineFile.read(store.path_for(KEY, MODULE))
    assert f is not None and set(f.entries) == {"test_a::fast", "test_b::slow"}
    assert f.entries["test_b::slow"] == entry(2e-5)


def test_written_files_get_an_ordinary_files_mode(tmp_path: Path) -> None:
    """New files follow the umask (mkstemp alone would make them owner-only); rewrites keep the mode."""
    store = BaselineStore(tmp_path)
    old_umask = os.umask(0o022)
    try:
        store.update(KEY, MODULE, DEVICE, {"test_a::fast": entry(1e-5)})
        path = store.path_for(KEY, MODULE)
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
        path.chmod(0o664)
        store.update(KEY, MODULE, DEVICE, {"test_a::fast": entry(2e-5)})
        assert stat.S_IMODE(path.stat().st_mode) == 0o664
    finally:
        os.umask(old_umask)


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d.update(schema="pytest-gpuperf/baselines/0"), "'schema'"),
        (lambda d: d.pop("device"), "'device'"),
        (lambda d: d.update(entries=[]), "'entries'"),
        (lambda d: d["entries"]["t::v"].update(median_s=-1), "'entries.t::v.median_s'"),
        (lambda d: d["entries"]["t::v"].update(median_s="fast"), "'entries.t::v.median_s'"),
        (lambda d: d["entries"]["t::v"].update(ci_low_s=1.0), "'entries.t::v'"),
        (lambda d: d["entries"]["t::v"].update(n=0), "'entries.t::v.n'"),
        (lambda d: d["entries"]["t::v"].update(mode="lukewarm"), "'entries.t::v.mode'"),
        (lambda d: d["entries"]["t::v"].pop("confidence"), "'entries.t::v.confidence'"),
    ],
)
def test_schema_errors_name_the_file_and_field(tmp_path: Path, mutate, field: str) -> None:
    store = BaselineStore(tmp_path)
    store.update(KEY, MODULE, DEVICE, {"t::v": entry(1e-5)})
    path = store.path_for(KEY, MODULE)
    data = json.loads(path.read_text())
    mutate(data)
    path.write_text(json.dumps(data))
    before = path.read_bytes()
    with pytest.raises(BaselineFileError) as info:
        BaselineStore(tmp_path).lookup(KEY, MODULE, "t::v")
    assert str(path) in str(info.value) and f"field {field}" in str(info.value)
    with pytest.raises(BaselineFileError):  # an update refuses too, and leaves the file as it was
        BaselineStore(tmp_path).update(KEY, MODULE, DEVICE, {"t::w": entry(1e-5)})
    assert path.read_bytes() == before


def test_invalid_json_is_reported_with_position_and_kept(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    path = store.path_for(KEY, MODULE)
    path.parent.mkdir(parents=True)
    path.write_text('{"schema": "pytest-gpuperf/baselines/1",\n "entries": {')
    with pytest.raises(BaselineFileError, match=r"is not valid JSON \(line 2"):
        store.update(KEY, MODULE, DEVICE, {"t::v": entry(1e-5)})
    assert path.read_text().endswith('"entries": {')


def _writer(root: str, worker: int, count: int) -> None:
    store = BaselineStore(Path(root))
    for i in range(count):
        store.update(KEY, MODULE, DEVICE, {f"test_w{worker}_{i}::v": entry(1e-5 * (i + 1))})


def test_two_processes_updating_at_once_lose_nothing(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), w, 40)) for w in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    f = BaselineFile.read(BaselineStore(tmp_path).path_for(KEY, MODULE))
    assert f is not None
    assert set(f.entries) == {f"test_w{w}_{i}::v" for w in range(2) for i in range(40)}
