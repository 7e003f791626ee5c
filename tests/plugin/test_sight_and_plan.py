"""What each check can see (its detectable slowdown), what it cost, and ``gpuperf plan``."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from scipy import stats as sps

from pytest_gpuperf._cli.main import main
from pytest_gpuperf._gates.detectable import detectable_claim_slowdown, detectable_slowdown
from pytest_gpuperf._gates.stats import Interval
from pytest_gpuperf._gates.verdict import Verdict, regression_verdict, speedup_verdict
from pytest_gpuperf._plan.allocate import make_plan
from pytest_gpuperf._plan.checks import Check, Unit, data_seconds
from pytest_gpuperf._report.sight import regression_detectable, sights, unseen_lines

EVIDENCE = Path(__file__).parents[2] / "evidence"
H100_JOB = EVIDENCE / "2026-11-27-h100-4ca5-gpuonly.json.gz"


def _fail_rate(true_slowdown: float, se: float, df: int, confidence: float, threshold: float, draws: int = 20000) -> float:
    """How often the implemented regression rule FAILs a run whose log-estimate is normal around
    the truth with standard error ``se`` and a t interval on ``df`` degrees of freedom."""
    rng = np.random.default_rng(7)
    half = float(sps.t.ppf(0.5 + confidence / 2, df)) * se
    fails = 0
    for x in rng.normal(math.log1p(true_slowdown), se, draws):
        interval = Interval(math.exp(x), math.exp(x - half), math.exp(x + half), confidence)
        fails += regression_verdict(interval, 2 * threshold) is Verdict.FAIL
    return fails / draws


@pytest.mark.parametrize(("se", "threshold"), [(0.004, 0.025), (0.01, 0.05), (0.002, 0.015)])
def test_a_slowdown_of_the_detectable_size_fails_at_least_as_often_as_promised(se: float, threshold: float) -> None:
    confidence, df = 0.99, 9
    half = float(sps.t.ppf(0.5 + confidence / 2, df)) * se
    quiet = Interval(1.0, math.exp(-half), math.exp(half), confidence)
    d = detectable_slowdown(quiet, threshold)
    assert d is not None and d > threshold
    assert _fail_rate(d, se, df, confidence, threshold) >= (1 + confidence) / 2 - 0.003
    # half as far above the threshold, it is missed far more often: the figure is no loose bound
    assert _fail_rate((1 + threshold) * math.exp(half) - 1, se, df, confidence, threshold) < 0.6


def test_a_claim_fails_at_its_detectable_slowdown_below_the_margin() -> None:
    rng = np.random.default_rng(3)
    se, df, confidence, margin = 0.01, 9, 0.99, 1.2
    half = float(sps.t.ppf(0.5 + confidence / 2, df)) * se
    d = detectable_claim_slowdown(Interval(margin, margin * math.exp(-half), margin * math.exp(half), confidence))
    assert d is not None
    true = math.log(margin / (1 + d))
    fails = sum(
        speedup_verdict(Interval(math.exp(x), math.exp(x - half), math.exp(x + half), confidence), margin) is Verdict.FAIL
        for x in rng.normal(true, se, 20000)
    )
    assert fails / 20000 >= (1 + confidence) / 2 - 0.003


def test_undecidable_batches_detect_nothing() -> None:
    interval = Interval(1.0, 0.99, 1.01, 0.99)
    assert detectable_slowdown(interval, 0.025, independent=False) is None
    assert detectable_claim_slowdown(interval, independent=False) is None
    assert detectable_slowdown(Interval(1.0, 0.0, 2.0, 0.99), 0.025) is None  # an interval reaching zero


def _regression(**overrides: Any) -> dict[str, Any]:
    reg = {
        "slowdown": 1.0,
        "ci_low": 0.99,
        "ci_high": 1.01,
        "confidence": 0.99,
        "tolerance": 0.05,
        "band": 0.015,
        "threshold": 0.025,
        "calibrated_by": "reference:copy",
        "independent": True,
        "verdict": "pass",
    }
    return reg | overrides


def _measurement(name: str, reg: dict[str, Any], test: str = "t.py::test_x") -> Any:
    return {"kind": "measurement", "test": test, "measurement": {"name": name, "wall_s": 1.5}, "regression": reg}


def test_a_report_without_the_field_gets_the_value_a_run_records() -> None:
    reg = _regression()
    recorded = detectable_slowdown(Interval(1.0, 0.99, 1.01, 0.99), 0.025)
    assert regression_detectable(reg) == pytest.approx(recorded)
    assert regression_detectable(reg | {"detectable_slowdown": 0.031}) == 0.031
    assert regression_detectable(reg | {"detectable_slowdown": None}) is None


def test_checks_that_cannot_see_their_tolerance_are_listed_by_cause() -> None:
    records = [
        _measurement("seen", _regression(gpu_seconds=2.0)),
        _measurement("band", _regression(band=0.05, threshold=0.05, calibrated_by=None)),
        _measurement("wide", _regression(ci_low=0.97, ci_high=1.03)),
        _measurement("undecided", _regression(independent=False)),
    ]
    found = {s.where.rsplit("::", 1)[-1]: s for s in sights(records)}  # type: ignore[arg-type]
    assert found["seen"].sees_tolerance and found["seen"].gpu_seconds == 2.0
    assert not found["band"].sees_tolerance and "threshold 5%" in found["band"].line
    assert "interval ±3" in found["wide"].line and found["wide"].detectable == pytest.approx(1.025 * (1.03 / 0.97) - 1)
    assert found["undecided"].detectable is None
    lines = unseen_lines(records)  # type: ignore[arg-type]
    assert lines[0].startswith("gpu-perf sight: 1 of 4 checks catch a slowdown of their tolerance")
    assert sum(line.startswith("1 check(s) cannot see their own tolerance") for line in lines) == 3


SPEEDUP_AND_MEASURE = """
from pytest_gpuperf import Variant

