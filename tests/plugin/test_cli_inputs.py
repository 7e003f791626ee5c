"""``gpuperf`` on hostile, misplaced and unrelated input: every case is one error line (or a
result), the right exit status, and no file lost or written where it should not be."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from pytest_gpuperf._store import jsonio
from pytest_gpuperf._store.baselines import BaselineFile, BaselineStore, BaselineEntry
from pytest_gpuperf._cli.main import main
from pytest_gpuperf._store.budgets import BudgetStore, Budget
from pytest_gpuperf._store.files import atomic_write_json
from pytest_gpuperf._store.schema_versions import REPORT_SCHEMA

H200: dict[str, Any] = {"name": "NVIDIA H200", "key": "nvidia-h200-sm90-132sm-140gib", "driver_version": "580.1",
                        "cuda_runtime_version": "13.0", "cupy_version": "14.0"}
A100: dict[str, Any] = {"name": "NVIDIA A100", "key": "nvidia-a100-sm80-108sm-80gib", "driver_version": "580.1",
                        "cuda_runtime_version": "13.0", "cupy_version": "14.0"}
MODULE = "tests/fam/test_perf.py"
ROOT = Path(__file__).resolve().parents[2]


def entry(median: float, halfwidth: float = 0.002) -> BaselineEntry:
    return BaselineEntry(median, median * (1 - halfwidth), median * (1 + halfwidth), 0.99, 100, 0.01, "cold", "graph",
                 "2026-11-21T10:00:00+00:00")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuperf: error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture
def store(tmp_path: Path) -> BaselineStore:
    s = BaselineStore(tmp_path / "baselines")
    s.update(H200["key"], MODULE, H200, {"test_a[x]::fast": entry(10e-6), "test_a[x]::slow": entry(20e-6)})
    s.update(A100["key"], MODULE, A100, {"test_a[x]::fast": entry(15e-6), "test_a[x]::slow": entry(20.04e-6)})
    return s


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def minimal_report(**extra: Any) -> dict[str, Any]:
    measurement = {"name": "k", "median_s": 1e-5, "ci_low_s": 0.9e-5, "ci_high_s": 1.1e-5, "confidence": 0.99}
    test = {"nodeid": "tests/fam/test_perf.py::test_a[x]", "outcome": "passed",
            "measurements": [{"measurement": measurement, "verdict": "measured", "regression": None}],
            "comparisons": [], "figures": [{"key": "bandwidth_fraction", "value": 0.5, "unit": ""}]}
    return {"schema": REPORT_SCHEMA, "created": "2026-11-22T00:00:00+00:00", "devices": {}, "tests": [test],
            "skipped": [], "baseline_changes": [], "summary": {"baseline measured": 1}, **extra}


# -- reading reports --------------------------------------------------------------------------
def test_a_gzip_bomb_stops_at_the_cap(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonio, "MAX_JSON_BYTES", 1024 * 1024)
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b"[" + b" " * (8 * 1024 * 1024) + b"]"))
    assert bomb.stat().st_size < 64 * 1024
    code, out, err = run(capsys, "report", str(bomb))
    assert code == 1 and out == ""
    assert one_error_line(err) == (
        f"gpuperf: error: report file {bomb} is larger than 1 MiB decompressed; it is not a file pytest-gpuperf wrote "
        "(raise pytest_gpuperf._store.jsonio.MAX_JSON_BYTES to read it anyway)"
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (bytes(range(256)), "is binary (it holds NUL bytes), not a JSON text"),
        (b'{"schema": "\xe9t\xe9"}', "is not UTF-8 text (byte 0xe9 at offset 12)"),
        (b"[" * 100_000 + b"]" * 100_000, "nests arrays or objects too deeply to read"),
        (b'{"schema": "pytest-gpuperf/report/1", "tests": [], "n": ' + b"9" * 5000 + b"}", "holds a number too long to read"),
    ],
    ids=["binary", "latin-1", "deep", "digits"],
)
def test_unreadable_reports_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes,
                                         message: str) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(content)
    code, out, err = run(capsys, "report", str(path))
    assert code == 1 and out == ""
    assert one_error_line(err).startswith(f"gpuperf: error: report file {path} {message}")


def test_unrelated_json_is_not_called_another_version(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "package.json"
    path.write_text('{"name": "x", "version": "1.0.0"}')
    code, _, err = run(capsys, "report", str(path))
    line = one_error_line(err)
    assert code == 1 and f"{path} is not a pytest-gpuperf report (no 'schema' field)" in line
    assert "version" not in line.split("(no 'schema' field)")[1].split(";")[0]
    path.write_text("[1, 2]")
    code, _, err = run(capsys, "report", str(path))
    assert code == 1 and "is not a pytest-gpuperf report (a JSON array, not an object with a 'schema' field)" in err


def test_another_schema_version_and_another_kind_say_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(minimal_report(schema="pytest-gpuperf/report/2")))
    code, _, err = run(capsys, "report", str(path))
    assert code == 1 and "written by another schema version, pytest-gpuperf/report/2" in one_error_line(err)
    path.write_text(json.dumps({"schema": "pytest-gpuperf/baselines/1", "device": {}, "entries": {}}))
    code, _, err = run(capsys, "report", str(path))
    assert code == 1 and "(a pytest-gpuperf baselines file, not a report file)" in one_error_line(err)


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(doc: dict[str, Any]) -> None:
        keys = [int(k) if k.isdigit() else k for k in path.split(".")]
        target: Any = doc
        for k in keys[:-1]:
            target = target[k]
        target[keys[-1]] = value

    return apply


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (_set("summary", [1, 2]), "field 'summary' must be an object or null, got [1, 2]"),
        (_set("devices", {"k": "H200"}), "field 'devices.k' must be an object, got 'H200'"),
        (_set("settings", "cold"), "field 'settings' must be an object or null, got 'cold'"),
        (_set("tests.0.figures.0.unit", {"u": 1}), "field 'tests[0].figures[0].unit' must be a string or null"),
        (_set("tests.0.counters", [{"derived": {"x": "fast"}}]), "field 'tests[0].counters[0].derived.x' must be a finite number or null"),
        (_set("tests.0.measurements.0.measurement.median_s", 10**400), "field 'tests[0].measurements[0].measurement.median_s' must be a finite number, got 1000"),
        (_set("tests.0.measurements.0.measurement.confidence", "high"), "field 'tests[0].measurements[0].measurement.confidence' must be a finite number or null"),
        (_set("tests.0.outcome", ["passed"]), "field 'tests[0].outcome' must be a string or null"),
        (_set("notes", "one"), "field 'notes' must be a list, got 'one'"),
    ],
)
def test_wrong_types_name_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    mutate: Callable[[dict[str, Any]], None], message: str) -> None:
    doc = minimal_report()
    mutate(doc)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    code, out, err = run(capsys, "report", str(path))
    assert code == 1 and out == ""
    assert f"gpuperf: error: report file {path}: {message}" in one_error_line(err)


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_tokens_are_refused_where_numbers_are_read(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              token: str) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(minimal_report()).replace('"median_s": 1e-05', f'"median_s": {token}'))
    code, _, err = run(capsys, "report", str(path))
    assert code == 1 and "measurement.median_s' must be a finite number, got " in one_error_line(err)


def test_extreme_but_finite_numbers_render(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = minimal_report(baseline_changes=[{"key": "k", "old_median_s": 5e-324, "new_median_s": 1e308}])
    _set("tests.0.measurements.0.measurement.median_s", 1e308)(doc)
    _set("tests.0.measurements.0.measurement.ci_high_s", 1e308)(doc)
    _set("tests.0.measurements.0.regression", {"slowdown": 10**300})(doc)
    _set("tests.0.figures.0.value", None)(doc)
    _set("tests.0.measurements.0.kind", "comparison")(doc)  # a stray key must not change the record's kind
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    code, out, err = run(capsys, "report", str(path), "--text")
    assert (code, err) == (0, "")
    assert "1e+308 s" in out and "+inf%" in out
    assert any(line.split()[:2] == ["test_a[x]", "bandwidth_fraction"] and line.split()[2] == "-" for line in out.splitlines())


# -- non-finite numbers are never written ----------------------------------------------------
def test_atomic_write_json_writes_null_and_a_note(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    atomic_write_json(path, {"a": [1.0, float("nan")], "b": {"c": float("-inf")}, "notes": ["kept"]})
    text = path.read_text()
    data = json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} written into JSON"))
    assert data["a"] == [1.0, None] and data["b"] == {"c": None}
    assert data["notes"] == ["kept", "a[1]: nan is not a JSON number; written as null",
                             "b.c: -inf is not a JSON number; written as null"]


def test_a_baseline_extra_that_is_nan_is_written_as_null(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    e = BaselineEntry(1e-5, 0.9e-5, 1.1e-5, 0.99, 50, 0.01, "cold", "graph", "2026-11-21T10:00:00+00:00", {"flops": float("nan")})
    store.update(H200["key"], MODULE, H200, {"t::v": e})
    path = store.path_for(H200["key"], MODULE)
    data = json.loads(path.read_text(), parse_constant=lambda name: pytest.fail(f"{name} written into JSON"))
    assert data["entries"]["t::v"]["flops"] is None
    assert data["notes"] == ["entries.t::v.flops: nan is not a JSON number; written as null"]
    f = BaselineFile.read(path)
    assert f is not None and f.entries["t::v"].median_s == 1e-5, "the file still reads"


NAN_FIGURE_TEST = """
from pytest_gpuperf import Variant

