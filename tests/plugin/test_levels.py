"""Baselines that store levels: finding them (``_gates.levels``, ``gpuperf levels``), judging a run
against them, and what an update does to them (CPU only, fake GPU)."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable

import pytest

from pytest_gpuperf._cli.main import main
from pytest_gpuperf._gates.levels import find_levels, is_narrow, judge_levels
from pytest_gpuperf._gates.stats import Estimate
from pytest_gpuperf._gates.verdict import Verdict
from pytest_gpuperf.errors import BaselineFileError
from pytest_gpuperf._gates.verdict import Bands
from pytest_gpuperf._gates.regression import compare_entries
from pytest_gpuperf._store.baselines import BaselineFile, BaselineEntry
from tests.plugin.test_gates import baseline_file, lit

CONFIDENCE = 0.99


def run_at(ratio: float, se: float = 0.002, df: int = 9) -> Estimate:
    """A calibrated run: log(t / t_reference) at ``ratio``, standard error ``se`` (log scale)."""
    return Estimate(math.log(ratio), se, df, 100)


# -- finding levels -------------------------------------------------------------------------
def test_narrow_runs_group_into_levels_and_wide_or_lonely_runs_do_not() -> None:
    runs = [run_at(7.50), run_at(7.60), run_at(8.85), run_at(8.80), run_at(8.1, se=0.03), run_at(9.8)]
    assert [is_narrow(r, CONFIDENCE, 0.03) for r in runs] == [True, True, True, True, False, True]
    levels = find_levels(runs, CONFIDENCE, 0.03)
    assert [(round(math.exp(level.center), 2), members) for level, members in levels] == [(7.55, [0, 1]), (8.82, [2, 3])]
    assert [len(members) for _, members in find_levels(runs, CONFIDENCE, 0.03, min_runs=1)] == [2, 2, 1]


def test_a_level_is_grouped_against_its_first_run_so_a_chain_does_not_merge_levels() -> None:
    chain = [run_at(1.00), run_at(1.02), run_at(1.04), run_at(1.06)]
    assert [members for _, members in find_levels(chain, CONFIDENCE, 0.03)] == [[0, 1], [2, 3]]


def test_a_level_s_error_holds_the_spread_of_its_runs() -> None:
    (tight, _), = find_levels([run_at(2.0), run_at(2.0)], CONFIDENCE, 0.03)
    (spread, _), = find_levels([run_at(1.99), run_at(2.01)], CONFIDENCE, 0.03)
    assert tight.se == pytest.approx(0.002 / math.sqrt(2)) and spread.se > 3 * tight.se
    assert tight.df == 18


# -- judging against levels -----------------------------------------------------------------
def visited(low: float, estimate: float, high: float) -> Estimate:
    """A run whose batch medians reached from ``low`` to ``high`` (a run that moved between levels)."""
    return Estimate(math.log(estimate), 0.03, 9, 100, batch_low=math.log(low), batch_high=math.log(high))


LEVELS = [run_at(7.55, 0.001), run_at(8.85, 0.001)]


@pytest.mark.parametrize(
    "now, verdict, level",
    [
        (run_at(7.58), Verdict.PASS, 0),  # at the fast level
        (run_at(8.80), Verdict.PASS, 1),  # at the slow level
        (run_at(7.93), Verdict.FAIL, 0),  # 5% above the fast level, 10% below the slow one
        (run_at(9.29), Verdict.FAIL, 1),  # 5% above the slow level
        (run_at(7.00), Verdict.IMPROVED, 0),  # faster than every level
        (visited(7.56, 8.2, 8.83), Verdict.PASS, 1),  # its batches sat at both levels
        (run_at(7.58, se=0.012), Verdict.INCONCLUSIVE, 0),  # near the fast level, too wide to place
        (visited(7.93, 8.2, 8.83), Verdict.INCONCLUSIVE, 1),  # the lowest batch at neither level
        (run_at(8.2, se=0.03), Verdict.INCONCLUSIVE, 1),  # wide, between the levels, batches unknown
        (run_at(7.85, se=0.012), Verdict.INCONCLUSIVE, 0),  # 4% above the fast level, not established
        (run_at(8.55, se=0.004), Verdict.INCONCLUSIVE, 1),  # 3.4% below the slow level: its interval reaches it
    ],
)
def test_a_run_is_judged_against_every_level(now: Estimate, verdict: Verdict, level: int) -> None:
    check = judge_levels(now, LEVELS, CONFIDENCE, 0.05, 0.03)
    assert (check.verdict, check.level) == (verdict, level)
    assert check.slowdown.estimate == pytest.approx(math.exp(now.center - LEVELS[level].center))


def test_the_run_s_correlated_batches_still_widen_the_interval() -> None:
    correlated = Estimate(math.log(7.93), 0.002, 9, 100, 0.9, batch_size=4, needed_batch_size=100)
    assert judge_levels(correlated, LEVELS, CONFIDENCE, 0.05, 0.03).verdict is Verdict.INCONCLUSIVE
    assert judge_levels(run_at(7.93), LEVELS, CONFIDENCE, 0.05, 0.03).verdict is Verdict.FAIL


# -- the levels field of a baseline entry ----------------------------------------------------
def stored_entry(**levels_field: Any) -> dict[str, Any]:
    levels = {"reference": "reference:gemm", "levels": [{"log_center": 2.02, "log_se": 0.001, "df": 9},
                                                         {"log_center": 2.18, "log_se": 0.001, "df": 9}]}
    return {"median_s": 1e-3, "ci_low_s": 0.9e-3, "ci_high_s": 1.1e-3, "confidence": 0.99, "n": 40, "mode": "cold",
            "method": "graph", "recorded_at": "2026-11-27T00:00:00+00:00",
            "calibration": {"reference": "reference:gemm", "log_center": 2.02, "log_se": 0.001, "df": 9},
            "levels": levels | levels_field}


@pytest.mark.parametrize(
    "levels_field, message",
    [
        ({"reference": "reference:copy"}, "'entries.k::v.levels.reference' is 'reference:copy' but the entry's"),
        ({"levels": [{"log_center": 2.0, "log_se": 0.001, "df": 9}]}, "'entries.k::v.levels.levels' must be a list of at least 2"),
        ({"levels": [{"log_center": 2.0, "log_se": 0.001, "df": 9}, {"log_center": "x"}]}, "'entries.k::v.levels.levels[1].log_center' must be a number"),
        ({"levels": [{"log_center": 2.2, "log_se": 0.001, "df": 9}, {"log_center": 2.0, "log_se": 0.001, "df": 9}]},
         "'entries.k::v.levels.levels[1]' must be slower than the level before it"),
        ({"levels": [{"log_center": 2.0, "log_se": 0.001, "df": 9}, {"log_center": 800.0, "log_se": 0.001, "df": 9}]},
         "'entries.k::v.levels.levels[1].log_center' must be a number from -23.03 to 23.03, got 800.0"),
        ({"levels": [{"log_center": 2.0, "log_se": 0.0, "df": 9}, {"log_center": 2.2, "log_se": 0.001, "df": 9}]},
         "'entries.k::v.levels.levels[0].log_se' must be a number above 0"),
        ({"levels": [{"log_center": 2.0, "log_se": 0.001, "df": True}, {"log_center": 2.2, "log_se": 0.001, "df": 9}]},
         "'entries.k::v.levels.levels[0].df' must be an integer of 1 or more, got True"),
    ],
)
def test_a_bad_levels_field_is_one_line_naming_the_field(tmp_path: Path, levels_field: dict[str, Any], message: str) -> None:
    path = tmp_path / "dev" / "m.json"
    data = {"schema": "pytest-gpuperf/baselines/1", "device": {}, "entries": {"k::v": stored_entry(**levels_field)}}
    with pytest.raises(BaselineFileError, match="baseline file .*m.json: field " + message.replace("[", r"\[").replace("]", r"\]")):
        BaselineFile.validate(path, data)
    good = {"schema": "pytest-gpuperf/baselines/1", "device": {}, "entries": {"k::v": stored_entry()}}
    levels = BaselineFile.validate(path, good).entries["k::v"].levels()
    assert levels is not None and levels[0] == "reference:gemm" and len(levels[1]) == 2


# -- end to end: runs, gpuperf levels, a judged run, an update --------------------------------
LEVEL_TEST = """
from pytest_gpuperf import Variant

