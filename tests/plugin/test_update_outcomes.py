"""Where baselines are read from and whether an update stored them: a baselines folder named
explicitly must exist (a mistyped path would turn every regression check into a note), an
update creates it, and a measurement an update could not store says so in its row, in the
summary and in the JSON report."""
from __future__ import annotations

import json
from typing import Callable

import pytest

from pytest_gpuperf._store.schemas import schema_errors

DEVICE = "fake-gpu-sm90-132sm-80gib"
TWO_TESTS = """
from pytest_gpuperf import Variant

def test_one(gpu_perf):
    gpu_perf.measure(Variant("kernel", lambda: None))

def test_two(gpu_perf):
    gpu_perf.measure(Variant("other", lambda: None))
"""


def rows(result: pytest.RunResult) -> dict[str, str]:
    """Summary table rows: 'test::variant' -> the row's text after the variant."""
    lines = result.stdout.str().split("gpu-perf summary")[1].splitlines()
    found = {}
    for line in lines:
        parts = line.split()
        if len(parts) > 2 and parts[0].startswith("test_") and parts[1] in ("kernel", "other"):
            found[f"{parts[0]}::{parts[1]}"] = line
    return found


# -- the baselines folder ---------------------------------------------------------------------
@pytest.mark.parametrize("how", ["option", "env", "ini"])
def test_a_baselines_folder_that_does_not_exist_is_a_usage_error(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    pytester.makepyfile(test_perf=TWO_TESTS)
    args = ["--gpu-perf"]
    if how == "option":
        args.append("--gpu-perf-baselines=baselnies")
        source = "the command line (--gpu-perf-baselines)"
        path = pytester.path / "baselnies"
    elif how == "env":
        monkeypatch.setenv("GPU_PERF_BASELINES", "baselnies")
        source = "the environment variable GPU_PERF_BASELINES"
        path = pytester.path / "baselnies"
    else:
        pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\ngpu_perf_baselines = perf/baselnies\n")
        source = "the ini file (tox.ini, key gpu_perf_baselines)"
        path = pytester.path / "perf" / "baselnies"
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert [line for line in result.stderr.lines if line.strip()] == [
        f"ERROR: pytest-gpuperf: --gpu-perf-baselines {path} (from {source}) does not exist, so no baseline would be "
        "checked; fix the path, or record baselines there with --gpu-perf-update-baselines"
    ]
    assert "Traceback" not in result.stderr.str() and not path.exists()


def test_the_default_folder_may_be_missing(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    """A project that records no baselines yet has no baselines/ folder: its runs note it, as before."""
    pytester.makepyfile(test_perf=TWO_TESTS)
    result = pytester.runpytest("--gpu-perf")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["2 measurement(s) have no stored baseline for this GPU*"])


def test_an_update_creates_the_folder(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    pytester.makepyfile(test_perf=TWO_TESTS)
    folder = pytester.path / "perf" / "baselines"
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-update-baselines", f"--gpu-perf-baselines={folder}")
    result.assert_outcomes(passed=2)
    assert (folder / DEVICE / "test_perf.json").is_file()
    pytester.runpytest("--gpu-perf", f"--gpu-perf-baselines={folder}").assert_outcomes(passed=2)


def test_an_update_that_cannot_create_the_folder_is_a_usage_error(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    pytester.makepyfile(test_perf=TWO_TESTS)
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-update-baselines", "--gpu-perf-baselines=test_perf.py/baselines")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        f"ERROR: pytest-gpuperf: --gpu-perf-baselines {pytester.path / 'test_perf.py' / 'baselines'} (from the command "
        "line (--gpu-perf-baselines)) cannot be created: Not a directory; give another path"
    ])


# -- an update that could not store ------------------------------------------------------------
def test_an_update_over_a_corrupt_file_says_not_recorded_in_each_row(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    """Before: 'recorded' rows and '2 passed' over a file that was not written (exit 1)."""
    pytester.makepyfile(test_perf=TWO_TESTS)
    pytester.runpytest("--gpu-perf", "--gpu-perf-update-baselines").assert_outcomes(passed=2)
    path = pytester.path / "baselines" / DEVICE / "test_perf.json"
    data = json.loads(path.read_text())
    data["entries"]["test_one::kernel"]["median_s"] = "fast"
    path.write_text(json.dumps(data))
    before = path.read_bytes()
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-update-baselines", "--gpu-perf-json=report.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert path.read_bytes() == before, "nothing is written over a file the reader refuses"
    why = (f"baseline file {path}: field 'entries.test_one::kernel.median_s' must be a time per launch from 1e-07 s "
           "to 1000 s, got 'fast'.")
    found = rows(result)
    assert set(found) == {"test_one::kernel", "test_two::other"}
    assert all(line.endswith("not recorded") for line in found.values()), found
    result.stdout.fnmatch_lines([
        "verdicts: 2 baseline not recorded",
        "baselines NOT recorded for 2 measurement(s):",
        f"  test_one::kernel: {why}*",
        f"  test_two::other: {why}*",
    ])
    result.stdout.fnmatch_lines([f"gpu-perf: baselines {path} NOT written: {why}*"])
    assert "baselines updated" not in result.stdout.str()
    report = json.loads((pytester.path / "report.json").read_text())
    measurements = [m for t in report["tests"] for m in t["measurements"]]
    assert [m["verdict"] for m in measurements] == ["not recorded", "not recorded"]
    assert all(m["not_recorded"].startswith(why) for m in measurements)
    assert report["summary"] == {"baseline not recorded": 2}
    assert schema_errors(report, "report") == []


def test_an_entry_the_reader_would_refuse_is_not_recorded(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    """A fake GPU without noise gives an interval of zero width: no baseline may claim that."""
    fake_gpu(times={"kernel": 5e-6, "other": 6e-6}, spread=0.0)
    pytester.makepyfile(test_perf=TWO_TESTS)
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-update-baselines")
    found = rows(result)
    assert all(line.endswith("not recorded") for line in found.values()) and len(found) == 2, found
    result.stdout.fnmatch_lines([
        "baselines NOT recorded for 2 measurement(s):",
        "  test_one::kernel: must have ci_low_s below ci_high_s, got * and *: an interval of zero width claims a "
        "certainty no measurement has",
    ])
    assert not (pytester.path / "baselines" / DEVICE / "test_perf.json").exists()


def test_a_recorded_row_is_still_recorded(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    pytester.makepyfile(test_perf=TWO_TESTS)
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-update-baselines")
    assert result.ret == pytest.ExitCode.OK
    assert all(line.endswith(" recorded") and "not recorded" not in line for line in rows(result).values())
    assert "NOT recorded" not in result.stdout.str()
