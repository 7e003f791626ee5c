"""INCONCLUSIVE is never silent: the terminal summary, the saved report's markdown (job summary,
pull request comment) and the workflow annotations name each undecided result with its reason;
--gpu-perf-inconclusive=fail fails them; a regression check blind to its tolerance says so."""
from __future__ import annotations

import contextlib
import io
import json
from typing import Any, Callable

import pytest

from pytest_gpuperf._cli.main import main
from pytest_gpuperf._plugin.options import BY_NAME
from pytest_gpuperf._report.undecided import blind_lines, undecided, workflow_commands

PROJECT = """
import pytest
from pytest_gpuperf import Variant

{mark}
def test_claim(gpu_perf):
    gpu_perf.assert_speedup(Variant("fast", lambda: None), Variant("slow", lambda: None), at_least=1.0)

def test_kernel(gpu_perf):
    gpu_perf.measure(Variant("kernel", lambda: None))
"""

RAW_AND_CALIBRATED = """
import pytest
from pytest_gpuperf import Variant

@pytest.mark.gpu_perf(calibrate=False)
def test_raw(gpu_perf):
    gpu_perf.measure(Variant("raw", lambda: None))

def test_calibrated(gpu_perf):
    gpu_perf.measure(Variant("calibrated", lambda: None))
"""

BLIND_NOTE = (
    "raw check: machine band 5% >= tolerance 5%; a slowdown of 5% cannot fail here: "
    "calibrate against a reference kernel or use --gpu-perf-against"
)
WARNED = "2 inconclusive (not failed; --gpu-perf-inconclusive=fail makes them fail):"
CLAIM = "  test_project.py::test_claim: speedup claim fast vs slow, *x ?*, *? against the margin 1.0000x: the interval straddles the margin*"
KERNEL = (
    "  test_project.py::test_kernel::kernel: regression check (calibrated by reference:copy), slowdown 1.0*x ?*, *? "
    "against the threshold 1.0400x: above the threshold, but the interval reaches below it"
)


def lit(*patterns: str) -> list[str]:
    """fnmatch patterns whose square brackets are literal (fnmatch reads them as character sets)."""
    return [p.replace("[", "?").replace("]", "?") for p in patterns]


