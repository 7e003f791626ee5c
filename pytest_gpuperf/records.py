"""The records a test attaches to its report, one per result, as the JSON they travel in.

A record crosses from the test to the session on the test's report (``user_properties``), which
pytest-xdist carries from a worker to the controller as plain JSON-like data; so a record is a
dict, and these TypedDicts say which keys each kind has. ``kind`` tells the kinds apart, and a
type checker narrows a ``Record`` on it. ``from_report`` is the one place a value from a report
becomes a Record.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict, TypeGuard


class _OnInconclusive(TypedDict, total=False):
    """On a result whose verdict is inconclusive or contended, the --gpu-perf-inconclusive in force
    for its test ("warn" or "fail"): whether it failed the test or passed with a warning."""

    on_inconclusive: str


class MeasurementSummary(TypedDict):
    """``Measurement.summary()``: the statistics of one variant, no raw samples."""

    name: str
    median_s: float
    ci_low_s: float
    ci_high_s: float
    confidence: float
    n: int
    spread: float
    mode: str
    method: str
    batch: int
    throttled: bool
    bytes: int | None
    flops: int | None
    bandwidth: float | None
    flop_rate: float | None
    stop_reason: str
    sm_clock_mhz: list[float | None]
    clock_reasons: list[str]
    notes: list[str]
    health: dict[str, Any] | None
    stream_audit: str
    estimate: dict[str, Any] | None
    calibration: dict[str, Any] | None
    looks: int
    wall_s: float


class ComparisonSummary(_OnInconclusive):
    """``Comparison.summary()``: a speedup claim's outcome (and, when undecided, ``on_inconclusive``)."""

    fast: str
    baseline: str
    speedup: float
    ci_low: float
    ci_high: float
    confidence: float
    at_least: float | None
    verdict: str
    rounds: int
    notes: list[str]
    level_shift: dict[str, Any] | None
    estimate: dict[str, Any] | None
    looks: int
    wall_s: float


class _MeasurementNote(_OnInconclusive, total=False):
    note: str  # why it was not judged: no stored baseline for it
    not_recorded: str  # update mode: why it was not stored (the entry or the file was refused)
    levels: dict[str, Any]  # update mode: the replaced entry's stored levels, kept (the new time sits at one)


class MeasurementRecord(_MeasurementNote):
    """One variant timed, and how it stood against its stored baseline (or REV's namesake)."""

    kind: Literal["measurement"]
    test: str
    module: str
    key: str  # "<test>::<variant>": the entry's key in the baselines file
    device: dict[str, Any]
    measurement: MeasurementSummary
    samples: list[float]
    baseline: dict[str, Any] | None
    regression: dict[str, Any] | None
    verdict: str


class ComparisonRecord(TypedDict):
    kind: Literal["comparison"]
    test: str
    comparison: ComparisonSummary


class FigureRecord(TypedDict):
    """An extra figure a test attached with ``gpu_perf.record``."""

    kind: Literal["figure"]
    test: str
    key: str
    value: float
    unit: str


class StaticRecord(TypedDict):
    """One module built for one architecture by the compile-time tier, and its verdict."""

    kind: Literal["static"]
    test: str
    module: str
    arch: str
    toolchain: str  # e.g. "nvcc 13.0.88"
    budget_file: str
    budget_toolchain: str | None
    kernels: list[dict[str, Any]]
    ptxas_warnings: list[str]
    facts: list[dict[str, Any]]
    stale_budgets: list[str]
    cached: bool
    seconds: float
    build_seconds: float | None
    verdict: str
    budget_note: str | None
    changes: list[dict[str, Any]]


class CountersRecord(TypedDict):
    """Hardware counters of one profiled launch (``CounterResult.to_json()``), with its label."""

    kind: Literal["counters"]
    test: str
    label: str
    kernel: str
    launch_id: int | None
    block: Any
    grid: Any
    device: Any
    metrics: dict[str, dict[str, Any]]
    derived: dict[str, Any]
    ideal_read_bytes: int | None
    ideal_write_bytes: int | None
    iterations: int
    missing_metrics: list[str]


Record = MeasurementRecord | ComparisonRecord | FigureRecord | StaticRecord | CountersRecord
KINDS = frozenset({"measurement", "comparison", "figure", "static", "counters"})


def is_record(value: object) -> TypeGuard[Record]:
    """Whether a value from a report's user properties is one of the plugin's records."""
    return isinstance(value, dict) and value.get("kind") in KINDS
