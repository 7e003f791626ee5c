"""What the baseline reader refuses besides broken JSON: a key given twice in one object (a JSON
parser keeps the last silently) and values no measurement gives (the bounds docs/schemas.md
states). Each is one line naming the file, the entry and the field, from the reader, from
``gpuperf check`` and in a pytest run; an update never writes such an entry."""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Callable

import pytest

from pytest_gpuperf._cli.main import main
from pytest_gpuperf.errors import BaselineFileError
from pytest_gpuperf._store.baselines import BaselineFile
from pytest_gpuperf._store.reports import ReportFileError, load_report
from pytest_gpuperf._store.schema_versions import REPORT_SCHEMA

KEY = "nvidia-h200-sm90-132sm-140gib"
ENTRY: dict[str, Any] = {"median_s": 1e-5, "ci_low_s": 0.9e-5, "ci_high_s": 1.1e-5, "confidence": 0.99, "n": 40,
                         "spread": 0.01, "mode": "cold", "method": "graph", "recorded_at": "2026-11-21T10:00:00+00:00"}
ESTIMATE = {"log_center": -11.5, "log_se": 0.002, "df": 9}
RESTORE = ". Fix it or restore it from version control; it will not be overwritten."
FIX = (". Fix the file or restore it from version control; to start over for this GPU delete it and run with "
       "--gpu-perf-update-baselines.")


def baseline_text(*entries: tuple[str, dict[str, Any]]) -> str:
    """A baseline file whose entries are written in order, a key given twice included."""
    body = ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in entries)
    return f'{{"schema": "pytest-gpuperf/baselines/1", "device": {{"key": "{KEY}"}}, "entries": {{{body}}}}}'


def write(root: Path, name: str, text: str) -> Path:
    path = root / KEY / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# -- keys given twice --------------------------------------------------------------------------
def test_an_entry_key_given_twice_is_refused_naming_it(tmp_path: Path) -> None:
    """The 100x slower entry first, the fast one last: json.load kept only the last."""
    path = write(tmp_path, "m.json", baseline_text(("t::k", {**ENTRY, "median_s": 1e-3, "ci_high_s": 1.1e-3}),
                                                   ("t::other", ENTRY), ("t::k", ENTRY)))
    with pytest.raises(BaselineFileError) as info:
        BaselineFile.read(path)
    assert str(info.value) == (
        f"baseline file {path}: field 'entries.t::k' appears 2 times in one object, and a JSON reader silently keeps "
        f"only the last; keep the one that is right{RESTORE}"
    )


def test_a_field_given_twice_inside_an_entry_is_named_with_its_entry(tmp_path: Path) -> None:
    text = baseline_text(("t::k", ENTRY)).replace('"median_s": 1e-05,', '"median_s": 1e-05, "median_s": 1e-07,')
    path = write(tmp_path, "m.json", text)
    with pytest.raises(BaselineFileError, match=r"field 'entries\.t::k\.median_s' appears 2 times in one object"):
        BaselineFile.read(path)


def test_a_key_given_twice_in_a_report_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(f'{{"schema": "{REPORT_SCHEMA}", "tests": [{{"nodeid": "a::t", "nodeid": "b::t"}}]}}')
    with pytest.raises(ReportFileError) as info:
        load_report(path)
    assert str(info.value) == (
        f"report file {path}: field 'tests[0].nodeid' appears 2 times in one object, and a JSON reader silently "
        "keeps only the last; keep the one that is right."
    )


def test_the_same_key_in_two_objects_is_no_repeat(tmp_path: Path) -> None:
    path = write(tmp_path, "m.json", baseline_text(("t::a", ENTRY), ("t::b", ENTRY)))
    f = BaselineFile.read(path)
    assert f is not None and set(f.entries) == {"t::a", "t::b"}