def report(pytester: pytest.Pytester, *args: str) -> tuple[str, int]:
    """``gpuperf report report.json ARGS`` as the workflows run it: its output and exit status."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(["report", str(pytester.path / "report.json"), *args])
    return out.getvalue(), status


@pytest.fixture
def undecided_run(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> Callable[..., pytest.RunResult]:
    """A project whose speedup claim (two equal kernels at a margin of 1.0) and whose calibrated
    regression check (7% slower, its interval about ±10% wide) are both undecided."""
    fake_gpu(times={"fast": 10e-6, "slow": 10e-6, "kernel": 20e-6})
    pytester.makepyfile(test_project=PROJECT.format(mark=""))
    pytester.runpytest("--gpu-perf", "--gpu-perf-update-baselines").assert_outcomes(passed=2, warnings=1)
    fake_gpu(times={"fast": 10e-6, "slow": 10e-6, "kernel": 21.4e-6}, spread=0.3, seed=7)

    def run(*args: str, mark: str = "") -> pytest.RunResult:
        pytester.makepyfile(test_project=PROJECT.format(mark=mark))
        return pytester.runpytest("--gpu-perf", "--gpu-perf-json=report.json", *args)

    return run


def test_by_default_each_inconclusive_result_passes_and_the_summary_names_it_with_its_reason(
    pytester: pytest.Pytester, undecided_run: Callable[..., pytest.RunResult]
) -> None:
    result = undecided_run()
    result.assert_outcomes(passed=2, warnings=2)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(lit("*gpu-perf summary*", "verdicts: *", WARNED, CLAIM, KERNEL))
    records = json.loads((pytester.path / "report.json").read_text())["tests"]
    claim = next(t for t in records if t["nodeid"].endswith("test_claim"))["comparisons"][0]
    kernel = next(t for t in records if t["nodeid"].endswith("test_kernel"))["measurements"][0]
    assert (claim["verdict"], claim["on_inconclusive"]) == ("inconclusive", "warn")
    assert (kernel["verdict"], kernel["on_inconclusive"]) == ("inconclusive", "warn")
    assert "on_inconclusive" not in next(t for t in records if t["nodeid"].endswith("test_claim"))["measurements"][0]


def test_fail_fails_them_and_the_run_exits_non_zero(undecided_run: Callable[..., pytest.RunResult]) -> None:
    result = undecided_run("--gpu-perf-inconclusive=fail")
    result.assert_outcomes(failed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(lit("2 inconclusive, failed under --gpu-perf-inconclusive=fail:", CLAIM, KERNEL))
    assert "not failed;" not in result.stdout.str()


def test_a_marker_that_fails_one_test_splits_the_list(undecided_run: Callable[..., pytest.RunResult]) -> None:
    result = undecided_run(mark='@pytest.mark.gpu_perf(inconclusive="fail")')
    result.assert_outcomes(passed=1, failed=1, warnings=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(lit(
        "1 inconclusive (not failed; --gpu-perf-inconclusive=fail makes them fail):", KERNEL,
        "1 inconclusive, failed under --gpu-perf-inconclusive=fail:", CLAIM,
    ))


def test_the_job_summary_and_the_pull_request_comment_list_them_before_the_table(
    pytester: pytest.Pytester, undecided_run: Callable[..., pytest.RunResult]
) -> None:
    undecided_run().assert_outcomes(passed=2, warnings=2)
    for args in (["--markdown"], ["--markdown", "--failures-first", "--max-chars", "30000"]):  # ci.yml, gpu-perf-results.yml
        text, status = report(pytester, *args)
        assert status == 0
        heading = "### 2 inconclusive (not failed; `--gpu-perf-inconclusive=fail` makes them fail)"
        assert heading in text and text.index(heading) < text.index("| test | variant |")
        lines = text.splitlines()
        at = lines.index(heading)
        assert lines[at + 1].startswith("- `test_project.py::test_claim`: speedup claim fast vs slow, ")
        assert "against the margin 1.0000x: the interval straddles the margin" in lines[at + 1]
        assert lines[at + 2].startswith("- `test_project.py::test_kernel::kernel`: regression check (calibrated by reference:copy)")
        assert lines[at + 2].endswith("against the threshold 1.0400x: above the threshold, but the interval reaches below it")
    text, _ = report(pytester, "--text")
    assert WARNED in text and "  test_project.py::test_claim: speedup claim fast vs slow" in text
    text, status = report(pytester, "--annotations")
    assert status == 0
    commands = text.splitlines()
    assert len(commands) == 2 and all(c.startswith("::warning title=gpu-perf inconclusive::test_project.py::test_") for c in commands)
    assert "the interval straddles the margin" in commands[0]
    assert all(c.endswith("(not failed; --gpu-perf-inconclusive=fail makes it fail)") for c in commands)


def test_a_raw_check_says_it_cannot_see_its_tolerance_and_a_calibrated_one_does_not(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None]
) -> None:
    fake_gpu(times={"raw": 20e-6, "calibrated": 20e-6})
    pytester.makepyfile(RAW_AND_CALIBRATED)
    pytester.runpytest("--gpu-perf", "--gpu-perf-update-baselines").assert_outcomes(passed=2)
    fake_gpu(times={"raw": 20e-6, "calibrated": 20e-6}, seed=1)
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-json=report.json")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"1 regression check(s) cannot catch their tolerance: {BLIND_NOTE}"])
    assert result.stdout.str().count("cannot catch their tolerance") == 1
    checks = {
        m["measurement"]["name"]: m["regression"]
        for t in json.loads((pytester.path / "report.json").read_text())["tests"]
        for m in t["measurements"]
    }
    assert checks["raw"]["tolerance_blind"] is True and checks["raw"]["note"] == BLIND_NOTE
    assert checks["raw"]["threshold"] == pytest.approx(checks["raw"]["tolerance"])
    assert checks["calibrated"]["tolerance_blind"] is False and "note" not in checks["calibrated"]
    text, _ = report(pytester, "--markdown")
    assert f"### Regression checks blind to their tolerance\n- 1 regression check(s) cannot catch their tolerance: {BLIND_NOTE}" in text
    text, _ = report(pytester, "--annotations")
    assert text == f"::notice title=gpu-perf checks blind to their tolerance::1 regression check(s) cannot catch their tolerance: {BLIND_NOTE.replace('%', '%25')}\n"

    # A tolerance the band leaves room for: no note.
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-tolerance=0.2")
    result.assert_outcomes(passed=2)
    assert "cannot catch their tolerance" not in result.stdout.str()

    # A raw slowdown past the band fails, and its message carries the note.
    fake_gpu(times={"raw": 23e-6, "calibrated": 20e-6}, seed=2)
    result = pytester.runpytest("--gpu-perf")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*threshold 1.0500x = 1 + max(tolerance 5% / 2, machine band 5%): the whole interval lies above it",
        f"*note      {BLIND_NOTE}",
    ])


BUSY = json.dumps([{"pid": 4242, "name": "other-job", "sm_percent": 97}])


def test_contended_results_are_listed_once(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    """A contended claim is named as the claim (not again as its two measurements); a contended
    measurement on its own is named as such."""
    fake_gpu(times={"fast": 10e-6, "slow": 20e-6, "kernel": 20e-6}, FAKE_OTHERS=BUSY)
    pytester.makepyfile(test_project=PROJECT.format(mark="").replace("at_least=1.0", "at_least=1.5"))
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-quiet-wait=0")
    result.assert_outcomes(skipped=2)
    assert result.ret == pytest.ExitCode.OK
    who = "other processes used the GPU while it was measured (pid 4242 (other-job, 97% SM))"
    result.stdout.fnmatch_lines(lit(
        WARNED,
        f"  test_project.py::test_claim: speedup claim fast vs slow, *x ?*? against the margin 1.5000x: *contended: {who}",
        f"  test_project.py::test_kernel::kernel: contended measurement: {who}; not judged, not stored",
    ))
    assert "test_project.py::test_claim::fast" not in result.stdout.str()  # the health lines name it, not this list
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-quiet-wait=0", "--gpu-perf-inconclusive=fail")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["2 inconclusive, failed under --gpu-perf-inconclusive=fail:"])


# -- the reasons, from records of every kind ------------------------------------------------
def _measurement(test: str, name: str, verdict: str, regression: dict[str, Any] | None, **extra: Any) -> dict[str, Any]:
    return {
        "kind": "measurement",
        "test": test,
        "measurement": {"name": name, "health": None},
        "regression": regression,
        "verdict": verdict,
        **extra,
    }


def _regression(slowdown: float, low: float, high: float, **extra: Any) -> dict[str, Any]:
    return {
        "slowdown": slowdown, "ci_low": low, "ci_high": high, "tolerance": 0.05, "band": 0.0,
        "threshold": 0.025, "calibrated_by": None, "independent": True, "verdict": "inconclusive", **extra,
    }


def test_each_kind_of_undecided_check_says_why() -> None:
    records: list[Any] = [
        _measurement("t.py::test_rev", "k", "inconclusive", _regression(1.04, 1.01, 1.07, against="main (abc123)"), on_inconclusive="fail"),
        _measurement("t.py::test_levels", "k", "inconclusive", _regression(
            1.02, 0.99, 1.05, levels=[7.5, 8.8], level=0, band=0.03, threshold=0.03, calibrated_by="reference:gemm")),
        _measurement("t.py::test_off", "k", "inconclusive", _regression(
            1.06, 1.02, 1.10, levels=[7.5, 8.8], level=1, band=0.03, threshold=0.03, calibrated_by="reference:gemm")),
        _measurement("t.py::test_corr", "k", "inconclusive", _regression(1.04, 1.01, 1.07, independent=False)),
        {"kind": "comparison", "test": "t.py::test_shift", "comparison": {
            "fast": "a", "baseline": "b", "speedup": 1.12, "ci_low": 1.11, "ci_high": 1.13, "at_least": 1.1,
            "verdict": "inconclusive", "notes": [], "level_shift": {"lowest_median": 1.0, "highest_median": 1.2},
            "estimate": {"lag1": 0.9, "batch_size": 4, "needed_batch_size": 16, "tau": 7.6}}},
        _measurement("t.py::test_pass", "k", "pass", _regression(1.0, 0.99, 1.01, verdict="pass")),
    ]
    entries = undecided(records)
    assert [e.line for e in entries] == [
        "t.py::test_rev::k: check against main (abc123) (same rounds), slowdown 1.0400x [1.0100, 1.0700] against the "
        "threshold 1.0250x: above the threshold, but the interval reaches below it",
        "t.py::test_levels::k: regression check against 2 stored levels, slowdown 1.0200x [0.9900, 1.0500] of level 1 "
        "against the threshold 1.0300x: within 3% of level 1, but the interval is too wide to place it there",
        "t.py::test_off::k: regression check against 2 stored levels, slowdown 1.0600x [1.0200, 1.1000] of level 2 "
        "against the threshold 1.0300x: at none of the levels, but the interval reaches within 3% of one",
        "t.py::test_corr::k: regression check (raw times), slowdown 1.0400x [1.0100, 1.0700] against the threshold "
        "1.0250x: above the threshold, but the interval reaches below it; batches not independent (correlated over "
        "more than half a batch, or a level that moved): no gate decides on them",
        "t.py::test_shift: speedup claim a vs b, 1.1200x [1.1100, 1.1300] against the margin 1.1000x: level shift: the "
        "run's batches moved between 1.0000x and 1.2000x (a clock, power state or placement of one variant's own); no "
        "gate decides on such a run; correlated batches: samples stay correlated over about 7.6 rounds, more than half "
        "of a 4-round batch; no gate decides on them",
    ]
    assert [e.failed for e in entries] == [True, False, False, False, False]
    # A report of a release whose records do not say: the run's own setting decides.
    assert all(e.failed for e in undecided(records, default_policy="fail"))
    assert workflow_commands(entries[:1], [])[0].startswith("::error title=gpu-perf inconclusive::t.py::test_rev::k: ")
    assert blind_lines(records) == []


def test_a_correlation_reason_states_why_the_batches_cannot_decide() -> None:
    """A batch must span 2 correlation times to decide: with tau 30 rounds and batches of 53 the
    reason says so, not that 30 rounds are longer than 53 (or, of an older report's estimate,
    that a lag-1 correlation of 0.00 kept the samples correlated)."""
    from pytest_gpuperf._gates.stats import Estimate
    from pytest_gpuperf._timing.sampler import _correlation_note

    est = Estimate(0.0, 0.01, 9, 530, lag1=0.0, batch_size=53, needed_batch_size=60, tau=30.0)
    assert not est.independent and not est.level_moved
    assert _correlation_note(est) == (
        "samples stay correlated over about 30.0 rounds (their integrated autocorrelation time), so a batch must "
        "span 60 rounds (2x that) to decide a gate and these batches are 53; no gate decides on it (a longer "
        "--gpu-perf-budget gives longer batches)"
    )
    claim = {"fast": "a", "baseline": "b", "speedup": 1.0, "ci_low": 0.9, "ci_high": 1.1, "at_least": 0.8,
             "verdict": "inconclusive", "notes": []}
    for estimate, over in [
        ({"lag1": 0.0, "batch_size": 53, "needed_batch_size": 60, "tau": 30.0}, "about 30.0 rounds"),
        ({"lag1": 0.0, "batch_size": 53, "needed_batch_size": 60, "tau": 0.0}, "30 rounds or more"),
        ({"lag1": 0.0, "batch_size": 4, "needed_batch_size": 6}, "3 rounds or more"),  # a report without tau
    ]:
        (entry,) = undecided([{"kind": "comparison", "test": "t.py::test_c", "comparison": {**claim, "estimate": estimate}}])
        assert entry.line.endswith(f"correlated batches: samples stay correlated over {over}, more than half of a "
                                   f"{estimate['batch_size']}-round batch; no gate decides on them"), entry.line
        assert "lag-1" not in entry.line


def test_the_option_says_what_it_governs_and_what_each_value_does(pytester: pytest.Pytester) -> None:
    text = BY_NAME["inconclusive"].help
    for governed in ("speedup claim", "regression check against a stored baseline", "--gpu-perf-against", "contended"):
        assert governed in text
    assert "warn: the test passes" in text and "fail: the test fails" in text and "exit status 1" in text
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*--gpu-perf-inconclusive=*", "*What an undecided result does to its test*"])
