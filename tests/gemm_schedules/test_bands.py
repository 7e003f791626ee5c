"""The GEMM suite's regression bands against the runs they were chosen from: replayed through the
gate's own rule (``regression_verdict``), every A/A check passes, the planted Ping-pong slowdown
fails, and the decode shapes pass on the H100 where a 16% band false-alarmed. The bands are what ``Settings.for_test`` makes of the collected tests of
test_perf.py, so a band changed or moved there is checked here against the same reports."""
from __future__ import annotations

import functools
import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest

from pytest_gpuperf._gates.levels import find_levels, is_narrow
from pytest_gpuperf._gates.stats import Interval
from pytest_gpuperf._gates.verdict import Verdict, regression_verdict
from pytest_gpuperf._plugin.options import SETTINGS, Settings
from pytest_gpuperf._gates.regression import RegressionCheck, compare_entries
from pytest_gpuperf._store.baselines import BaselineFile, BaselineEntry, parse_estimate
from pytest_gpuperf._store.levels import levels_json
from tests.gemm_schedules import test_perf

EVIDENCE = Path(__file__).resolve().parents[2] / "evidence"
H200 = "nvidia-h200-sm90-132sm-140gib"
H100 = "nvidia-h100-80gb-hbm3-sm90-132sm-79gib"
A_A = ("2026-11-27-h200-faba-aa1", "2026-11-27-h200-faba-aa2", "2026-11-27-h200-c700-gemm-aa")
PLANTED = "2026-11-27-h200-c700-gemm-planted-stored"  # Ping-pong 8192^3 12-13% slower
# Run on another H200 with these bands in force, after the bands were chosen: the suite
# twice, and the planted Ping-pong slowdown once.
H200_A_A_RUN = ("2026-11-27-h200-bb93-gpuonly", "2026-11-27-h200-bb93-whole-nauto")
H200_PLANTED_RUN = "2026-11-27-h200-bb93-gemm-planted-stored"
H100_A_A = ("2026-11-27-h100-59be-gemm-aa1", "2026-11-27-h100-59be-gemm-aa2")
H100_PLANTED = "2026-11-27-h100-59be-gemm-planted-stored"
H100_SLOW_DECODE = "2026-11-27-h100-d927-gpuonly"  # decode GEMMs 16-21% over the stored H100 baselines


# A run's settings at their defaults (what the test's markers then override).
DEFAULTS = {setting.name: setting.default for setting in SETTINGS}
SESSION = Settings(
    enabled=True, update_baselines=False, baselines_dir=Path("baselines"), device="auto", json_path=None,
    tolerance=DEFAULTS["tolerance"], machine_noise=DEFAULTS["machine-noise"], confidence=DEFAULTS["confidence"],
    precision=DEFAULTS["precision"], budget=DEFAULTS["budget"], inconclusive=DEFAULTS["inconclusive"],
    missing_baseline=DEFAULTS["missing-baseline"], cache=DEFAULTS["cache"], sources={},
    calibrated_noise=DEFAULTS["calibrated-noise"],
)


class _Bands:
    """A pytest plugin for a collect-only run of test_perf.py: each collected test's band per GPU,
    as the gpu_perf fixture resolves it (``Settings.for_test`` on the real item)."""

    def __init__(self, device_keys: tuple[str, ...]) -> None:
        self.device_keys = device_keys
        self.settings: dict[tuple[str, str], Settings] = {}

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            for key in self.device_keys:
                self.settings[(item.nodeid, key)] = SESSION.for_test(item, key)


@functools.cache
def _collected_settings() -> dict[tuple[str, str], Settings]:
    plugin = _Bands((H200, H100))
    code = pytest.main(["--collect-only", "-qq", "-p", "no:cacheprovider", str(test_perf.__file__)], plugins=[plugin])
    assert code == pytest.ExitCode.OK and plugin.settings, code
    return plugin.settings