# -- values no measurement gives ----------------------------------------------------------------
IMPLAUSIBLE = [
    ({"median_s": 1e300, "ci_high_s": 1e301}, "median_s", "must be a time per launch from 1e-07 s to 1000 s, got 1e+300"),
    ({"median_s": 5e-324, "ci_low_s": 5e-324}, "median_s", "must be a time per launch from 1e-07 s to 1000 s, got 5e-324"),
    ({"ci_high_s": 1001.0}, "ci_high_s", "must be a time per launch from 1e-07 s to 1000 s, got 1001.0"),
    ({"ci_low_s": 1e-5, "ci_high_s": 1e-5}, "", "must have ci_low_s below ci_high_s, got 1e-05 and 1e-05: an interval "
                                                 "of zero width claims a certainty no measurement has"),
    ({"median_s": 2e-5}, "", "must satisfy ci_low_s <= median_s <= ci_high_s"),
    ({"estimate": {**ESTIMATE, "log_se": 0.0}}, "estimate.log_se", "must be a number above 0 and at most 100, got 0.0"),
    ({"estimate": {**ESTIMATE, "log_se": -0.01}}, "estimate.log_se", "must be a number above 0 and at most 100, got -0.01"),
    ({"estimate": {**ESTIMATE, "log_center": 690.0}}, "estimate.log_center", "must be a number from -16.12 to 6.908, got 690.0"),
    ({"estimate": {**ESTIMATE, "df": 0}}, "estimate.df", "must be an integer of 1 or more, got 0"),
    ({"estimate": None}, "estimate", "must be an object with log_center, log_se and df, got None"),
    ({"calibration": {**ESTIMATE, "reference": "reference:copy", "log_center": 0.2, "log_se": 0.0}},
     "calibration.log_se", "must be a number above 0 and at most 100, got 0.0"),
    ({"calibration": {**ESTIMATE, "log_center": 0.2}}, "calibration.reference", "must be a string naming the reference"),
]


@pytest.mark.parametrize(("change", "field", "text"), IMPLAUSIBLE, ids=[f"{f or 'interval'}-{i}" for i, (_, f, _) in enumerate(IMPLAUSIBLE)])
def test_implausible_values_are_refused_naming_entry_and_field(tmp_path: Path, change: dict[str, Any], field: str, text: str) -> None:
    path = write(tmp_path, "m.json", baseline_text(("t::k", {**ENTRY, **change})))
    with pytest.raises(BaselineFileError) as info:
        BaselineFile.read(path)
    where = "entries.t::k" + (f".{field}" if field else "")
    assert str(info.value).startswith(f"baseline file {path}: field {where!r} {text}")
    assert str(info.value).endswith(FIX) and "\n" not in str(info.value)


def test_values_at_the_bounds_are_read(tmp_path: Path) -> None:
    low = {**ENTRY, "median_s": 1e-7, "ci_low_s": 1e-7, "ci_high_s": 1.2e-7, "estimate": {**ESTIMATE, "log_center": -16.1}}
    high = {**ENTRY, "median_s": 999.0, "ci_low_s": 990.0, "ci_high_s": 1000.0,
            "calibration": {**ESTIMATE, "reference": "reference:copy", "log_center": 23.0}}
    f = BaselineFile.read(write(tmp_path, "m.json", baseline_text(("t::low", low), ("t::high", high))))
    assert f is not None and f.entries["t::low"].median_s == 1e-7 and f.entries["t::high"].ci_high_s == 1000.0
    assert f.entries["t::high"].calibration() is not None


def test_an_entry_the_reader_refuses_is_not_one_an_update_writes() -> None:
    from pytest_gpuperf._store.baselines import BaselineEntry

    good = BaselineEntry(1e-5, 0.9e-5, 1.1e-5, 0.99, 40, 0.01, "cold", "graph", "2026-11-21T10:00:00+00:00")
    assert good.problem() is None
    assert good.with_extra(estimate={**ESTIMATE, "log_se": 0.0}).problem() == (
        "field 'estimate.log_se' must be a number above 0 and at most 100, got 0.0: a standard error of 0 claims a "
        "certainty no measurement has"
    )


