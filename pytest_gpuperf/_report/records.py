"""The records a test attaches to its report, one per result, as the JSON they travel in.

A record crosses from the test to the session on the test's report (``user_properties``), which
pytest-xdist carries from a worker to the controller as plain JSON-like data; so a record is a
dict, and these TypedDicts say which keys each kind has. ``kind`` tells the kinds apart, and a
type checker narrows a ``Record`` on it. ``from_report`` is the one place a value from a report
becomes a Record.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict, TypeGuard

from pytest_gpuperf._timing.summaries import ComparisonSummary, MeasurementSummary, OnInconclusive


class _MeasurementNote(OnInconclusive, total=False):
    note: str  # why it was not judged: no stored baseline for it
    not_recorded: str  # update mode: why it was not stored (the entry or the file was refused)
    levels: dict[str, Any]  # update mode: the replaced entry's stored levels, kept (the new time sits at one)
    breakdown: dict[str, Any]  # the kernels of one launch (Breakdown.to_json), or {"unavailable": why}
    breakdown_against: dict[str, Any]  # the same for --gpu-perf-against's revision
    kernel_binaries: list[dict[str, Any]]  # the kernel that moved most, from its binaries on each side
    budget_s: float  # the sampling budget in force for the measurement (``gpuperf plan`` reads it)
    timed_because: str  # --gpu-perf-changed-only: why the test was not proven the same as at REV
    deciding_s: float  # --gpu-perf-changed-only: wall seconds the test's decision took


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


class _IdenticalCost(TypedDict, total=False):
    deciding_s: float  # wall seconds the test's decision took (absent in records made before it existed)


class IdenticalRecord(_IdenticalCost):
    """--gpu-perf-changed-only: a variant proven the same GPU work as at REV, so not timed."""

    kind: Literal["identical"]
    test: str
    module: str
    key: str  # "<test>::<variant>"
    variant: str
    verdict: str  # "pass"
    identical_to: dict[str, Any]  # {"rev", "commit", "kernels", "basis": [how the code was proven]}
    note: str


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


Record = MeasurementRecord | ComparisonRecord | FigureRecord | StaticRecord | CountersRecord | IdenticalRecord
KINDS = frozenset({"measurement", "comparison", "figure", "static", "counters", "identical"})


def is_record(value: object) -> TypeGuard[Record]:
    """Whether a value from a report's user properties is one of the plugin's records."""
    return isinstance(value, dict) and value.get("kind") in KINDS