def calibrated_band(nodeid: str, device_key: str) -> float:
    """The band test_perf.py's markers give this test on this GPU, through the plugin's own rule."""
    return _collected_settings()[(nodeid, device_key)].calibrated_noise


def replayed(report: str, band_of: Any = None) -> list[tuple[str, Verdict]]:
    """Each calibrated regression check of the GEMM perf tests in ``report``, judged again with the
    band test_perf.py gives it (or ``band_of(nodeid, band)``)."""
    data: dict[str, Any] = json.loads(gzip.decompress((EVIDENCE / f"{report}.json.gz").read_bytes()))
    verdicts = []
    for test in data["tests"]:
        if not test["nodeid"].startswith("tests/gemm_schedules/test_perf.py::"):
            continue
        for m in test["measurements"]:
            check = m.get("regression")
            if not check or not check.get("calibrated_by"):
                continue
            slowdown = Interval(check["slowdown"], check["ci_low"], check["ci_high"], check["confidence"])
            band = calibrated_band(test["nodeid"], m["device"])
            if band_of is not None:
                band = band_of(test["nodeid"], band)
            verdicts.append((f"{test['nodeid']}::{m['key'].rpartition('::')[2]}",
                             regression_verdict(slowdown, check["tolerance"], band)))
    return verdicts


@pytest.mark.parametrize("report", A_A + H100_A_A)
def test_every_a_a_check_passes_with_these_bands(report: str) -> None:
    verdicts = replayed(report)
    assert len(verdicts) == 23
    assert [v for v in verdicts if v[1] is not Verdict.PASS] == []


def test_the_planted_ping_pong_slowdown_fails_on_h200s() -> None:
    failed = sorted(name for name, verdict in replayed(PLANTED) if verdict is Verdict.FAIL)
    assert failed == [
        "tests/gemm_schedules/test_perf.py::test_faster_schedule_vs_cublas_at_8192::pingpong",
        "tests/gemm_schedules/test_perf.py::test_pingpong_vs_cooperative[square8192]::pingpong",
    ]


def test_the_narrow_band_is_for_h200s_only() -> None:
    perf = "tests/gemm_schedules/test_perf.py::"
    assert calibrated_band(perf + "test_pingpong_vs_cooperative[square8192]", H200) == 0.03
    assert calibrated_band(perf + "test_pingpong_vs_cooperative[square8192]", H100) == 0.16
    assert calibrated_band(perf + "test_pingpong_vs_cooperative[irregular]", H200) == 0.16
    assert calibrated_band(perf + "test_pingpong_vs_cooperative[decode_m128]", H200) == 0.30
    assert calibrated_band(perf + "test_pingpong_vs_cooperative[decode_m16]", H100) == 0.30
    assert calibrated_band(perf + "test_faster_schedule_vs_cublas_at_8192", H200) == 0.03


def test_the_planted_ping_pong_slowdown_fails_on_h100s() -> None:
    failed = sorted(name for name, verdict in replayed(H100_PLANTED) if verdict is Verdict.FAIL)
    assert failed == ["tests/gemm_schedules/test_perf.py::test_pingpong_vs_cooperative[square8192]::pingpong"]


def test_the_decode_shapes_pass_on_the_h100_where_a_16_percent_band_false_alarmed() -> None:
    assert [v for v in replayed(H100_SLOW_DECODE) if v[1] is not Verdict.PASS] == []
    narrow = replayed(H100_SLOW_DECODE, band_of=lambda nodeid, band: min(band, 0.16))
    assert [name for name, verdict in narrow if verdict is Verdict.FAIL] == [
        "tests/gemm_schedules/test_perf.py::test_pingpong_vs_cooperative[decode_m16]::cooperative"
    ]