def test_k(gpu_perf):
    gpu_perf.measure(Variant("k", lambda: None))
    gpu_perf.record("bandwidth_fraction", float("nan"))
"""


def test_the_json_report_holds_null_and_a_note_for_nan(pytester: pytest.Pytester, fake_gpu: Callable[..., None],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    fake_gpu(times={"k": 10e-6})
    pytester.makepyfile(test_perf=NAN_FIGURE_TEST)
    pytester.runpytest("--gpu-perf", "--gpu-perf-json=report.json").assert_outcomes(passed=1)
    capsys.readouterr()
    text = (pytester.path / "report.json").read_text()
    data = json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} written into the report"))
    assert data["tests"][0]["figures"][0]["value"] is None
    assert data["notes"] == ["tests[0].figures[0].value: nan is not a JSON number; written as null"]
    code, out, err = run(capsys, "report", str(pytester.path / "report.json"))
    assert code == 0 and err == ""
    assert "| test_k | bandwidth_fraction | - |" in out
    assert "- tests[0].figures[0].value: nan is not a JSON number; written as null" in out


# -- wrong-level folders, binary baselines -----------------------------------------------------
def test_list_of_a_device_folder_points_to_its_parent(store: BaselineStore, capsys: pytest.CaptureFixture[str]) -> None:
    device = store.root / H200["key"]
    code, out, err = run(capsys, "list", str(device))
    assert code == 1 and out == ""
    assert one_error_line(err) == (f"gpuperf: error: {device} looks like a device folder (it holds baseline files "
                                   f"directly); pass its parent, the baselines folder: {store.root}")


def test_list_of_the_static_folder_and_of_the_project_root(store: BaselineStore, capsys: pytest.CaptureFixture[str]) -> None:
    BudgetStore(store.root).update("fam", "fam", "sm_90", {"k": Budget(32, 0, 0, 0, 0)}, "nvcc 13.0")
    code, _, err = run(capsys, "list", str(store.root / "static"))
    assert code == 1 and "looks like the compile-time budgets folder (static/); pass its parent" in one_error_line(err)
    code, _, err = run(capsys, "list", str(store.root.parent))
    assert code == 1 and f"holds no baseline files itself, but {store.root} does; pass that folder" in one_error_line(err)
    code, out, _ = run(capsys, "list", str(store.root))
    assert code == 0 and out.startswith(f"{store.root}: 2 device(s), 2 file(s), 4 entries")


def test_binary_baseline_files_are_errors(store: BaselineStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = store.root / H200["key"] / "tests.other.test_perf.json"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    code, out, _ = run(capsys, "list", str(store.root))
    assert code == 1 and f"ERROR baseline file {bad} is binary (it holds NUL bytes), not a JSON text" in out
    code, _, err = run(capsys, "diff", str(store.root), str(store.root))
    assert code == 1 and f"baseline file {bad} is binary" in one_error_line(err)


# -- diff ------------------------------------------------------------------------------------
def test_diff_of_two_device_files_pairs_them_by_module(store: BaselineStore, capsys: pytest.CaptureFixture[str]) -> None:
    a100 = store.root / A100["key"] / "tests.fam.test_perf.json"
    h200 = store.root / H200["key"] / "tests.fam.test_perf.json"
    code, out, _ = run(capsys, "diff", str(a100), str(h200))
    assert code == 0
    assert out.splitlines()[0] == "2 baseline entries compared: 1 faster, 1 within tolerance."
    assert f"- device software changed: `devices`: key {A100['key']} -> {H200['key']}, name NVIDIA A100 -> NVIDIA H200" in out
    assert "added" not in out and "removed" not in out
    code, out2, _ = run(capsys, "diff", str(a100.parent), str(h200.parent))
    assert code == 0 and out2.splitlines()[0] == out.splitlines()[0], "two device folders pair the same way"


def test_diff_refuses_two_sides_of_different_levels(store: BaselineStore, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["diff", str(store.root / H200["key"]), str(store.root)])
    assert info.value.code == 2
    assert "is a device folder but" in capsys.readouterr().err


def test_diff_judges_with_the_gate_thresholds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """0.2% slower with tight intervals: the gate passes it, so diff must not call it slower; 7%
    slower with a wide interval is past the raw-time threshold (5%) but not established: inconclusive."""
    old, new = BaselineStore(tmp_path / "old"), BaselineStore(tmp_path / "new")
    old.update(H200["key"], MODULE, H200, {"t::tiny": entry(20e-6, 0.0005), "t::big": entry(10e-6), "t::edge": entry(10e-6)})
    new.update(H200["key"], MODULE, H200, {"t::tiny": entry(20.04e-6, 0.0005), "t::big": entry(11e-6),
                                           "t::edge": entry(10.7e-6, 0.05)})
    code, out, _ = run(capsys, "diff", str(old.root), str(new.root))
    assert code == 0
    rows = {line.split(" | ")[1]: line.split(" | ")[-1].strip(" |") for line in out.splitlines() if line.startswith("| nvidia")}
    assert rows == {"t::big": "slower", "t::edge": "inconclusive", "t::tiny": "within tolerance"}
    assert "Judged as the regression gate judges a run against its baseline (tolerance 5%, machine noise 5%" in out
    code, out, _ = run(capsys, "diff", "--tolerance", "0.001", "--machine-noise", "0", str(old.root), str(new.root))
    rows = {line.split(" | ")[1]: line.split(" | ")[-1].strip(" |") for line in out.splitlines() if line.startswith("| nvidia")}
    assert rows["t::tiny"] == "slower", "the same options as the gate"
    with pytest.raises(SystemExit) as info:
        main(["diff", "--tolerance", "2", str(old.root), str(new.root)])
    assert info.value.code == 2 and "expected a number between 0 and 1" in capsys.readouterr().err


def test_diff_of_the_extreme_stored_times_and_past_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The reader bounds a stored time to [1e-7 s, 1e3 s], so a ratio of two is always finite;
    1e-300 s against 1e300 s is refused, naming the file and the field."""
    old, new = BaselineStore(tmp_path / "old"), BaselineStore(tmp_path / "new")
    old.update(H200["key"], MODULE, H200, {"t::k": entry(1.1e-7)})
    new.update(H200["key"], MODULE, H200, {"t::k": entry(990.0)})
    code, out, err = run(capsys, "diff", str(old.root), str(new.root))
    assert (code, err) == (0, "") and "| 110 ns | 990 s | +899999999900.0% | slower |" in out
    new.update(H200["key"], MODULE, H200, {"t::k": entry(1e300)})
    code, out, err = run(capsys, "diff", str(old.root), str(new.root))
    assert code == 1 and out == ""
    assert "field 'entries.t::k.median_s' must be a time per launch from 1e-07 s to 1000 s, got 1e+300" in one_error_line(err)