def test_claim(gpu_perf):
    gpu_perf.assert_speedup(Variant("fast", lambda: None), Variant("slow", lambda: None), at_least=1.1)

def test_one(gpu_perf):
    gpu_perf.measure(Variant("kernel", lambda: None))
"""


def test_a_run_reports_each_checks_sight_and_gpu_seconds(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(times={"fast": 10e-6, "slow": 12e-6, "kernel": 5e-6})
    pytester.makepyfile(SPEEDUP_AND_MEASURE)
    pytester.runpytest("--gpu-perf", "--gpu-perf-update-baselines").assert_outcomes(passed=2)
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-json=report.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["gpu-perf sight: * of 4 checks catch a slowdown of their tolerance*GPU s spent on them"])
    data = json.loads((pytester.path / "report.json").read_text())
    by_test = {t["nodeid"].split("::")[-1]: t for t in data["tests"]}
    claim = by_test["test_claim"]["comparisons"][0]
    assert claim["gpu_seconds"] > 0 and claim["budget_s"] == 1.0 and claim["detectable_slowdown"] > 0
    alone = by_test["test_one"]["measurements"][0]
    assert alone["regression"]["gpu_seconds"] > 0 and alone["budget_s"] == 1.0
    assert alone["regression"]["detectable_slowdown"] > alone["regression"]["threshold"]
    assert all(m["regression"]["gpu_seconds"] is None for m in by_test["test_claim"]["measurements"])
    assert data["sight"]["checks"] == 4 and data["sight"]["gpu_seconds"] > 0
    assert data["sight"]["see_tolerance"] + len(data["sight"]["blind"]) == 4


def _check(where: str, function: str, h0: float, shrinking: float = 1.0, base: float = 1.025) -> Check:
    return Check(where, function, "baseline", base, h0, shrinking, 1.0, 1.0, 0.05, True)


def test_the_data_a_check_needs_brings_it_to_the_target() -> None:
    c = _check("a", "f", h0=0.01, shrinking=0.8)
    seconds = c.data_needed(0.04)
    assert seconds is not None and seconds > 1.0
    assert c.detectable_at(seconds) == pytest.approx(0.04)
    assert c.detectable_at(1.0) == pytest.approx(1.025 * math.exp(0.02) - 1)
    assert c.data_needed(0.02) is None and c.unreachable_because(0.02).kind == "band"
    stored = _check("b", "f", h0=0.01, shrinking=0.1)
    assert stored.data_needed(0.03) is None and stored.unreachable_because(0.03).kind == "stored"


def test_the_time_of_the_last_look() -> None:
    assert data_seconds(1.0, 1, "decided") == 1.0
    assert data_seconds(8.0, 3, "decided") == 4.0
    assert data_seconds(8.0, 5, "budget") == 8.0
    assert data_seconds(1.0, 2, "extended:budget") == 3.0


def test_a_total_too_small_for_the_target_raises_the_common_target() -> None:
    checks = [_check("a", "f", h0=0.01), _check("b", "g", h0=0.005)]
    units = [Unit("f", 1.2, 1.0, 1.0), Unit("g", 1.2, 1.0, 1.0)]
    free = make_plan(checks, units, target=0.04)
    assert free.fits and free.reached == 0.04
    assert {f.function: f.budget for f in free.functions}["g"] == 1.0  # already there: the least budget
    least = 2 * 1.2  # both units as run, at the least budget
    assert free.gpu_planned > least
    total = (free.gpu_planned + least) / 2
    tight = make_plan(checks, units, target=0.04, total=total)
    assert tight.fits and tight.reached > 0.04 and tight.gpu_planned <= total
    none = make_plan(checks, units, target=0.04, total=1.0)
    assert not none.fits and all(f.budget == 1.0 for f in none.functions)


def test_gpuperf_plan_on_an_h100_job_report(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(H100_JOB), "--target", "3%", "--budget", "240s"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("gpuperf plan: ") and "target: a detectable slowdown of 3%" in out
    assert "where the threshold is at or above the target: the band decides, not the budget" in out
    assert "@pytest.mark.gpu_perf(budget=" in out
    assert main(["plan", str(H100_JOB), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["target"] == 0.03 and data["fits"] and data["functions"]


@pytest.mark.parametrize(("args", "message"), [(["--target", "0%"], "between 0% and 100%"), (["--budget", "soon"], "seconds")])
def test_gpuperf_plan_refuses_bad_arguments(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["plan", str(H100_JOB), *args])
    assert exc.value.code == 2 and message in capsys.readouterr().err


JOB_REPORTS = {  # CI's GPU job as a push runs it: (checks, seeing their tolerance, regression checks)
    "2026-11-28-h100-f19b-job.json.gz": (294, 126, 198),
    "2026-11-28-h200-8771-job.json.gz": (286, 131, 189),
}


@pytest.mark.parametrize("name", sorted(JOB_REPORTS))
def test_a_gpu_job_report_says_again_what_its_run_saw(name: str) -> None:
    """CI's GPU job on an H100 and an H200: what the run wrote under ``sight`` comes back from its records, and
    every recorded detectable slowdown is the one the check's interval and threshold give."""
    from pytest_gpuperf._report.render import report_records
    from pytest_gpuperf._report.sight import sight_json
    from pytest_gpuperf._store.reports import load_report

    data = load_report(EVIDENCE / name)
    records = report_records(data)
    again, run = sight_json(records, 0.05), data["sight"]
    by_where = lambda entries: sorted(entries, key=lambda e: (e["where"], e["kind"]))  # noqa: E731
    assert by_where(again.pop("blind")) == by_where(run["blind"])  # a report lists a test's claims first
    assert again == {k: v for k, v in run.items() if k != "blind"} | {"gpu_seconds": pytest.approx(run["gpu_seconds"])}
    checks, seeing, regression_checks = JOB_REPORTS[name]
    assert (data["sight"]["checks"], data["sight"]["see_tolerance"]) == (checks, seeing)
    recorded = [r["regression"] for r in records if r["kind"] == "measurement" and r.get("regression")]
    assert len(recorded) == regression_checks
    for reg in recorded:
        again = regression_detectable({k: v for k, v in reg.items() if k != "detectable_slowdown"})
        assert again == pytest.approx(reg["detectable_slowdown"], rel=1e-9) if again is not None else reg["detectable_slowdown"] is None
