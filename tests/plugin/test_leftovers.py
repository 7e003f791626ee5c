"""Temporary files of the atomic writer: a writer killed before its rename leaves one beside the
file it was replacing. The file itself is intact; the readers pass the leftover by, and ``gpuperf
check`` names it as harmless instead of failing."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pytest_gpuperf._cli.main import main
from pytest_gpuperf._store.baselines import BaselineFile, BaselineStore, BaselineEntry
from pytest_gpuperf._store.files import atomic_write_json, is_leftover
from pytest_gpuperf._store.layout import load_folder

KEY = "nvidia-h200-sm90-132sm-140gib"
DEVICE: dict[str, Any] = {"name": "NVIDIA H200", "key": KEY}
MODULE = "tests/fam/test_perf.py"


def entry(median: float) -> BaselineEntry:
    return BaselineEntry(median, median * 0.99, median * 1.01, 0.99, 40, 0.01, "cold", "graph", "2026-11-21T10:00:00+00:00")


def killed_writer(path: Path, payload: dict[str, Any]) -> None:
    """Run atomic_write_json(path, payload) in a process that dies (SIGKILL-like) just before the rename."""
    code = textwrap.dedent(
        f"""
        import json, os, sys
        from pathlib import Path
        from pytest_gpuperf._store.files import atomic_write_json
        os.replace = lambda *args: os._exit(9)
        atomic_write_json(Path({str(path)!r}), json.loads({json.dumps(json.dumps(payload))}))
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 9, proc.stderr


@pytest.fixture
def store(tmp_path: Path) -> BaselineStore:
    s = BaselineStore(tmp_path / "baselines")
    s.update(KEY, MODULE, DEVICE, {"test_a::k": entry(1e-5)})
    return s


def test_a_killed_writer_leaves_the_file_intact_and_a_recognised_leftover(store: BaselineStore) -> None:
    path = store.path_for(KEY, MODULE)
    before = path.read_bytes()
    data = json.loads(before)
    data["entries"]["test_a::k"]["median_s"] = 2e-5
    killed_writer(path, data)
    assert path.read_bytes() == before, "the file being replaced is untouched"
    leftovers = [p for p in path.parent.iterdir() if p.name != path.name and not p.name.endswith(".lock")]
    assert len(leftovers) == 1 and leftovers[0].name.startswith(f".{path.name}.") and leftovers[0].name.endswith(".tmp")
    assert is_leftover(leftovers[0])


def test_a_failed_write_keeps_the_old_file_and_leaves_nothing(store: BaselineStore, monkeypatch: pytest.MonkeyPatch) -> None:
    path = store.path_for(KEY, MODULE)
    before = path.read_bytes()

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        atomic_write_json(path, {"schema": "pytest-gpuperf/baselines/1", "device": DEVICE, "entries": {}})
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == sorted([path.name, path.name + ".lock"])


def test_check_names_leftovers_as_harmless(store: BaselineStore, capsys: pytest.CaptureFixture[str]) -> None:
    path = store.path_for(KEY, MODULE)
    killed_writer(path, json.loads(path.read_text()))
    tmp = next(p for p in path.parent.iterdir() if p.name.endswith(".tmp"))
    migrated = path.with_name(f".{path.name}.0123456789ab.migrate.json")  # what a killed gpuperf migrate leaves
    migrated.write_text(path.read_text()[:40])
    code = main(["check", str(store.root)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.splitlines() == [
        *(
            f"NOTE {leftover} is a temporary file left by an interrupted write; nothing reads it, delete it once no "
            "pytest or gpuperf run is writing here"
            for leftover in sorted([tmp, migrated])
        ),
        f"{store.root}: 1 file(s) checked (baselines: 1): all valid",
    ]


@pytest.mark.parametrize("name", ["notes.tmp", ".m.json.tmp", ".m.json.xyz.tmp", "m.json.0123456789ab.tmp"])
def test_other_files_are_still_problems(store: BaselineStore, capsys: pytest.CaptureFixture[str], name: str) -> None:
    (store.root / KEY / name).write_text("{")
    assert main(["check", str(store.root)]) == 1
    assert f"ERROR {store.root / KEY / name} is not a JSON file" in capsys.readouterr().out


def test_the_readers_pass_leftovers_by(store: BaselineStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A killed gpuperf migrate leaves a complete copy named *.json: it is no baseline file."""
    path = store.path_for(KEY, MODULE)
    copy = path.with_name(f".{path.name}.0123456789ab.migrate.json")
    copy.write_text(path.read_text())
    assert list(store.files()) == [path]
    assert list(load_folder(store.root)) == [f"{KEY}/{path.name}"]
    assert main(["list", str(store.root)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == f"{store.root}: 1 device(s), 1 file(s), 1 entries"
    ids = tmp_path / "ids.txt"
    ids.write_text(f"{MODULE}::test_a\n")
    assert main(["prune", str(store.root), "--node-ids", str(ids)]) == 0
    assert copy.exists() and BaselineFile.read(path) is not None
