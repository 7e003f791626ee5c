"""``gpuperf export --format github-action-benchmark REPORT``: a saved report as other tools read it.

github-action-benchmark (benchmark-action/github-action-benchmark) keeps a trend chart per
benchmark on a gh-pages branch and alerts when a result is worse than the previous one by more
than a threshold. Its ``customSmallerIsBetter`` tool reads a JSON array of
``{"name", "unit", "value", "range"?, "extra"?}``, where ``range`` and ``extra`` are strings
(the action's README, "customBiggerIsBetter and customSmallerIsBetter"; its ``BenchmarkResult``
in src/extract.ts). One entry is written per measured variant:

    name   '<test node id>::<variant> (<device key>)': the device key keeps an H100's and an
           H200's series apart where one runner label serves both
    unit   'us'; value: the median GPU time per launch in microseconds
    range  '± <h>' with h the larger distance from the median to its interval's ends (the form
           the action parses to rescale a range when units change)
    extra  the GPU, the interval itself, the verdict, the change against the stored baseline

Contended measurements (other processes on the GPU) are left out: their times describe the
other processes as much as the code.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

FORMATS = ("github-action-benchmark",)
UNIT = "us"
SCALE = 1e6  # seconds -> microseconds
LEFT_OUT_VERDICTS = ("contended",)


def _number(value: float) -> float:
    """Six significant digits: the trend needs no more, and the file stays readable."""
    return float(f"{value:.6g}")


def benchmark_entries(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The report's measured variants as github-action-benchmark ``customSmallerIsBetter`` entries."""
    devices = report.get("devices") or {}
    entries: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for test in report["tests"]:
        for record in test.get("measurements", []):
            if record.get("verdict") in LEFT_OUT_VERDICTS:
                continue
            m = record["measurement"]
            median, low, high = m["median_s"], m["ci_low_s"], m["ci_high_s"]
            if median is None or low is None or high is None:
                continue
            key = str(record.get("device") or "")
            name = f"{test['nodeid']}::{m['name']}" + (f" ({key})" if key else "")
            seen[name] = seen.get(name, 0) + 1
            if seen[name] > 1:  # one test measuring one variant twice: keep both series apart
                name += f" #{seen[name]}"
            half = max(median - low, high - median) * SCALE
            entries.append(
                {
                    "name": name,
                    "unit": UNIT,
                    "value": _number(median * SCALE),
                    "range": f"± {_number(half)}",
                    "extra": _extra(record, devices.get(key) or {}, key),
                }
            )
    return entries


def _extra(record: Mapping[str, Any], device: Mapping[str, Any], key: str) -> str:
    m = record["measurement"]
    level = m.get("confidence")
    lines = [
        f"GPU: {device.get('name', '?')} ({key or 'unknown device'})",
        f"{100 * level:.3g}% CI: [{_number(m['ci_low_s'] * SCALE)}, {_number(m['ci_high_s'] * SCALE)}] {UNIT}"
        if isinstance(level, (int, float))
        else f"CI: [{_number(m['ci_low_s'] * SCALE)}, {_number(m['ci_high_s'] * SCALE)}] {UNIT}",
        f"verdict: {record.get('verdict', '?')}",
    ]
    reg = record.get("regression")
    if reg:
        change = f"{100 * (reg['slowdown'] - 1):+.1f}%"
        if reg.get("ci_low") is not None and reg.get("ci_high") is not None:
            change += f" [{100 * (reg['ci_low'] - 1):+.1f}%, {100 * (reg['ci_high'] - 1):+.1f}%]"
        lines.append(f"vs stored baseline: {change}")
    if m.get("throttled"):
        lines.append("throttled")
    return "\n".join(lines)


def export(report: Mapping[str, Any], fmt: str) -> str:
    """The report in format ``fmt`` (one of ``FORMATS``), as the text of the file to write."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; the formats are {', '.join(FORMATS)}")
    return json.dumps(benchmark_entries(report), indent=2, ensure_ascii=False) + "\n"
