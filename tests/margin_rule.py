"""The project's margin rule, checked against the perf reports the sm90 margins were measured in.

margin = floor(100 x 0.95 x ci_low) / 100, ci_low the lowest lower end of the interleaved
comparison's interval over every report listed: H200s (session 3; the GEMMs' sessions 5 and 8)
and the H100 SXMs and H200s of sessions 27 and 28 (each run on a fresh machine of the pool).
"""
from __future__ import annotations

import math
from pathlib import Path

from pytest_gpuperf.report_file import load_report

MEASUREMENTS = Path(__file__).resolve().parents[1] / "measurements"
SESSION27 = MEASUREMENTS / "2026-11-25-session27"
# Sessions 27-28: eight H100 SXMs (session 27 runs 1-5, 7, 8; session 28 run 1) and an H200 (session 27
# run 6); each report holds the modules that run timed (run 5: qkv and the megakernel; run 7: the GEMMs).
SESSIONS_27_28_REPORTS = (
    SESSION27 / "run1-update-report.json.gz",
    *(SESSION27 / f"run{n}-perf-report.json.gz" for n in (2, 3, 4, 5, 6, 7, 8)),
    # Session 28 run 1: an eighth H100, every family but the megakernel's. The GEMM family's
    # Ping-pong/Cooperative gate at 6144^3 passed there only 1.3% over the margin that session 27's
    # machines gave, so the rule takes this run too.
    MEASUREMENTS / "2026-11-25-session28" / "run1-perf-report.json.gz",
)
SM90_REPORTS = (MEASUREMENTS / "2026-11-21-h200-session3" / "perf-update-report.json.gz", *SESSIONS_27_28_REPORTS)
# The GEMM family's H200 figures come from sessions 5 and 8 (session 3's were invalid, see its README).
GEMM_SM90_REPORTS = (
    MEASUREMENTS / "2026-11-21-h200-session5" / "perf-update-report.json.gz",
    MEASUREMENTS / "2026-11-22-h200-session8" / "perf-verify-report.json.gz",
    *SESSIONS_27_28_REPORTS,
)


def margin_rule(ci_low: float) -> float:
    """The margin the rule gives for the lowest measured ``ci_low``."""
    return math.floor(round(100 * 0.95 * ci_low, 6)) / 100


def lowest_comparisons(module: str, reports: tuple[Path, ...] = SM90_REPORTS) -> dict[str, dict]:
    """Per test of ``module`` (its name after ``::``), the comparison with the lowest ci_low over
    the ``reports`` that timed the module (with its report's path under ``"report"``); every such
    report must hold the same comparisons."""
    lowest: dict[str, dict] = {}
    seen: list[set[str]] = []
    for report in reports:
        names = set()
        for test in load_report(report)["tests"]:
            path, _, name = test["nodeid"].partition("::")
            if path != module or not test["comparisons"]:
                continue
            (comparison,) = test["comparisons"]
            names.add(name)
            if name not in lowest or comparison["ci_low"] < lowest[name]["ci_low"]:
                lowest[name] = {**comparison, "report": report}
        if names:
            seen.append(names)
    assert seen and all(names == seen[0] for names in seen), f"{module}: the reports measured different tests"
    return lowest
