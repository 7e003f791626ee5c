"""Fuzzing the readers of baseline and report files: every document gives a result or one clean
error line (exit status 0 or 1), never an unhandled exception.

Valid documents are mutated at a random field (wrong types, 1e308, integers past the float
range, NaN and Infinity tokens, mathtext, deep values), or replaced at the text level (deep
nesting, truncation, binary, gzip), then fed to ``gpuperf report``, ``list``, ``diff`` and
``check`` and to the charts' loader and row builders.
"""
from __future__ import annotations

import copy
import gzip
import io
import json
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_gpuperf._report.plots import page, shape
from pytest_gpuperf._cli.main import main
from pytest_gpuperf.errors import GpuPerfError
from pytest_gpuperf._store.schema_versions import REPORT_SCHEMA
from pytest_gpuperf._store.reports import load_report

KEY = "nvidia-h200-sm90-132sm-140gib"
ENTRY = {"median_s": 1e-5, "ci_low_s": 0.9e-5, "ci_high_s": 1.1e-5, "confidence": 0.99, "n": 40, "spread": 0.01,
         "mode": "cold", "method": "graph", "recorded_at": "2026-11-21T10:00:00+00:00", "bytes": 1000, "sm_clock_mhz": [1980]}
BASELINE = {"schema": "pytest-gpuperf/baselines/1", "device": {"name": "NVIDIA H200", "key": KEY, "driver_version": "580"},
            "entries": {"test_a[x]::fast": ENTRY, "test_a[x]::slow": {**ENTRY, "median_s": 2e-5, "ci_high_s": 2.1e-5}}}
REPORT = {
    "schema": REPORT_SCHEMA,
    "created": "2026-11-22T00:00:00+00:00",
    "settings": {"cache": "cold", "confidence": 0.99},
    "devices": {KEY: {"name": "NVIDIA H200", "driver_version": "580", "cuda_runtime_version": "13.0"}},
    "tests": [{
        "nodeid": "tests/fam/test_perf.py::test_a[x]",
        "outcome": "passed",
        "measurements": [{"measurement": {"name": "fast", "median_s": 1e-5, "ci_low_s": 0.9e-5, "ci_high_s": 1.1e-5,
                                          "confidence": 0.99, "throttled": False},
                          "verdict": "pass", "note": None,
                          "regression": {"slowdown": 1.01, "ci_low": 0.99, "ci_high": 1.03, "verdict": "pass"}}],
        "comparisons": [{"fast": "fast", "baseline": "slow", "speedup": 2.0, "ci_low": 1.9, "ci_high": 2.1,
                         "at_least": 1.5, "verdict": "pass"}],
        "figures": [{"key": "bandwidth_fraction", "value": 0.8, "unit": ""}],
        "counters": [{"label": "k", "derived": {"dram_fraction": 0.5}}],
    }],
    "skipped": [{"reason": "no GPU", "count": 2}],
    "baseline_changes": [{"key": "test_a[x]::fast", "old_median_s": 1e-5, "new_median_s": 1.1e-5}],
    "summary": {"speedup pass": 1},
}

HOSTILE = st.one_of(
    st.none(), st.booleans(), st.integers(), st.sampled_from([10**400, -(10**400), 2**1024]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e308, -1e308, 5e-324, 0.0, -0.0, 1e-300]),
    st.text(max_size=12), st.sampled_from(["$\\frac{1}{0}$", "a|b\n", "\x00\x1b[31m", "x" * 400]),
    st.lists(st.one_of(st.integers(), st.text(max_size=3), st.none()), max_size=3),
    st.dictionaries(st.text(max_size=6), st.one_of(st.integers(), st.floats(), st.none()), max_size=3),
)


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a document a value can be replaced or removed."""
    found = [at] if at else []
    if isinstance(value, dict):
        for k, v in value.items():
            found += _paths(v, at + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _paths(v, at + (i,))
    return found


@st.composite
def documents(draw: st.DrawFn, base: dict[str, Any]) -> bytes:
    """A mutated copy of ``base``, serialised (NaN/Infinity tokens included), or a text-level variant."""
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(doc)))
        parent: Any = doc
        for k in path[:-1]:
            parent = parent[k]
        if draw(st.booleans()) and isinstance(parent, dict):
            parent.pop(path[-1], None)
        else:
            parent[path[-1]] = draw(HOSTILE)
        if not _paths(doc):
            break
    text = json.dumps(doc).encode()  # allow_nan: NaN and Infinity become tokens
    variant = draw(st.sampled_from(["plain"] * 6 + ["deep", "truncated", "binary", "gzip", "bom", "scalar"]))
    if variant == "deep":
        depth = draw(st.sampled_from([50, 5000, 200_000]))
        return text[:-1] + b', "deep": ' + b"[" * depth + b"]" * depth + b"}"
    if variant == "truncated":
        return text[: draw(st.integers(0, max(0, len(text) - 1)))]
    if variant == "binary":
        return draw(st.binary(max_size=64))
    if variant == "gzip":
        return gzip.compress(text)
    if variant == "bom":
        return b"\xef\xbb\xbf" + text
    if variant == "scalar":
        return draw(st.sampled_from([b"null", b"1e999", b"[]", b'"schema"', b"NaN"]))
    return text


def call(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse; no argument here is malformed, so it must not happen
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def assert_clean(code: int, out: str, err: str) -> None:
    assert code in (0, 1), (code, out, err)
    assert "Traceback" not in out + err
    if err:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("gpuperf: error: "), err


FUZZ = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@FUZZ
@given(documents(REPORT))
def test_reports_give_a_result_or_a_clean_error(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "reports"
        folder.mkdir()
        path = folder / "r.json"
        path.write_bytes(content)
        for fmt in ("--markdown", "--text"):
            assert_clean(*call("report", str(path), fmt))
        assert_clean(*call("check", str(folder)))
        try:
            report = load_report(path)
        except GpuPerfError:
            return
        tests = shape.group_by_family(report)
        for family_tests in tests.values():
            for r in shape.measurement_rows(family_tests) + shape.comparison_rows(family_tests):
                shape.plottable(r, shape.TIME_RANGE)
            for r in shape.fraction_rows(family_tests)[0]:
                shape.plottable(r, shape.FRACTION_RANGE, ("value",))
            page.family_table(family_tests)
        page.write_index(report, tests, {}, Path(tmp))


@FUZZ
@given(documents(BASELINE))
def test_baselines_give_a_result_or_a_clean_error(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "baselines"
        (root / KEY).mkdir(parents=True)
        (root / KEY / "tests.fam.test_perf.json").write_bytes(content)
        other = Path(tmp) / "other"
        (other / KEY).mkdir(parents=True)
        (other / KEY / "tests.fam.test_perf.json").write_text(json.dumps(BASELINE))
        before = content
        for argv in (("list", str(root)), ("check", str(root)), ("diff", str(other), str(root)),
                     ("diff", str(root / KEY / "tests.fam.test_perf.json"), str(other / KEY / "tests.fam.test_perf.json")),
                     ("diff", "--all", str(root / KEY), str(other / KEY))):
            assert_clean(*call(*argv))
        assert (root / KEY / "tests.fam.test_perf.json").read_bytes() == before, "a reader never writes"


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(documents(REPORT))
def test_charts_of_any_loadable_report_render(content: bytes) -> None:
    pytest.importorskip("matplotlib")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "r.json"
        path.write_bytes(content)
        code = call("plots", str(path), str(Path(tmp) / "plots"))[0]
        assert code in (0, 1)
