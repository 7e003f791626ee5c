"""The project's margin rule, checked against the perf reports the sm90 margins were measured in.

margin = floor(100 x 0.95 x ci_low) / 100, ci_low the lowest lower end of the interleaved
comparison's interval over every report listed: H200s (session 3; the GEMMs' sessions 5 and 8)
and two H100 SXMs (session 27).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

MEASUREMENTS = Path(__file__).resolve().parents[1] / "measurements"
H100_REPORTS = (
    MEASUREMENTS / "2026-11-25-session27" / "run1-update-report.json",
    MEASUREMENTS / "2026-11-25-session27" / "run2-perf-report.json",
)
SM90_REPORTS = (MEASUREMENTS / "2026-11-21-h200-session3" / "perf-update-report.json", *H100_REPORTS)
# The GEMM family's H200 figures come from sessions 5 and 8 (session 3's were invalid, see its README).
GEMM_SM90_REPORTS = (
    MEASUREMENTS / "2026-11-21-h200-session5" / "perf-update-report.json",
    MEASUREMENTS / "2026-11-22-h200-session8" / "perf-verify-report.json",
    *H100_REPORTS,
)


def margin_rule(ci_low: float) -> float:
    """The margin the rule gives for the lowest measured ``ci_low``."""
    return math.floor(round(100 * 0.95 * ci_low, 6)) / 100


def lowest_comparisons(module: str, reports: tuple[Path, ...] = SM90_REPORTS) -> dict[str, dict]:
    """Per test of ``module`` (its name after ``::``), the comparison with the lowest ci_low over
    ``reports``; every report must hold the same comparisons."""
    lowest: dict[str, dict] = {}
    seen: list[set[str]] = []
    for report in reports:
        names = set()
        for test in json.loads(report.read_text())["tests"]:
            path, _, name = test["nodeid"].partition("::")
            if path != module or not test["comparisons"]:
                continue
            (comparison,) = test["comparisons"]
            names.add(name)
            if name not in lowest or comparison["ci_low"] < lowest[name]["ci_low"]:
                lowest[name] = comparison
        seen.append(names)
    assert all(names == seen[0] for names in seen), f"{module}: the reports measured different tests"
    return lowest
