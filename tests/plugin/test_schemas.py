"""The JSON Schemas shipped in the package hold for every file the project writes: each committed
baseline and budget file, a fresh report from a fake-GPU run (with the baselines it recorded), and
the committed reports under measurements/ (slow tier); and they refuse what the readers refuse."""
from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from typing import Any, Callable

import pytest

from pytest_gpuperf.errors import BaselineFileError
from pytest_gpuperf._store.baselines import BaselineFile
from pytest_gpuperf._store.schemas import KINDS, load_schema, schema_errors

jsonschema = pytest.importorskip("jsonschema", reason="the test extra installs jsonschema")

ROOT = Path(__file__).resolve().parents[2]
BASELINES = sorted((ROOT / "baselines").glob("*/*.json"))
REPORTS = sorted((ROOT / "measurements").glob("*/*.json.gz"))


def _kind(data: Any) -> str:
    return str(data["schema"]).split("/")[1]


@pytest.mark.parametrize("kind", KINDS)
def test_each_schema_is_a_valid_draft_2020_12_schema(kind: str) -> None:
    schema = load_schema(kind)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


def test_the_schemas_ship_in_the_package() -> None:
    tomllib = pytest.importorskip("tomllib")
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "*.schema.json" in data["pytest_gpuperf._store.schemas"]
    assert sorted(p.name for p in (ROOT / "pytest_gpuperf" / "_store" / "schemas").glob("*.schema.json")) == sorted(
        f"{k}.schema.json" for k in KINDS
    )


def test_the_report_schema_describes_stored_entries_as_the_baselines_schema_does() -> None:
    report, baselines = load_schema("report"), load_schema("baselines")
    for name in ("device", "entry", "estimate", "calibration"):
        assert report["$defs"][name] == baselines["$defs"][name], f"$defs.{name} differs between the two schemas"


def test_every_committed_baseline_and_budget_file_is_valid() -> None:
    assert len(BASELINES) >= 10
    kinds = set()
    for path in BASELINES:
        data = json.loads(path.read_text())
        kinds.add(_kind(data))
        assert schema_errors(data, _kind(data)) == [], path
    assert kinds == {"baselines", "static-budgets"}


@pytest.mark.slow
def test_every_committed_report_is_valid() -> None:
    checked = 0
    for path in REPORTS:
        data = json.loads(gzip.decompress(path.read_bytes()))
        if isinstance(data, dict) and str(data.get("schema", "")).startswith("pytest-gpuperf/report/"):
            assert schema_errors(data, "report") == [], path
            checked += 1
    assert checked > 50


PERF_TEST = """
import pytest
from pytest_gpuperf import Variant

@pytest.mark.parametrize("n", [1, 4])
def test_claim(gpu_perf, n):
    gpu_perf.assert_speedup(Variant("fast", lambda: None, bytes=1000, flops=10), Variant("slow", lambda: None), at_least=1.1)
    gpu_perf.record("bandwidth_fraction", 0.5, "")

def test_alone(gpu_perf):
    gpu_perf.measure(Variant("solo", lambda: None))
"""