@pytest.mark.parametrize("report", H200_A_A_RUN)
def test_the_bands_held_in_force_on_another_h200(report: str) -> None:
    data = json.loads(gzip.decompress((EVIDENCE / f"{report}.json.gz").read_bytes()))
    checks = [
        (m["key"], m["regression"])
        for test in data["tests"]
        if test["nodeid"].startswith("tests/gemm_schedules/test_perf.py::")
        for m in test["measurements"]
        if m.get("regression")
    ]
    assert len(checks) == 23
    assert [key for key, check in checks if check["verdict"] != "pass"] == []
    assert {check["band"] for key, check in checks if "square8192" in key} == {0.03}
    assert [v for v in replayed(report) if v[1] is not Verdict.PASS] == []


def test_the_planted_slowdown_failed_on_another_h200_with_the_bands_in_force() -> None:
    failed = sorted(name for name, verdict in replayed(H200_PLANTED_RUN) if verdict is Verdict.FAIL)
    assert failed == [
        "tests/gemm_schedules/test_perf.py::test_faster_schedule_vs_cublas_at_8192::pingpong",
        "tests/gemm_schedules/test_perf.py::test_pingpong_vs_cooperative[square8192]::pingpong",
    ]


# -- H100 Ping-pong 8192^3: the levels stored in its baseline entry ---------------------------
PING_PONG_8192 = "test_pingpong_vs_cooperative[square8192]::pingpong"
H100_LEVEL_RUNS = (
    "2026-11-27-h100-4dfb-aa1", "2026-11-27-h100-4dfb-aa2", "2026-11-27-h100-59be-gemm-aa1",
    "2026-11-27-h100-59be-gemm-aa2", "2026-11-27-h100-59be-gpuonly", "2026-11-27-h100-705d-aa1",
    "2026-11-27-h100-705d-aa2", "2026-11-27-h100-c18e-aa", "2026-11-27-h100-d927-against-aa",
    "2026-11-27-h100-d927-gpuonly", "2026-11-27-h100-e800-gemm-aa", "2026-11-27-h100-b98c-gemm-aa1",
    "2026-11-27-h100-b98c-gemm-aa2", "2026-11-27-h100-b98c-gemm-aa3", "2026-11-27-h100-e631-gemm-aa",
)  # every A/A run of the GEMM suite on H100s in evidence/ (eight machines): what `gpuperf levels` read
# The planted Ping-pong slowdowns run against the stored levels on two H100s: 160 MiB of extra work
# after each GEMM (12.8-13.0% under --gpu-perf-against) and 80 MiB (6.5-6.7%).
H100_PLANTED_AGAINST_LEVELS = (
    "2026-11-27-h100-b98c-gemm-planted160-stored", "2026-11-27-h100-b98c-gemm-planted80-stored",
    "2026-11-27-h100-e631-gemm-planted160-stored1", "2026-11-27-h100-e631-gemm-planted160-stored2",
    "2026-11-27-h100-e631-gemm-planted80-stored1", "2026-11-27-h100-e631-gemm-planted80-stored2",
    "2026-11-27-h100-4ca5-gemm-planted80-stored1", "2026-11-27-h100-4ca5-gemm-planted80-stored2",
)


def ping_pong_run(report: str) -> dict[str, Any]:
    """The calibrated Ping-pong 8192^3 measurement of a report (its summary, as a baseline entry takes it)."""
    data = json.loads(gzip.decompress((EVIDENCE / f"{report}.json.gz").read_bytes()))
    (m,) = [m for t in data["tests"] for m in t["measurements"] if m["key"] == PING_PONG_8192]
    return dict(m["measurement"])


def stored_h100_entry() -> BaselineEntry:
    path = Path(__file__).resolve().parents[2] / "baselines" / H100 / "tests.gemm_schedules.test_perf.json"
    return BaselineFile.read(path).entries[PING_PONG_8192]  # type: ignore[union-attr]


def judged(run: dict[str, Any], stored: BaselineEntry, slower: float = 1.0) -> RegressionCheck:
    """``run`` (made ``slower`` times as slow) judged against ``stored`` as the gate judges it, with the
    bands test_perf.py gives Ping-pong 8192^3 on an H100."""
    settings = _collected_settings()[(f"tests/gemm_schedules/test_perf.py::{PING_PONG_8192.partition('::')[0]}", H100)]
    now = BaselineEntry.from_measurement(run)
    cal = dict(run["calibration"])
    for field in ("log_center", "batch_low", "batch_high"):
        cal[field] += math.log(slower)
    return compare_entries(now.with_extra(calibration=cal), stored, run["confidence"], settings.tolerance, settings.bands)