# -- prune -----------------------------------------------------------------------------------
def test_prune_keep_tests_from_cannot_swallow_the_folder(store: BaselineStore, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The old nargs='+' took ``tests/b`` and the folder after it as test paths and pruned ./baselines."""
    monkeypatch.chdir(store.root.parent)
    tests = store.root.parent / "tests"
    (tests / "a").mkdir(parents=True)
    (tests / "b").mkdir()
    before = snapshot(store.root)
    code, out, err = run(capsys, "prune", "--keep-tests-from", "tests/a", "tests/b")
    assert code == 1 and out == ""
    assert one_error_line(err) == "gpuperf: error: tests/b holds no baseline files (<device key>/<module>.json); nothing was pruned"
    assert snapshot(store.root) == before


def test_prune_keeps_entries_whose_variant_or_test_id_holds_double_colons(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    store = BaselineStore(tmp_path / "baselines")
    store.update(H200["key"], MODULE, H200, {
        "test_a[x]::ns::kernel": entry(1e-6),  # a variant named 'ns::kernel'
        "TestK::test_m[a::b]::v": entry(1e-6),  # a class test whose parameter holds '::'
        "test_a[y]::ns::kernel": entry(1e-6),  # gone: test_a[y] is not collected
        "test_a::v": entry(1e-6),  # gone: only a prefix of test_a[x]
    })
    ids = tmp_path / "ids.txt"
    ids.write_text("tests/fam/test_perf.py::test_a[x]\ntests/fam/test_perf.py::TestK::test_m[a::b]\n")
    code, out, _ = run(capsys, "prune", str(store.root), "--node-ids", str(ids))
    assert code == 0, out
    f = BaselineFile.read(store.path_for(H200["key"], MODULE))
    assert f is not None and set(f.entries) == {"test_a[x]::ns::kernel", "TestK::test_m[a::b]::v"}
    assert out.splitlines()[-1] == f"2 stale entries removed from 1 file(s) under {store.root}"


def test_prune_takes_keep_tests_from_once_per_path(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_one="def test_k():\n    pass\n", test_two="def test_k():\n    pass\n",
                        test_three="def test_k():\n    pass\n")
    store = BaselineStore(pytester.path / "baselines")
    for name in ("test_one.py", "test_two.py", "test_three.py"):
        store.update(H200["key"], name, H200, {"test_k::v": entry(1e-6), "test_gone::v": entry(1e-6)})
    code, out, _ = run(capsys, "prune", "--keep-tests-from", "test_one.py", "--keep-tests-from", "test_two.py")
    assert code == 0, out
    assert out.splitlines()[-1] == "2 stale entries removed from 2 file(s) under baselines"
    three = BaselineFile.read(store.root / H200["key"] / "test_three.json")
    assert three is not None and set(three.entries) == {"test_k::v", "test_gone::v"}, "modules not collected are left alone"


def test_prune_of_a_device_folder_is_refused(store: BaselineStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = tmp_path / "ids.txt"
    ids.write_text("tests/other/test_perf.py::test_z\n")
    before = snapshot(store.root)
    code, _, err = run(capsys, "prune", str(store.root / H200["key"]), "--node-ids", str(ids))
    assert code == 1 and "looks like a device folder" in one_error_line(err)
    assert snapshot(store.root) == before


# -- check -----------------------------------------------------------------------------------
def test_check_passes_the_committed_baselines(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "check", str(ROOT / "baselines"))
    assert code == 0, out
    assert out.strip().endswith("all valid") and "baselines" in out and "static-budgets" in out


def test_check_finds_what_list_let_through(store: BaselineStore, capsys: pytest.CaptureFixture[str]) -> None:
    """Files a refresh artifact could carry: ``gpuperf list`` passed four of these five."""
    root = store.root
    BudgetStore(root).update("fam", "fam", "sm_90", {"k": Budget(32, 0, 0, 0, 0)}, "nvcc 13.0")
    good = (root / H200["key"] / "tests.fam.test_perf.json").read_text()
    (root / "stray.json").write_text(good)  # a baseline beside the device folders
    (root / H200["key"] / "deeper").mkdir()
    (root / H200["key"] / "deeper" / "tests.fam.test_perf.json").write_text(good)  # nested too deep
    (root / "static" / "tests.fam.test_perf.json").write_text(good)  # a baseline among the budgets
    budget = json.loads((root / "static" / "fam.json").read_text())
    budget["modules"]["fam"]["sm_90"]["kernels"]["k"]["registers"] = "many"
    (root / "static" / "fam.json").write_text(json.dumps(budget))  # a bad budget
    (root / "nvidia-b200-sm100-148sm-180gib").mkdir()
    (root / "nvidia-b200-sm100-148sm-180gib" / "tests.fam.test_perf.json").write_text(good)  # key of another folder
    code, out, _ = run(capsys, "list", str(root))
    assert code == 0, "list does not look at these"
    code, out, _ = run(capsys, "check", str(root))
    assert code == 1
    problems = [line for line in out.splitlines() if line.startswith("ERROR ")]
    assert len(problems) == 5, out
    text = "\n".join(problems)
    assert f"{root / 'stray.json'} is a baseline file in the wrong place" in text
    assert f"{root / H200['key'] / 'deeper' / 'tests.fam.test_perf.json'} is a baseline file in the wrong place" in text
    assert f"{root / 'static' / 'tests.fam.test_perf.json'} is a baseline file in the wrong place" in text
    assert f"static budget file {root / 'static' / 'fam.json'}: field 'modules.fam.sm_90.kernels.k.registers'" in text
    assert f"field 'device.key' is '{H200['key']}' but the file lies in folder 'nvidia-b200-sm100-148sm-180gib'" in text
    assert out.splitlines()[-1].endswith(": 5 problem(s)")


def test_check_validates_reports_and_flags_strangers(store: BaselineStore, capsys: pytest.CaptureFixture[str]) -> None:
    root = store.root
    (root / "report.json.gz").write_bytes(gzip.compress(json.dumps(minimal_report()).encode()))
    code, out, _ = run(capsys, "check", str(root))
    assert code == 0 and out.splitlines()[-1].endswith("(baselines: 2, report: 1): all valid")
    (root / "bad-report.json").write_text(json.dumps(minimal_report(summary="many")))
    (root / "notes.txt").write_text("hello")
    (root / "package.json").write_text("{}")
    (root / "blob.json").write_bytes(b"\x00\x01")
    os.symlink("/etc/passwd", root / H200["key"] / "link.json")
    (root / H200["key"] / "x.json.lock").write_text("")  # filelock's, ignored
    code, out, _ = run(capsys, "check", str(root))
    assert code == 1
    problems = [line for line in out.splitlines() if line.startswith("ERROR ")]
    order = ["bad-report.json", "blob.json", "notes.txt", "package.json", f"{H200['key']}/link.json"]
    assert len(problems) == len(order) and all(str(root / name) in p for name, p in zip(order, problems)), out
    assert f"report file {root / 'bad-report.json'}: field 'summary' must be an object or null" in problems[0]
    assert "is binary" in problems[1] and "is not a JSON file" in problems[2]
    assert "is not a pytest-gpuperf file (no pytest-gpuperf 'schema' field" in problems[3]
    assert "is a symbolic link" in problems[4]


def test_check_of_a_device_folder_or_an_empty_one(store: BaselineStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "check", str(store.root / H200["key"]))
    assert code == 1 and "looks like a device folder" in out
    (tmp_path / "empty").mkdir()
    code, out, _ = run(capsys, "check", str(tmp_path / "empty"))
    assert code == 1 and "holds no files" in out
    code, _, err = run(capsys, "check", str(tmp_path / "none"))
    assert code == 1 and "is not a folder" in one_error_line(err)


# -- --version, and the installed command ------------------------------------------------------
def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out == f"gpuperf {version('pytest-gpuperf')}\n"


def test_version_without_installed_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    import pytest_gpuperf
    from pytest_gpuperf._cli.main import version

    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert version() == pytest_gpuperf.__version__


def test_check_flags_a_compressed_baseline(store: BaselineStore, capsys: pytest.CaptureFixture[str]) -> None:
    path = store.root / H200["key"] / "tests.fam.test_perf.json"
    packed = path.with_name(path.name + ".gz")
    packed.write_bytes(gzip.compress(path.read_bytes()))
    code, out, _ = run(capsys, "check", str(store.root))
    assert code == 1 and f"ERROR {packed} is a compressed baselines file; the plugin reads only plain .json files here" in out


def test_the_command_in_a_subprocess_gives_no_traceback(tmp_path: Path) -> None:
    """The entry point end to end: binary input, exit status 1, one line on stderr."""
    path = tmp_path / "r.json.gz"
    path.write_bytes(os.urandom(64))
    exe = shutil.which("gpuperf", path=str(Path(sys.executable).parent)) or shutil.which("gpuperf")
    # a script installed from another checkout of the package may name an entry point this one moved
    cmd = [exe] if exe and _installed_from_here() else [sys.executable, "-m", "pytest_gpuperf"]
    proc = subprocess.run([*cmd, "report", str(path)], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith(f"gpuperf: error: report file {path} ") and proc.stderr.count("\n") == 1


def _installed_from_here() -> bool:
    """Whether the installed ``gpuperf`` script runs the entry point this checkout's pyproject.toml names."""
    import importlib.metadata

    try:
        import tomllib
    except ImportError:  # Python 3.10: trust the installed script
        return True
    wanted = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())["project"]["scripts"]
    found = {e.name: e.value for e in importlib.metadata.entry_points(group="console_scripts")}
    return found.get("gpuperf") == wanted["gpuperf"]