# -- gpuperf check ------------------------------------------------------------------------------
def test_check_reports_repeated_keys_and_implausible_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "baselines"
    write(root, "good.json", baseline_text(("t::k", ENTRY)))
    assert main(["check", str(root)]) == 0
    assert capsys.readouterr().out.strip().endswith("all valid")
    bad = {
        "repeated.json": baseline_text(("t::k", ENTRY), ("t::k", ENTRY)),
        "huge.json": baseline_text(("t::k", {**ENTRY, "median_s": 1e300, "ci_high_s": 1e301})),
        "tiny.json": baseline_text(("t::k", {**ENTRY, "median_s": 5e-324, "ci_low_s": 5e-324})),
        "flat.json": baseline_text(("t::k", {**ENTRY, "ci_low_s": 1e-5, "ci_high_s": 1e-5})),
        "certain.json": baseline_text(("t::k", {**ENTRY, "estimate": {**ESTIMATE, "log_se": 0.0}})),
    }
    for name, text in bad.items():
        write(root, name, text)
    code = main(["check", str(root)])
    out = capsys.readouterr().out
    assert code == 1
    problems = [line for line in out.splitlines() if line.startswith("ERROR ")]
    assert len(problems) == len(bad), out
    where = {name: next(p for p in problems if str(root / KEY / name) in p) for name in bad}
    assert "field 'entries.t::k' appears 2 times in one object" in where["repeated.json"]
    assert "field 'entries.t::k.median_s' must be a time per launch from 1e-07 s to 1000 s, got 1e+300" in where["huge.json"]
    assert "field 'entries.t::k.median_s' must be a time per launch from 1e-07 s to 1000 s, got 5e-324" in where["tiny.json"]
    assert "field 'entries.t::k' must have ci_low_s below ci_high_s" in where["flat.json"]
    assert "field 'entries.t::k.estimate.log_se' must be a number above 0" in where["certain.json"]
    assert out.splitlines()[-1].endswith(f": {len(bad)} problem(s)")


# -- in a pytest run ----------------------------------------------------------------------------
MEASURE = """
from pytest_gpuperf import Variant

def test_k(gpu_perf):
    gpu_perf.measure(Variant("k", lambda: None))
"""
DEVICE = "fake-gpu-sm90-132sm-80gib"


def _stored(pytester: pytest.Pytester) -> Path:
    return pytester.path / "baselines" / DEVICE / "test_perf.json"


@pytest.mark.parametrize(
    ("damage", "line"),
    [
        (lambda data, text: text.replace('"median_s": 1e-05', '"median_s": 1e+300'),
         "field 'entries.test_k::k.median_s' must be a time per launch from 1e-07 s to 1000 s, got 1e+300. Fix the file"),
        (lambda data, text: text.replace('"entries": {', '"entries": {"test_k::k": ' + json.dumps(data["entries"]["test_k::k"]) + ", "),
         "field 'entries.test_k::k' appears 2 times in one object, and a JSON reader silently keeps only the last"),
    ],
    ids=["median-1e300", "key-twice"],
)
def test_a_run_against_an_implausible_baseline_fails_in_one_line(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], damage: Callable[[dict[str, Any], str], str], line: str
) -> None:
    """Before: a 100x slowdown against a stored 1e300 s was '-100.0% improved' and passed."""
    fake_gpu(times={"k": 10e-6})
    pytester.makepyfile(test_perf=MEASURE)
    pytester.runpytest("--gpu-perf", "--gpu-perf-update-baselines").assert_outcomes(passed=1)
    path = _stored(pytester)
    data = json.loads(path.read_text())
    data["entries"]["test_k::k"].update(median_s=1e-5, ci_low_s=0.9e-5, ci_high_s=1.1e-5)
    data["entries"]["test_k::k"].pop("estimate", None)
    text = json.dumps(data)
    path.write_text(damage(copy.deepcopy(data), text))
    before = path.read_bytes()
    fake_gpu(times={"k": 1e-3})  # 100 times slower
    result = pytester.runpytest("--gpu-perf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*baseline file {path}: {line}*"])
    failure = result.stdout.str().split("= FAILURES =")[1].split("short test summary")[0]
    assert "Traceback" not in failure and "pytest_gpuperf/" not in failure, failure
    assert "improved" not in result.stdout.str()
    assert path.read_bytes() == before
