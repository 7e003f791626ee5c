"""The JSON a measurement and a speedup claim summarise themselves as (``Measurement.summary()``,
``Comparison.summary()``): the statistics, no raw samples. Reports carry them inside their records."""

from __future__ import annotations

from typing import Any, TypedDict


class OnInconclusive(TypedDict, total=False):
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


class _ComparisonNote(OnInconclusive, total=False):
    breakdowns: dict[str, Any]  # a claim that failed or is undecided: each variant's kernels, by name
    gpu_seconds: float  # the seconds the claim held the GPU (wall_s): warm-up, capture, sampling
    budget_s: float  # the sampling budget in force for the claim (``gpuperf plan`` reads it)


class ComparisonSummary(_ComparisonNote):
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
    detectable_slowdown: float | None
