"""The GEMM suite's regression bands against the H200 runs they were chosen from: replayed through
the gate's own rule (``regression_verdict``), every A/A check passes and the planted Ping-pong
slowdown fails. A band changed in test_perf.py is checked here against the same reports."""
from __future__ import annotations

import fnmatch
import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest

from pytest_gpuperf.gates.stats import Interval
from pytest_gpuperf.gates.verdict import Verdict, regression_verdict
from tests.gemm_schedules import test_perf

EVIDENCE = Path(__file__).resolve().parents[2] / "evidence"
H200 = "nvidia-h200-sm90-132sm-140gib"
A_A = ("2026-11-27-h200-faba-aa1", "2026-11-27-h200-faba-aa2", "2026-11-27-h200-c700-gemm-aa")
PLANTED = "2026-11-27-h200-c700-gemm-planted-stored"  # Ping-pong 8192^3 12-13% slower


def calibrated_band(nodeid: str, device_key: str) -> float:
    """The band test_perf.py's markers give this test on this GPU."""
    band = test_perf.pytestmark.kwargs["calibrated_noise"]
    shape = re.search(r"\[(\w+)\]", nodeid)
    narrow = "at_8192" in nodeid or (shape is not None and shape.group(1) in test_perf.NARROW_SHAPES)
    pattern, = test_perf.NARROW_ON_H200.args
    if narrow and fnmatch.fnmatchcase(device_key, pattern):
        band = test_perf.NARROW_ON_H200.kwargs["calibrated_noise"]
    return float(band)


def replayed(report: str) -> list[tuple[str, Verdict]]:
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
            verdicts.append((f"{test['nodeid']}::{m['key'].rpartition('::')[2]}",
                             regression_verdict(slowdown, check["tolerance"], band)))
    return verdicts


@pytest.mark.parametrize("report", A_A)
def test_every_a_a_check_on_h200s_passes_with_these_bands(report: str) -> None:
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
    assert calibrated_band("x::test_pingpong_vs_cooperative[square8192]", H200) == 0.03
    assert calibrated_band("x::test_pingpong_vs_cooperative[square8192]", "nvidia-h100-80gb-hbm3-sm90-132sm-79gib") == 0.16
    assert calibrated_band("x::test_pingpong_vs_cooperative[decode_m128]", H200) == 0.16