@pytest.fixture
def fresh_run(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> Callable[..., dict[str, Any]]:
    pytester.makepyfile(test_perf=PERF_TEST)

    def run(*args: str, **times: float) -> dict[str, Any]:
        fake_gpu(times=times)
        pytester.runpytest("--gpu-perf", "--gpu-perf-json=report.json", *args)
        return dict(json.loads((pytester.path / "report.json").read_text()))

    return run


def test_a_fresh_report_and_the_baselines_it_recorded_are_valid(pytester: pytest.Pytester, fresh_run: Callable[..., dict[str, Any]]) -> None:
    recorded = fresh_run("--gpu-perf-update-baselines", fast=10e-6, slow=12e-6, solo=3e-6)
    assert schema_errors(recorded, "report") == []
    assert recorded["baseline_changes"], "the update run lists what it wrote"
    files = sorted((pytester.path / "baselines").glob("*/*.json"))
    assert files
    for path in files:
        assert schema_errors(json.loads(path.read_text()), "baselines") == [], path
    judged = fresh_run(fast=11e-6, slow=12e-6, solo=3e-6)  # fast regressed by 10%: judged, failing
    assert schema_errors(judged, "report") == []
    records = [m for t in judged["tests"] for m in t["measurements"]]
    assert any(m["regression"] and m["regression"]["verdict"] == "fail" for m in records)
    assert all(m["baseline"] for m in records), "every record carries the entry it was judged against"
    assert "provenance" in judged and "health" in judged


def _fresh_entry() -> dict[str, Any]:
    path = next(p for p in BASELINES if _kind(json.loads(p.read_text())) == "baselines")
    data = json.loads(path.read_text())
    return data


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda d, e: e.update(median_s=-1.0), "median_s"),
        (lambda d, e: e.update(mode="warm"), "mode"),
        (lambda d, e: e.update(confidence=1.5), "confidence"),
        (lambda d, e: e.pop("recorded_at"), "recorded_at"),
        (lambda d, e: e.update(n=2.5), "n"),
        (lambda d, e: d.update(schema="pytest-gpuperf/baselines/2"), "schema"),
        (lambda d, e: d.pop("device"), "device"),
        (lambda d, e: e.update(calibration={"log_center": 0.1, "log_se": 0.01, "df": 9}), "reference"),
        (lambda d, e: e.update(median_s=1e300, ci_high_s=1e301), "median_s"),
        (lambda d, e: e.update(median_s=5e-324, ci_low_s=5e-324), "median_s"),
        (lambda d, e: e.update(estimate={"log_center": -11.0, "log_se": 0.0, "df": 9}), "log_se"),
        (lambda d, e: e.update(estimate={"log_center": 690.0, "log_se": 0.01, "df": 9}), "log_center"),
        (lambda d, e: e.update(calibration={"reference": "reference:copy", "log_center": 0.1, "log_se": 0.0, "df": 9}),
         "log_se"),
    ],
    ids=["negative-median", "unknown-mode", "confidence-above-1", "no-recorded-at", "fractional-n", "other-version",
         "no-device", "calibration-without-reference", "median-1e300", "median-subnormal", "estimate-se-0",
         "estimate-past-1000-s", "calibration-se-0"],
)
def test_the_baselines_schema_refuses_what_the_reader_refuses(change: Callable[[dict[str, Any], dict[str, Any]], Any], where: str) -> None:
    data = copy.deepcopy(_fresh_entry())
    entry = next(iter(data["entries"].values()))
    change(data, entry)
    errors = schema_errors(data, "baselines")
    assert errors and any(where in e for e in errors), errors
    with pytest.raises(BaselineFileError):
        BaselineFile.validate(Path("m.json"), data)


def test_the_budget_schema_keeps_version_1_without_instruction_counts() -> None:
    data = {"schema": "pytest-gpuperf/static-budgets/1", "modules": {"m": {"sm_90": {
        "toolchain": "nvcc 13.0", "recorded_at": "2026-11-27T00:00:00+00:00",
        "kernels": {"k": {"registers": 32, "spill_stores": 0, "spill_loads": 0, "shared_bytes": 0, "stack_bytes": 0}}}}}}
    assert schema_errors(data, "static-budgets") == []
    data["modules"]["m"]["sm_90"]["kernels"]["k"]["sass_instructions"] = 100
    assert schema_errors(data, "static-budgets"), "version 1 has no instruction counts"
    data["schema"] = "pytest-gpuperf/static-budgets/2"
    assert schema_errors(data, "static-budgets") == []
    data["modules"]["m"]["sm_90"]["kernels"]["k"]["registers_typo"] = 1
    assert any("registers_typo" in e for e in schema_errors(data, "static-budgets")), "the reader refuses unknown keys"
    data["modules"]["m"]["sm90"] = data["modules"]["m"].pop("sm_90")
    assert schema_errors(data, "static-budgets")


def test_the_report_schema_refuses_a_wrong_verdict_and_a_missing_median(fresh_run: Callable[..., dict[str, Any]]) -> None:
    report = fresh_run(fast=10e-6, slow=12e-6, solo=3e-6)
    bad = copy.deepcopy(report)
    bad["tests"][0]["measurements"][0]["verdict"] = "ok"
    del bad["tests"][0]["measurements"][1]["measurement"]["median_s"]
    errors = schema_errors(bad, "report")
    assert any(e.startswith("tests[0].measurements[0].verdict") for e in errors), errors
    assert any("median_s" in e for e in errors), errors
