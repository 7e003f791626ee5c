"""The gates' rules replayed on H100 runs (docs/statistics.md, "The current rules on H100s").

Each report in ``REPORTS`` holds every sample of a merge or GEMM suite run on an H100, under the
rules as they are now. Every speedup claim's verdict is computed again from its samples (the
per-round ratios through ``batch_estimate`` and ``speedup_verdict``), and every regression check's
from the run's calibrated estimate and the stored H100 baseline, as the gate judges them; both
must give what the run printed. The A/A runs failed nothing and the planted runs failed exactly
the checks of the kernel the patch slowed.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_gpuperf._gates.stats import batch_estimate
from pytest_gpuperf._gates.verdict import Bands, speedup_verdict
from pytest_gpuperf._gates.regression import compare_entries
from pytest_gpuperf._store.baselines import BaselineFile, BaselineEntry

ROOT = Path(__file__).resolve().parents[2]
EVIDENCE = ROOT / "evidence"
H100 = "nvidia-h100-80gb-hbm3-sm90-132sm-79gib"
A_A = ("2026-11-27-h100-148d-merge-aa", "2026-11-27-h100-6a6c-gemm-aa", "2026-11-27-h100-6a6c-against-aa")
PLANTED = ("2026-11-27-h100-148d-merge-planted", "2026-11-27-h100-6a6c-merge-planted-against")
REPORTS = A_A + PLANTED


def report(name: str) -> dict[str, Any]:
    return json.loads(gzip.decompress((EVIDENCE / f"{name}.json.gz").read_bytes()))


def stored(module: str, key: str) -> BaselineEntry:
    path = ROOT / "baselines" / H100 / (module.removesuffix(".py").replace("/", ".") + ".json")
    baselines = BaselineFile.read(path)
    assert baselines is not None
    return baselines.entries[key]


def samples_of(test: dict[str, Any], name: str) -> np.ndarray:
    (m,) = [m for m in test["measurements"] if m["measurement"]["name"] == name]
    return np.log(np.asarray(m["samples"], dtype=np.float64))


@pytest.mark.parametrize("name", REPORTS)
def test_each_claim_decides_again_as_the_run_did(name: str) -> None:
    claims = 0
    for test in report(name)["tests"]:
        for c in test["comparisons"]:
            if c["at_least"] is None:
                continue
            est = batch_estimate(samples_of(test, c["baseline"]) - samples_of(test, c["fast"]))
            assert est is not None
            interval = est.interval(c["confidence"])
            assert interval.estimate == pytest.approx(c["speedup"], rel=1e-9)
            assert speedup_verdict(interval, c["at_least"], est.independent).value == c["verdict"], test["nodeid"]
            claims += 1
    assert claims >= 7


@pytest.mark.parametrize("name", [n for n in REPORTS if "against" not in n])
def test_each_check_against_the_stored_baseline_decides_again_as_the_run_did(name: str) -> None:
    checks = 0
    for test in report(name)["tests"]:
        for m in test["measurements"]:
            reg = m["regression"]
            if not reg:
                continue
            bands = Bands(reg["band"], reg["band"], reg["band"])
            now = BaselineEntry.from_measurement(m["measurement"])
            check = compare_entries(now, stored(m["module"], m["key"]), reg["confidence"], reg["tolerance"], bands)
            assert check.slowdown.estimate == pytest.approx(reg["slowdown"], rel=1e-9)
            assert check.verdict.value == reg["verdict"], m["key"]
            checks += 1
    assert checks >= 23


@pytest.mark.parametrize("name", A_A)
def test_a_a_runs_failed_nothing(name: str) -> None:
    verdicts = [m["regression"]["verdict"] for t in report(name)["tests"] for m in t["measurements"] if m["regression"]]
    verdicts += [c["verdict"] for t in report(name)["tests"] for c in t["comparisons"]]
    assert "fail" not in verdicts and len(verdicts) >= 30


@pytest.mark.parametrize("name", PLANTED)
def test_planted_runs_failed_the_slowed_kernel_and_nothing_else(name: str) -> None:
    failed = {m["key"] for t in report(name)["tests"] for m in t["measurements"] if (m["regression"] or {}).get("verdict") == "fail"}
    assert len(failed) == 10 and all(key.endswith("::vectorized") for key in failed)
