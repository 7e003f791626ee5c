"""``gpuperf margins``: margins derived from saved reports by the rule, a margins file shown,
checked and updated (pytest_gpuperf/_store/margins.py). Reports are written here, no GPU needed."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_gpuperf._cli.main import main
from pytest_gpuperf._store.margins import RULE, Gpu, MarginsFile, margin_rule, run_id
from pytest_gpuperf._store.schema_versions import REPORT_SCHEMA

TEST = "tests/fam/test_perf.py::test_fast_vs_slow[big]"
H100 = {"name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "key": "nvidia-h100-sm90"}
H200 = {"name": "NVIDIA H200", "compute_capability": "9.0", "key": "nvidia-h200-sm90"}
A100 = {"name": "NVIDIA A100-SXM4-80GB", "compute_capability": "8.0", "key": "nvidia-a100-sm80"}


def report(path: Path, device: dict[str, str], low: float, *, commit: str | None = "0123456789abcdef",
           created: str = "2026-11-25T12:00:00+00:00", figure: float | None = None) -> Path:
    """A saved report with one interleaved comparison (fast vs slow) whose interval starts at ``low``."""
    measurement = {"name": "fast", "median_s": 1e-5, "ci_low_s": 0.9e-5, "ci_high_s": 1.1e-5, "confidence": 0.99}
    test: dict[str, Any] = {
        "nodeid": TEST, "outcome": "passed",
        "measurements": [{"measurement": measurement, "verdict": "measured", "regression": None, "device": device["key"]}],
        "comparisons": [{"fast": "fast", "baseline": "slow", "speedup": low + 0.01, "ci_low": low, "ci_high": low + 0.02,
                         "confidence": 0.9975, "at_least": None, "verdict": "measured"}],
        "figures": [] if figure is None else [{"key": "bandwidth_fraction", "value": figure, "unit": ""}],
    }
    data: dict[str, Any] = {"schema": REPORT_SCHEMA, "created": created, "devices": {device["key"]: device}, "tests": [test],
                            "skipped": [], "baseline_changes": [], "summary": {}}
    if commit:
        data["provenance"] = {"commit": commit, "dirty": False}
    path.write_text(json.dumps(data))
    return path


def margins_file(path: Path, **entry: Any) -> Path:
    """A margins file with one entry for TEST, not yet measured."""
    e = {"test": TEST, "fast": "fast", "baseline": "slow", "value": None, **entry}
    path.write_text(json.dumps({"schema": "pytest-gpuperf/margins/1", "family": "fam", "runs": {},
                                "margins": {"sm_90": {"fast_vs_slow/big": e}}}))
    return path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_rule_keeps_five_percent_below_the_lowest_and_rounds_down() -> None:
    assert margin_rule(1.0) == 0.95
    assert margin_rule(1.0526316) == 1.0  # 100 * 0.95 * 1.0526316 = 99.999..., not 99.99 rounded down
    assert margin_rule(0.9032) == 0.85
    assert margin_rule(4.0383) == 3.83


def test_reports_alone_give_each_comparisons_margin(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = report(tmp_path / "a.json", H100, 1.20)
    b = report(tmp_path / "b.json", H200, 1.10, commit=None)
    code, out, _ = run(capsys, "margins", str(a), str(b))
    assert code == 0
    (row,) = [line for line in out.splitlines() if TEST in line]
    assert "1.04" in row and "NVIDIA H200" in row  # floor(95 * 1.10) / 100, from the lower of the two
    assert "over 2 report(s)" in out


def test_a_file_is_derived_from_the_lowest_interval_and_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = margins_file(tmp_path / "margins.json")
    a = report(tmp_path / "a.json", H100, 1.20, commit="aaaaaaaaaa")
    b = report(tmp_path / "b.json", H200, 1.10, commit="bbbbbbbbbb", created="2026-11-26T01:02:00+00:00")
    code, out, _ = run(capsys, "margins", str(a), str(b), "--file", str(path), "--write")
    assert code == 0 and "1 entry derived from 2 report(s), 1 changed; written to" in out
    m = MarginsFile.read(path)
    e = m.entries["sm_90"]["fast_vs_slow/big"]
    assert e.value == 1.04 and e.rule == RULE
    assert e.evidence is not None
    assert (e.evidence.gpu.name, e.evidence.date, e.evidence.commit, e.evidence.ci_low) == ("NVIDIA H200", "2026-11-26", "bbbbbbbbbb", 1.1)
    assert e.over == ("2026-11-25-h100-aaaaaaa", "2026-11-26-h200-bbbbbbb") and e.evidence.run == e.over[1]
    assert m.problems() == []
    assert m.runs[e.over[0]].report is not None and m.runs[e.over[0]].report.endswith("a.json")
    # Shown alone, the file is a table and checks clean.
    code, out, _ = run(capsys, "margins", "--file", str(path))
    assert code == 0 and "fast_vs_slow/big" in out and "faster by 4% or more" in out


def test_the_recorded_evidence_counts_unless_reset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = margins_file(tmp_path / "margins.json")
    run(capsys, "margins", str(report(tmp_path / "low.json", H100, 1.10)), "--file", str(path), "--write")
    higher = report(tmp_path / "high.json", H200, 1.50)
    code, out, _ = run(capsys, "margins", str(higher), "--file", str(path), "--write")
    assert code == 0 and ", 0 changed;" in out
    e = MarginsFile.read(path).entries["sm_90"]["fast_vs_slow/big"]
    assert e.value == 1.04 and len(e.over) == 2  # the lower interval recorded before still sets it
    run(capsys, "margins", str(higher), "--file", str(path), "--write", "--reset")
    m = MarginsFile.read(path)
    assert m.entries["sm_90"]["fast_vs_slow/big"].value == margin_rule(1.50) and len(m.runs) == 1


def test_only_updates_the_matching_entries(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = margins_file(tmp_path / "margins.json")
    code, out, _ = run(capsys, "margins", str(report(tmp_path / "a.json", H100, 1.2)), "--file", str(path),
                       "--only", "other_*", "--write")
    assert code == 0 and "no entry of the file was measured" in out
    assert MarginsFile.read(path).entries["sm_90"]["fast_vs_slow/big"].value is None


def test_another_architectures_run_is_not_taken(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = margins_file(tmp_path / "margins.json")
    run(capsys, "margins", str(report(tmp_path / "a.json", A100, 0.5)), "--file", str(path), "--write")
    assert MarginsFile.read(path).entries["sm_90"]["fast_vs_slow/big"].value is None


def test_a_figure_floor_takes_the_lowest_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "margins.json"
    path.write_text(json.dumps({"schema": "pytest-gpuperf/margins/1", "family": "fam", "runs": {}, "margins": {"sm_90": {
        "bandwidth/big": {"test": TEST, "figure": "bandwidth_fraction", "value": None}}}}))
    a = report(tmp_path / "a.json", H100, 1.2, figure=0.91)
    b = report(tmp_path / "b.json", H200, 1.2, figure=0.836)
    assert run(capsys, "margins", str(a), str(b), "--file", str(path), "--write")[0] == 0
    m = MarginsFile.read(path)
    assert m.table(figure="bandwidth_fraction") == {"sm_90": {"bandwidth/big": 0.79}}
    assert m.table() == {"sm_90": {}} and m.problems() == []


def test_a_run_without_a_commit_is_named_by_its_time_and_flagged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = margins_file(tmp_path / "margins.json")
    a = report(tmp_path / "a.json", H200, 1.2, commit=None, created="2026-11-22T00:13:54+00:00")
    code, out, _ = run(capsys, "margins", str(a), "--file", str(path), "--write")
    assert code == 0 and "no commit recorded in" in out and "--commit SHA" in out
    m = MarginsFile.read(path)
    assert list(m.runs) == ["2026-11-22-h200-0013"]
    assert any("a commit" in p for p in m.problems())
    run(capsys, "margins", str(a), "--file", str(path), "--write", "--reset", "--commit", "cccccccccc")
    m = MarginsFile.read(path)
    assert list(m.runs) == ["2026-11-22-h200-ccccccc"] and m.problems() == []


def test_a_hand_edited_margin_fails_the_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = margins_file(tmp_path / "margins.json")
    run(capsys, "margins", str(report(tmp_path / "a.json", H100, 1.2)), "--file", str(path), "--write")
    data = json.loads(path.read_text())
    data["margins"]["sm_90"]["fast_vs_slow/big"]["value"] = 1.2
    path.write_text(json.dumps(data))
    code, out, _ = run(capsys, "margins", "--file", str(path))
    assert code == 1 and "ERROR" in out and "margin 1.2 but the rule gives 1.14" in out


def test_an_ungated_entry_needs_a_reason(tmp_path: Path) -> None:
    m = MarginsFile.read(margins_file(tmp_path / "margins.json"))
    assert any("no reason" in p for p in m.problems())
    m = MarginsFile.read(margins_file(tmp_path / "margins.json", reason="cuBLAS' time is not stable on this GPU"))
    assert m.problems() == [] and m.ungated() == {"sm_90": {"fast_vs_slow/big": "cuBLAS' time is not stable on this GPU"}}


@pytest.mark.parametrize("args", [["--write"], [], ["--only", "x"]])
def test_arguments_that_do_not_fit_are_usage_errors(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["margins", *args])
    assert exc.value.code == 2


@pytest.mark.parametrize("edit, field", [
    (lambda d: d.update(schema="pytest-gpuperf/margins/0"), "'schema'"),
    (lambda d: d["margins"]["sm_90"]["fast_vs_slow/big"].update(value="1.04"), "'margins.sm_90.fast_vs_slow/big.value'"),
    (lambda d: d["margins"]["sm_90"]["fast_vs_slow/big"].pop("test"), "'margins.sm_90.fast_vs_slow/big.test'"),
    (lambda d: d["margins"]["sm_90"]["fast_vs_slow/big"].update(over="run"), "'margins.sm_90.fast_vs_slow/big.over'"),
])
def test_a_bad_file_is_one_line_naming_the_field(edit: Any, field: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = margins_file(tmp_path / "margins.json")
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    code, out, err = run(capsys, "margins", "--file", str(path))
    assert code == 1 and out == ""
    assert err.startswith("gpuperf: error: margins file ") and field in err and "Traceback" not in err


def test_run_ids_name_the_date_the_model_and_the_commit() -> None:
    assert run_id(Gpu("NVIDIA H100 80GB HBM3", "sm_90"), "2026-11-25T13:19:32+00:00", "1cefded4641f") == "2026-11-25-h100-1cefded"
    assert run_id(Gpu("NVIDIA GeForce RTX 4090", "sm_89"), "2026-11-25T13:19:32+00:00", None) == "2026-11-25-4090-1319"


def test_the_file_is_written_readably_and_reads_back_the_same(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = margins_file(tmp_path / "margins.json")
    run(capsys, "margins", str(report(tmp_path / "a.json", H100, 1.2)), "--file", str(path), "--write")
    text = path.read_text()
    assert '"gpu": {"name": "NVIDIA H100 80GB HBM3", "arch": "sm_90"}' in text
    assert MarginsFile.read(path).dumps() == text


def test_the_compact_spelling_of_an_architecture_is_read_as_nvccs(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A file written before margins were keyed "sm_90" says "sm90": read as "sm_90", written back so."""
    path = margins_file(tmp_path / "margins.json")
    run(capsys, "margins", str(report(tmp_path / "a.json", H100, 1.2)), "--file", str(path), "--write")
    written = path.read_text()
    path.write_text(written.replace('"sm_90"', '"sm90"'))
    m = MarginsFile.read(path)
    assert list(m.entries) == ["sm_90"] and {r.gpu.arch for r in m.runs.values()} == {"sm_90"}
    assert m.table() == {"sm_90": {"fast_vs_slow/big": margin_rule(1.2)}} and m.problems() == []
    assert m.dumps() == written


@pytest.mark.parametrize("edit, field", [
    (lambda d: d["margins"].update(hopper=d["margins"].pop("sm_90")), "'margins.hopper' must be an architecture"),
    (lambda d: d["margins"].update(sm90=d["margins"]["sm_90"]), "'sm90' and another key both name sm_90"),
    (lambda d: next(iter(d["runs"].values()))["gpu"].update(arch="9.0"), ".gpu.arch' must be an architecture"),
])
def test_an_architecture_in_neither_spelling_or_both_is_an_error(edit: Any, field: str, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = margins_file(tmp_path / "margins.json")
    run(capsys, "margins", str(report(tmp_path / "a.json", H100, 1.2)), "--file", str(path), "--write")
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    code, out, err = run(capsys, "margins", "--file", str(path))
    assert code == 1 and out == "" and field in err