def test_kernel(gpu_perf):
    gpu_perf.measure(Variant("k", lambda: None))
"""
KEY = "test_kernel::k"
FAST, SLOW = 10e-6, 11.7e-6  # the kernel's two levels, 17% apart


def a_run(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], t: float, seed: int, *args: str, spread: float = 0.01
) -> pytest.RunResult:
    fake_gpu(times={"k": t}, seed=seed, spread=spread)
    return pytester.runpytest("--gpu-perf", *args)


@pytest.fixture
def with_levels(pytester: pytest.Pytester, fake_gpu: Callable[..., None], capsys: pytest.CaptureFixture[str]) -> Path:
    """A baseline recorded at the fast level, then four runs at both levels read by gpuperf levels --write."""
    pytester.makepyfile(test_perf=LEVEL_TEST)
    a_run(pytester, fake_gpu, FAST, 0, "--gpu-perf-update-baselines").assert_outcomes(passed=1)
    slow = a_run(pytester, fake_gpu, SLOW, 1, "--gpu-perf-json=r1.json")
    slow.assert_outcomes(failed=1)  # a single baseline cannot hold the other level at the default band
    for i, t in enumerate((FAST, SLOW, FAST), start=2):
        a_run(pytester, fake_gpu, t, i, f"--gpu-perf-json=r{i}.json")
    reports = [str(pytester.path / f"r{i}.json") for i in range(1, 5)]
    code = main(["levels", *reports, "--dir", str(pytester.path / "baselines")])
    out = capsys.readouterr().out
    assert code == 0 and "4 runs, 4 narrow" in out and "would be stored" in out, out
    assert "levels" not in json.loads(baseline_file(pytester, "test_perf").read_text())["entries"][KEY]
    assert main(["levels", *reports, "--dir", str(pytester.path / "baselines"), "--write"]) == 0
    assert "stored in" in capsys.readouterr().out
    return baseline_file(pytester, "test_perf")


def test_a_run_at_either_stored_level_passes(pytester: pytest.Pytester, fake_gpu: Callable[..., None], with_levels: Path) -> None:
    from pytest_gpuperf._store.schemas import schema_errors

    assert schema_errors(json.loads(with_levels.read_text()), "baselines") == []
    stored = json.loads(with_levels.read_text())["entries"][KEY]["levels"]
    assert [round(level["ratio"] / stored["levels"][0]["ratio"], 2) for level in stored["levels"]] == [1.0, 1.17]
    assert [level["runs"] for level in stored["levels"]] == [2, 2]
    assert [r["file"] for r in stored["reports"]] == ["r1.json", "r2.json", "r3.json", "r4.json"]
    for seed, t in ((10, FAST), (11, SLOW)):
        result = a_run(pytester, fake_gpu, t, seed, "--gpu-perf-json=check.json")
        result.assert_outcomes(passed=1)
        check = json.loads((pytester.path / "check.json").read_text())["tests"][0]["measurements"][0]["regression"]
        assert check["verdict"] == "pass" and check["band"] == 0.03 and len(check["levels"]) == 2


def test_a_run_at_neither_level_fails_naming_the_levels(pytester: pytest.Pytester, fake_gpu: Callable[..., None], with_levels: Path) -> None:
    result = a_run(pytester, fake_gpu, FAST * 1.05, 12)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(lit(
        "*performance REGRESSION: 'k' sits at none of the 2 levels stored for it on fake-gpu-sm90-132sm-80gib*;"
        " it is ?.?% slower than level 1",
        "*levels    *x, *x the time of reference:*, fastest first",
        "*threshold 3% = max(tolerance 5% / 2, level band 3%) from each level: the whole interval lies more than 3%*",
    ))
    a_run(pytester, fake_gpu, SLOW * 1.05, 13).assert_outcomes(failed=1)
    a_run(pytester, fake_gpu, FAST * 1.05, 14, "--gpu-perf-level-noise=0.08").assert_outcomes(passed=1)


def test_an_update_keeps_levels_the_new_time_sits_at_and_drops_others_saying_so(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], with_levels: Path
) -> None:
    result = a_run(pytester, fake_gpu, SLOW, 20, "--gpu-perf-update-baselines")
    result.stdout.fnmatch_lines(lit("*~ test_kernel::k: *; its 2 stored levels kept (the new time sits at one, or across two)"))
    assert "levels" in json.loads(with_levels.read_text())["entries"][KEY]
    result = a_run(pytester, fake_gpu, FAST * 0.9, 21, "--gpu-perf-update-baselines")
    result.stdout.fnmatch_lines(lit("*~ test_kernel::k: *; its 2 stored levels DROPPED: the new time sits at none of them*"))
    assert "levels" not in json.loads(with_levels.read_text())["entries"][KEY]


def test_an_uncalibrated_update_drops_the_levels_saying_why(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], with_levels: Path
) -> None:
    result = a_run(pytester, fake_gpu, FAST, 22, "--gpu-perf-update-baselines", "--gpu-perf-calibrate=off")
    result.stdout.fnmatch_lines(lit("*stored levels DROPPED: the new time was not timed against their reference, reference:*"))
    assert "levels" not in json.loads(with_levels.read_text())["entries"][KEY]


def test_levels_are_not_stored_without_an_entry_or_with_one_level(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.makepyfile(test_perf=LEVEL_TEST)
    for i, t in enumerate((FAST, SLOW, FAST, SLOW)):
        a_run(pytester, fake_gpu, t, i, f"--gpu-perf-json=r{i}.json")
    reports = [str(pytester.path / f"r{i}.json") for i in range(4)]
    code = main(["levels", *reports, "--dir", str(pytester.path / "baselines"), "--write"])
    assert code == 1
    assert "NOT stored: no baseline entry in" in capsys.readouterr().out
    assert main(["levels", reports[0], reports[2], "--dir", str(pytester.path / "baselines"), "--write"]) == 0
    assert "one level: its baseline stays" in capsys.readouterr().out
    assert main(["levels", *reports, "--only", "nothing*"]) == 0
    assert "no calibrated measurements" in capsys.readouterr().out


def test_levels_cli_rejects_bad_arguments(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        main(["levels", "r.json", "--min-runs", "1"])
    assert "must be at least 2 runs" in capsys.readouterr().err
    assert main(["levels", str(tmp_path / "missing.json")]) == 1
    assert "missing.json does not exist" in capsys.readouterr().err


def test_gpuperf_diff_judges_a_new_entry_against_the_old_entry_s_levels(tmp_path: Path) -> None:
    from pytest_gpuperf._cli.diff import default_gate
    from pytest_gpuperf._report.baseline_diff import DiffRow

    old = BaselineFile.validate(tmp_path / "f.json", {"schema": "pytest-gpuperf/baselines/1", "device": {},
                                                       "entries": {"k::v": stored_entry()}}).entries["k::v"]

    def at(log_center: float) -> BaselineEntry:
        cal = {"reference": "reference:gemm", "log_center": log_center, "log_se": 0.001, "df": 9}
        return BaselineEntry(1e-3, 0.99e-3, 1.01e-3, 0.99, 40, 0.01, "cold", "graph", "now", {"calibration": cal})

    assert DiffRow("f", "k::v", old, at(2.18)).status(default_gate()) == "within tolerance"
    assert DiffRow("f", "k::v", old, at(2.07)).status(default_gate()) == "slower"


@pytest.mark.parametrize(
    "t, spread, seed, message",
    [
        (FAST * 1.02, 0.4, 31, "*INCONCLUSIVE: 'k' cannot be placed at level 1 of the 2 stored for it on *; it is *% * than level 1"),
        (FAST * 1.045, 0.08, 31, "*INCONCLUSIVE: 'k' sits at none of the 2 levels stored for it on *; it is 4.?% slower than level 1"),
    ],
)
def test_an_undecided_run_says_why_and_fails_only_when_asked(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], with_levels: Path, t: float, spread: float, seed: int,
    message: str,
) -> None:
    a_run(pytester, fake_gpu, t, seed, spread=spread).assert_outcomes(passed=1)
    result = a_run(pytester, fake_gpu, t, seed, "--gpu-perf-inconclusive=fail", spread=spread)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(lit(message))


def three_levels() -> list[Estimate]:
    return [run_at(1.0, 0.001), run_at(1.2, 0.001), run_at(1.5, 0.001)]


@pytest.mark.parametrize(
    "ratio, verdict, level",
    [(1.21, Verdict.PASS, 1), (1.32, Verdict.FAIL, 1), (1.6, Verdict.FAIL, 2), (1.49, Verdict.PASS, 2), (0.9, Verdict.IMPROVED, 0)],
)
def test_three_levels(ratio: float, verdict: Verdict, level: int) -> None:
    check = judge_levels(run_at(ratio), three_levels(), CONFIDENCE, 0.05, 0.03)
    assert (check.verdict, check.level) == (verdict, level)


def test_a_faster_estimate_is_never_undecided() -> None:
    check = judge_levels(run_at(7.2, se=0.012), LEVELS, CONFIDENCE, 0.05, 0.03)
    assert (check.verdict, check.level) == (Verdict.PASS, 0)


def calibrated_entry(log_center: float, reference: str = "reference:gemm") -> BaselineEntry:
    cal = {"reference": reference, "log_center": log_center, "log_se": 0.001, "df": 9}
    return BaselineEntry(1e-3, 0.99e-3, 1.01e-3, 0.99, 40, 0.01, "cold", "graph", "now", {"calibration": cal})


def stored_with_levels(tmp_path: Path) -> BaselineEntry:
    data = {"schema": "pytest-gpuperf/baselines/1", "device": {}, "entries": {"k::v": stored_entry()}}
    return BaselineFile.validate(tmp_path / "f.json", data).entries["k::v"]


def test_levels_decide_only_for_the_same_reference_and_a_band_that_tells_them_apart(tmp_path: Path) -> None:
    old = stored_with_levels(tmp_path)  # levels at log 2.02 and 2.18: 17% apart
    between = calibrated_entry(2.10)
    default = compare_entries(between, old, 0.99, 0.05, Bands(0.05, 0.16, 0.03))
    assert default.levels and default.verdict is Verdict.FAIL
    wide = compare_entries(between, old, 0.99, 0.05, Bands(0.05, 0.16, 0.09))  # 2 x 9% > 17%: not told apart
    assert wide.levels == () and wide.band == 0.16
    other = compare_entries(calibrated_entry(2.10, "reference:copy"), old, 0.99, 0.05, Bands(0.05, 0.16, 0.03))
    assert other.levels == () and other.calibrated_by is None and other.band == 0.05


def test_runs_spread_over_a_few_percent_are_not_stored_as_levels(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.makepyfile(test_perf=LEVEL_TEST)
    a_run(pytester, fake_gpu, FAST, 0, "--gpu-perf-update-baselines").assert_outcomes(passed=1)
    for i, t in enumerate((FAST, FAST * 1.035, FAST, FAST * 1.035), start=1):
        a_run(pytester, fake_gpu, t, i, f"--gpu-perf-json=r{i}.json")
    reports = [str(pytester.path / f"r{i}.json") for i in range(1, 5)]
    assert main(["levels", *reports, "--dir", str(pytester.path / "baselines"), "--write"]) == 0
    assert "% apart, under twice the band: a spread, not levels; nothing stored" in capsys.readouterr().out
    assert "levels" not in json.loads(baseline_file(pytester, "test_perf").read_text())["entries"][KEY]


def test_a_report_given_twice_counts_once(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    pytester.makepyfile(test_perf=LEVEL_TEST)
    a_run(pytester, fake_gpu, FAST, 0, "--gpu-perf-update-baselines").assert_outcomes(passed=1)
    a_run(pytester, fake_gpu, FAST, 1, "--gpu-perf-json=a.json")
    a_run(pytester, fake_gpu, SLOW, 2, "--gpu-perf-json=b.json")
    shutil.copy(pytester.path / "a.json", pytester.path / "a-copy.json")
    reports = [str(pytester.path / name) for name in ("a.json", "a-copy.json", "b.json", "b.json")]
    assert main(["levels", *reports, "--dir", str(pytester.path / "baselines")]) == 0
    out = capsys.readouterr().out
    assert "a-copy.json: the same report as" in out and out.count("counted once") == 2
    assert "2 runs, 2 narrow; levels: none; no level" in out


def test_malformed_reports_give_no_traceback(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.makepyfile(test_perf=LEVEL_TEST)
    a_run(pytester, fake_gpu, FAST, 1, "--gpu-perf-json=r.json")
    data = json.loads((pytester.path / "r.json").read_text())
    data["provenance"] = "not an object"
    data["tests"][0]["measurements"][0]["measurement"]["calibration"]["log_center"] = 800.0
    (pytester.path / "bad.json").write_text(json.dumps(data))
    assert main(["levels", str(pytester.path / "bad.json"), str(pytester.path / "r.json"), "--dir", "nowhere"]) == 0
    assert "1 runs, 1 narrow; levels: none" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["levels", str(pytester.path / "r.json"), "--band", "0"])
    assert "--band must be above 0" in capsys.readouterr().err


def test_a_file_that_cannot_be_written_is_reported_and_the_others_are_written(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], with_levels: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads(with_levels.read_text())
    del data["entries"][KEY]["levels"]
    real = with_levels.with_name("real.json")
    real.write_text(json.dumps(data))
    with_levels.unlink()
    with_levels.symlink_to(real)  # the writer refuses to write through a link
    reports = [str(pytester.path / f"r{i}.json") for i in range(1, 5)]
    assert main(["levels", *reports, "--dir", str(pytester.path / "baselines"), "--write"]) == 1
    out = capsys.readouterr().out
    assert "NOT stored: baseline file" in out and "is a symbolic link" in out
    assert "levels" not in json.loads(real.read_text())["entries"][KEY]