def leave_one_out(report: str) -> BaselineEntry:
    """The stored entry with its levels derived again from every other A/A run (the check is then
    out of sample)."""
    stored = stored_h100_entry()
    others = [ping_pong_run(r) for r in H100_LEVEL_RUNS if r != report]
    estimates = [parse_estimate(m["calibration"]) for m in others]
    found = find_levels([e for e in estimates if e], min(m["confidence"] for m in others), 0.03)
    return stored.with_extra(levels=levels_json(found, "reference:gemm", 0.03, [{}] * len(others)))


def test_the_stored_levels_are_the_two_seen_on_eight_h100s() -> None:
    levels = stored_h100_entry().levels()
    assert levels is not None
    assert [round(math.exp(level.center), 2) for level in levels[1]] == [7.56, 8.83]
    runs = [ping_pong_run(r) for r in H100_LEVEL_RUNS]
    found = find_levels([parse_estimate(m["calibration"]) for m in runs], min(m["confidence"] for m in runs), 0.03)  # type: ignore[misc]
    assert [(level.center, level.se, len(members)) for level, members in found] == [
        (level.center, level.se, runs) for level, runs in zip(levels[1], (8, 4), strict=True)
    ]


@pytest.mark.parametrize("report", H100_LEVEL_RUNS)
def test_no_h100_a_a_run_fails_against_levels_found_without_it(report: str) -> None:
    """Every run passes: it sits at a level, or its batches visited both."""
    check = judged(ping_pong_run(report), leave_one_out(report))
    assert check.levels and check.verdict is Verdict.PASS, check


def test_the_planted_slowdown_fails_against_the_stored_levels() -> None:
    check = judged(ping_pong_run(H100_PLANTED), stored_h100_entry())
    assert check.verdict is Verdict.FAIL and check.level == 1 and check.slowdown.low > 1.08


def test_slowdowns_of_runs_at_a_level_are_caught_or_left_undecided_never_passed() -> None:
    """Each A/A run made slower (its estimate and batch medians), against levels found without it.
    No run that sat at one level (a narrow interval) passes 5% or 8% slower: 5% slower, 8 of the 13
    fail and the rest, whose intervals reach within 3% of the level or whose batches are not
    independent, are INCONCLUSIVE; 8% slower, 10 fail. The two wide runs are INCONCLUSIVE
    (docs/statistics.md)."""
    narrow, by_slowdown = set(), {1.05: {}, 1.08: {}}  # type: ignore[var-annotated]
    for report in H100_LEVEL_RUNS:
        run = ping_pong_run(report)
        if is_narrow(parse_estimate(run["calibration"]), run["confidence"], 0.03):  # type: ignore[arg-type]
            narrow.add(report)
        for slower, verdicts in by_slowdown.items():
            verdicts[report] = judged(run, leave_one_out(report), slower).verdict
    assert len(narrow) == 13
    for verdicts in by_slowdown.values():
        assert [r for r in narrow if verdicts[r] is Verdict.PASS] == []
    assert [sum(v is Verdict.FAIL for v in verdicts.values()) for verdicts in by_slowdown.values()] == [8, 10]
    assert {by_slowdown[1.05][r] for r in set(H100_LEVEL_RUNS) - narrow} == {Verdict.INCONCLUSIVE}
    assert {by_slowdown[1.08][r] for r in set(H100_LEVEL_RUNS) - narrow} == {Verdict.INCONCLUSIVE}


