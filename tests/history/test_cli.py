"""``gpuperf history`` end to end on generated histories and real reports (CPU only)."""
from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pytest_gpuperf._cli.main import main
from tests.history.conftest import H100, KEY, commit_of, device, noisy, report, write_history

ROOT = Path(__file__).resolve().parents[2]
EVIDENCE = ROOT / "evidence"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _history(home: Path, values: np.ndarray, **kwargs) -> tuple[Path, list[Path]]:
    paths = write_history(home / "reports", values, **kwargs)
    return home / "history.sqlite", paths


# -- ingest ---------------------------------------------------------------------------------
def test_ingest_is_idempotent_for_copies_gzip_and_folders(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db, paths = _history(home, noisy(4, 1))
    code, out, _ = run(capsys, "history", "--db", str(db), "ingest", *map(str, paths[:2]))
    assert code == 0 and out.count("ingested ") == 2 and "2 run(s) added, 0 already" in out
    assert f"run of {commit_of(0)[:12]} at 2026-01-01T12:00:00+00:00, 1 measurements" in out
    gz = home / "copy.json.gz"
    gz.write_bytes(gzip.compress(paths[0].read_bytes()))
    code, out, _ = run(capsys, "history", "--db", str(db), "ingest", str(gz), str(paths[2]), str(paths[2]))
    assert code == 0
    assert f"unchanged {gz}: already in the history (from {paths[0]}" in out
    assert f"unchanged {paths[2]}: the same report as {paths[2]}" in out
    assert "1 run(s) added, 2 already" in out
    artifact = home / "artifact" / "gpu-perf-sm90"
    artifact.mkdir(parents=True)
    shutil.copy(paths[3], artifact / "gpu-perf-report.json")
    (artifact / "benchmark.json").write_text('{"benchmarks": []}')
    code, out, _ = run(capsys, "history", "--db", str(db), "ingest", str(home / "artifact"))
    assert code == 0 and f"passed over {artifact / 'benchmark.json'}: not a pytest-gpuperf report" in out
    assert "1 run(s) added" in out
    code, out, _ = run(capsys, "history", "--db", str(db), "ingest", str(home / "artifact"))
    assert "0 run(s) added, 1 already" in out


def test_a_bad_file_is_one_line_and_nothing_is_ingested(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db, paths = _history(home, noisy(2, 1))
    bad = home / "bad.json"
    bad.write_text(json.dumps({"benchmarks": []}))
    code, out, err = run(capsys, "history", "--db", str(db), "ingest", str(paths[0]), str(bad))
    assert code == 1 and out == ""
    assert err.startswith(f"gpuperf: error: {bad} is not a pytest-gpuperf report") and err.count("\n") == 1
    broken = report(0.05, 0)
    broken["tests"][0]["measurements"][0]["measurement"]["median_s"] = "fast"
    bad.write_text(json.dumps(broken))
    code, _, err = run(capsys, "history", "--db", str(db), "ingest", str(paths[1]), str(bad))
    assert code == 1 and "field 'tests[0].measurements[0].measurement.median_s' must be a finite number" in err
    code, _, err = run(capsys, "history", "--db", str(db), "changes")
    assert code == 0  # the database exists, empty: neither ingest wrote a run
    import sqlite3
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 0


def test_a_real_gpu_report_ingests_with_its_environment(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = home / "h.sqlite"
    suite = EVIDENCE / "2026-11-27-h200-b634-suite.json.gz"
    code, out, _ = run(capsys, "history", "--db", str(db), "ingest", str(suite))
    assert code == 0 and "run of 0723de90d404 at 2026-11-27T06:37:29+00:00, 275 measurements" in out
    code, out, _ = run(capsys, "history", "--db", str(db), "show",
                       "test_speedup[dsmem_vs_baseline/linear/one_cluster]::dsmem")
    assert code == 0
    assert "on nvidia-h200-sm90-132sm-140gib: time relative to reference:copy in the same run" in out
    row = next(line for line in out.splitlines() if line.startswith("2026-11-27"))
    assert row.split()[2:5] == ["0723de90d404", "b634f1f1", "0.05657x"], row


def test_the_database_is_refused_in_a_world_writable_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    code, _, err = run(capsys, "history", "--db", str(shared / "h.sqlite"), "ingest", str(EVIDENCE / "2026-11-27-h100-4dfb-aa1.json.gz"))
    assert code == 1 and err.count("\n") == 1 and "writable by every user and lacks the sticky bit" in err


def test_the_default_path_comes_from_the_environment(home: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPU_PERF_HISTORY", str(home / "env.sqlite"))
    _, paths = _history(home, noisy(1, 1))
    assert run(capsys, "history", "ingest", str(paths[0]))[0] == 0
    assert (home / "env.sqlite").exists()


# -- changes --------------------------------------------------------------------------------
def test_a_code_step_is_labelled_code_with_its_commit_range(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    values = noisy(40, 2)
    values[30:] *= 1.05
    db, paths = _history(home, values)
    run(capsys, "history", "--db", str(db), "ingest", *map(str, paths))
    code, out, _ = run(capsys, "history", "--db", str(db), "changes")
    assert code == 0
    line = out.splitlines()[1]
    assert line.startswith("slower +5.") and f"{KEY} on {H100} (ratio to reference:copy): code at 2026-02-03" in line
    assert f"git log {commit_of(29)[:12]}..{commit_of(30)[:12]}" in line and "30 runs before, 10 after" in line
    code, out, _ = run(capsys, "history", "--db", str(db), "changes", "--fail-on", "slower-code")
    assert code == 1
    data = json.loads(run(capsys, "history", "--db", str(db), "changes", "--format", "json")[1])
    (change,) = data["changes"]
    assert change["label"] == "code" and change["direction"] == "slower" and change["low"] < 1.05 < change["high"]
    assert change["commits"] == {"before": commit_of(29), "after": commit_of(30)} and change["position"] == 30
    md = run(capsys, "history", "--db", str(db), "changes", "--format", "markdown")[1]
    assert "| slower +5." in md and "| **code** | git log" in md
    assert "0 change(s)" in run(capsys, "history", "--db", str(db), "changes", "--since", "2026-02-04")[1]
    assert "1 change(s)" in run(capsys, "history", "--db", str(db), "changes", "--since", commit_of(25)[:8])[1]
    assert "0 change(s)" in run(capsys, "history", "--db", str(db), "changes", "--series", "other::*")[1]


def test_a_driver_update_with_a_step_is_labelled_environment(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    values = noisy(40, 4)
    values[25:] *= 0.94
    devices = [device(driver="580.1" if i < 25 else "590.2", uuid="gpu-a" if i % 2 else "gpu-b") for i in range(40)]
    db, paths = _history(home, values, devices=devices)
    run(capsys, "history", "--db", str(db), "ingest", *map(str, paths))
    code, out, _ = run(capsys, "history", "--db", str(db), "changes", "--fail-on", "slower-code")
    assert code == 0, out
    line = out.splitlines()[1]
    assert line.startswith("faster -6.") and ": environment at" in line and "driver 580.1 -> 590.2" in line


def test_a_step_where_the_runner_was_replaced_is_labelled_environment(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Raw times on another GPU of the same model: no GPU ran on both sides, so the machine may explain it."""
    values = noisy(40, 10)
    values[20:] *= 1.07
    devices = [device(uuid="gpu-a" if i < 20 else "gpu-c") for i in range(40)]
    db, paths = _history(home, values, devices=devices, calibrated=False)
    run(capsys, "history", "--db", str(db), "ingest", *map(str, paths))
    code, out, _ = run(capsys, "history", "--db", str(db), "changes", "--fail-on", "slower-code")
    assert code == 0, out
    assert ": environment at" in out and "GPU gpu-a -> gpu-c (no GPU ran on both sides)" in out


def test_a_step_on_a_fleet_that_rotates_gpus_is_still_code(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    values = noisy(40, 12)
    values[20:] *= 1.07
    devices = [device(uuid=("gpu-a", "gpu-b", "gpu-c")[i % 3]) for i in range(40)]
    db, paths = _history(home, values, devices=devices, calibrated=False)
    run(capsys, "history", "--db", str(db), "ingest", *map(str, paths))
    code, out, _ = run(capsys, "history", "--db", str(db), "changes", "--fail-on", "slower-code")
    assert code == 1 and ": code at" in out, out


def test_a_driver_update_without_a_step_is_no_change(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    devices = [device(driver="580.1" if i < 20 else "590.2") for i in range(40)]
    db, paths = _history(home, noisy(40, 6), devices=devices)
    run(capsys, "history", "--db", str(db), "ingest", *map(str, paths))
    assert run(capsys, "history", "--db", str(db), "changes")[1].startswith("0 change(s) in 1 series")


def test_new_names_only_the_change_the_last_run_brought(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    values = noisy(43, 8)
    values[40:] *= 1.06
    db, paths = _history(home, values)
    run(capsys, "history", "--db", str(db), "ingest", *map(str, paths[:42]))
    code, out, _ = run(capsys, "history", "--db", str(db), "changes", "--new", "--fail-on", "slower-code")
    assert code == 0 and out.startswith("0 change(s)")  # two runs after: not yet a segment
    run(capsys, "history", "--db", str(db), "ingest", str(paths[42]))
    code, out, _ = run(capsys, "history", "--db", str(db), "changes", "--new", "--fail-on", "slower-code")
    assert code == 1 and out.startswith("1 change(s)"), out
    extra = write_history(home / "more", [values[-1]] * 1)
    later = report(float(values[-1]) * 1.001, 43)
    extra[0].write_text(json.dumps(later))
    run(capsys, "history", "--db", str(db), "ingest", str(extra[0]))
    code, out, _ = run(capsys, "history", "--db", str(db), "changes", "--new", "--fail-on", "slower-code")
    assert code == 0 and out.startswith("0 change(s)"), out  # the change is known now
    assert run(capsys, "history", "--db", str(db), "changes", "--fail-on", "slower-code")[0] == 1


def test_contended_and_time_series_are_kept_apart(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = home / "reports"
    folder.mkdir()
    for i in range(6):
        r = report(2e-5, i, calibrated=i >= 3, verdict="contended" if i == 4 else "pass")
        (folder / f"r{i}.json").write_text(json.dumps(r))
    db = home / "h.sqlite"
    out = run(capsys, "history", "--db", str(db), "ingest", str(folder))[1]
    assert "(1 kept out of their series: 1 contended)" in out
    code, out, _ = run(capsys, "history", "--db", str(db), "show", "test_copy[1MiB]")
    assert code == 0
    assert "(time)" not in out and "median time (not calibrated" in out and "time relative to reference:copy" in out
    assert "kept out: contended" in out and "2 of 3 runs on the line" in out and "20 us" in out


# -- show -----------------------------------------------------------------------------------
def test_show_marks_the_change_and_draws_a_plot(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    values = noisy(30, 2)
    values[20:] *= 1.05
    db, paths = _history(home, values)
    run(capsys, "history", "--db", str(db), "ingest", *map(str, paths))
    code, out, _ = run(capsys, "history", "--db", str(db), "show", KEY, "--last", "12", "--plot", str(home / "p.svg"))
    assert code == 0
    lines = out.splitlines()
    mark = next(i for i, line in enumerate(lines) if line.startswith("-- change: slower +"))
    assert "(code)" in lines[mark] and lines[mark + 1].split()[2] == commit_of(20)[:12]
    assert len([line for line in lines if line.startswith("2026-")]) == 12
    assert (home / "p.svg").read_text().lstrip().startswith("<?xml")


def test_show_of_an_unknown_test_and_of_a_missing_database(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "history", "--db", str(home / "none.sqlite"), "show", "x")
    assert code == 1 and "no history database at" in err
    _, paths = _history(home, noisy(1, 1))
    run(capsys, "history", "--db", str(home / "h.sqlite"), "ingest", str(paths[0]))
    code, _, err = run(capsys, "history", "--db", str(home / "h.sqlite"), "show", "test_other")
    assert code == 1 and "no series of 'test_other'" in err


def test_the_command_runs_as_a_module(home: Path) -> None:
    _, paths = _history(home, noisy(1, 1))
    proc = subprocess.run([sys.executable, "-m", "pytest_gpuperf", "history", "--db", str(home / "h.sqlite"), "ingest",
                           str(paths[0])], capture_output=True, text=True, cwd=home, timeout=120,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0 and "1 run(s) added" in proc.stdout, proc.stderr