@pytest.mark.parametrize(
    "report, verdict, level, slowdown",
    [
        ("2026-11-27-h100-b98c-gemm-planted160-stored", Verdict.INCONCLUSIVE, 1, 0.959),
        ("2026-11-27-h100-b98c-gemm-planted80-stored", Verdict.INCONCLUSIVE, 1, 1.014),
        ("2026-11-27-h100-e631-gemm-planted160-stored1", Verdict.INCONCLUSIVE, 1, 0.963),
        ("2026-11-27-h100-e631-gemm-planted160-stored2", Verdict.FAIL, 1, 1.096),
        ("2026-11-27-h100-e631-gemm-planted80-stored1", Verdict.FAIL, 0, 1.064),
        ("2026-11-27-h100-e631-gemm-planted80-stored2", Verdict.INCONCLUSIVE, 1, 0.932),
        ("2026-11-27-h100-4ca5-gemm-planted80-stored1", Verdict.FAIL, 0, 1.058),
        ("2026-11-27-h100-4ca5-gemm-planted80-stored2", Verdict.INCONCLUSIVE, 1, 0.939),
        (H100_PLANTED, Verdict.FAIL, 1, 1.111),
    ],
)
def test_no_planted_slowdown_run_on_a_gpu_passes_against_the_stored_levels(
    report: str, verdict: Verdict, level: int, slowdown: float
) -> None:
    """The table in docs/statistics.md, replayed: every planted run fails or is INCONCLUSIVE."""
    check = judged(ping_pong_run(report), stored_h100_entry())
    assert (check.verdict, check.level, round(check.slowdown.estimate, 3)) == (verdict, level, slowdown)


def test_the_final_rule_ran_on_an_h100() -> None:
    """CI's GPU job on a fifth H100 with the levels in force passed all 198 regression checks; with
    the 80 MiB patch, the check against the levels failed once and was INCONCLUSIVE once, as replayed."""

    def verdicts(report: str) -> dict[tuple[str, str], str]:
        data = json.loads(gzip.decompress((EVIDENCE / f"{report}.json.gz").read_bytes()))
        return {(m["module"], m["key"]): m["regression"]["verdict"]
                for t in data["tests"] for m in t["measurements"] if m.get("regression")}

    data = json.loads(gzip.decompress((EVIDENCE / "2026-11-27-h100-4ca5-gpuonly.json.gz").read_bytes()))
    job = [m["regression"]["verdict"] for t in data["tests"] for m in t["measurements"] if m.get("regression")]
    assert len(job) == 198 and set(job) == {"pass"}
    gemm = ("tests/gemm_schedules/test_perf.py", PING_PONG_8192)
    assert verdicts("2026-11-27-h100-4ca5-gemm-planted80-stored1")[gemm] == "fail"
    assert verdicts("2026-11-27-h100-4ca5-gemm-planted80-stored2")[gemm] == "inconclusive"


def test_under_against_with_shared_buffers_only_the_planted_kernel_fails() -> None:
    """With the GEMM buffers shared between the revisions (gpu_perf.shared), the decode GEMMs time at
    1.000 against their namesakes; before, the same patch's extra allocation made two of them fail."""

    def failed(report: str) -> list[str]:
        data = json.loads(gzip.decompress((EVIDENCE / f"{report}.json.gz").read_bytes()))
        return sorted(m["key"] for t in data["tests"] for m in t["measurements"]
                      if (m.get("regression") or {}).get("verdict") == "fail")

    planted = ["test_faster_schedule_vs_cublas_at_8192::pingpong", PING_PONG_8192]
    assert failed("2026-11-27-h100-e631-gemm-planted160-against") == planted
    assert failed("2026-11-27-h100-e631-gemm-planted80-against") == planted
    assert failed("2026-11-27-h100-4ca5-gemm-planted80-against") == planted
    assert failed("2026-11-27-h100-e631-gemm-against-aa") == []
    assert failed("2026-11-27-h100-b98c-gemm-planted160-against") == sorted([
        *planted, "test_pingpong_vs_cooperative[decode_m128]::cooperative",
        "test_pingpong_vs_cooperative[decode_m16]::cooperative"])
