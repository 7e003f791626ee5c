"""Adaptive sampling: take samples until the interval is narrow enough or the budget is spent.

Stopping depends only on the interval's *width*, never on where it lies relative to a
margin, so stopping early does not inflate false alarms. A speedup claim that is still
undecided gets one extension (a fixed extra budget, then one more look); each of the two
looks uses a quarter of the error rate, which keeps the realised false-fail rate of a true
claim under (1 - confidence) / 2 in simulation.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

from pytest_gpuperf.errors import GpuContended, GpuPerfError, InvalidSample
from pytest_gpuperf.gates import Verdict, speedup_verdict
from pytest_gpuperf.results import CacheMode, ClockState, Comparison, Measurement, Variant
from pytest_gpuperf.stats import (
    Interval,
    LevelShift,
    bootstrap_median_ci,
    level_shift,
    median_ci,
    paired_ratios,
    relative_spread,
)
from pytest_gpuperf.timing.backend import Prepared, TimingBackend
from pytest_gpuperf.timing.health import Health, HealthGuard

MAX_KEPT_CLOCK_STATES = 6
# No launch that does GPU work takes less: an empty kernel replayed from a CUDA graph takes
# 0.78 us on an H100 (2026-11-27). A shorter per-launch time means the work was not timed.
MIN_LAUNCH_S = 0.5e-6


@dataclass(frozen=True)
class SamplingPolicy:
    """How long and how precisely to measure. Defaults suit kernels from 1 µs to 100 ms."""

    confidence: float = 0.99
    precision: float = 0.005  # stop when the interval's half-width is within ±0.5%
    budget_s: float = 1.0  # per measurement (per pair for comparisons), wall/device seconds
    extension_budget_s: float = 2.0  # extra time an undecided speedup claim may take
    min_samples: int = 30
    min_time_s: float = 0.1  # sample at least this long, so a transient cannot make the whole median
    max_samples: int = 4000
    round_size: int = 10
    target_sample_s: float = 1e-3  # one sample = one graph replay of about this long
    throttle_retries: int = 1
    cooldown_s: float = 1.0

    @property
    def look_confidence(self) -> float:
        """Confidence of each of the two looks a speedup claim may take.

        Bonferroni over two looks would give each half the error rate; stopping when the
        interval is narrow (a data-dependent sample size) and the bootstrap's slight
        under-coverage at small n roughly doubled the realised false-fail rate in
        simulation, so each look gets a quarter (tests/plugin/test_gate_statistics.py).
        """
        return 1.0 - (1.0 - self.confidence) / 4.0


@dataclass
class _Run:
    samples: list[list[float]]
    stop_reason: str = ""
    first_clock: ClockState | None = None
    last_clock: ClockState | None = None
    throttled_clocks: list[ClockState] = field(default_factory=list)

    def observe(self, state: ClockState | None) -> None:
        if state is None:
            return
        self.first_clock = self.first_clock or state
        self.last_clock = state
        if state.throttled and len(self.throttled_clocks) < MAX_KEPT_CLOCK_STATES:
            self.throttled_clocks.append(state)

    @property
    def clocks(self) -> list[ClockState]:
        """The first and last clock readings and every throttled one in between."""
        seen = [self.first_clock, *self.throttled_clocks, self.last_clock]
        out: list[ClockState] = []
        for c in seen:
            if c is not None and not any(c is o for o in out):
                out.append(c)
        return out


def _sample(
    backend: TimingBackend,
    prepared: Sequence[Prepared],
    policy: SamplingPolicy,
    budget_s: float,
    converged: Callable[[list[list[float]]], bool],
    run: _Run | None = None,
) -> _Run:
    run = run or _Run([[] for _ in prepared])
    start = backend.now()
    while True:
        for p, acc, new in zip(prepared, run.samples, backend.run_rounds(prepared, policy.round_size)):
            _check_samples(p, new, len(acc))
            acc.extend(new)
        run.observe(backend.clock_state())
        n = len(run.samples[0])
        elapsed = backend.now() - start
        if n >= policy.min_samples and elapsed >= min(policy.min_time_s, budget_s) and converged(run.samples):
            run.stop_reason = "converged"
            return run
        if elapsed >= budget_s:
            run.stop_reason = "budget"
            return run
        if n >= policy.max_samples:
            run.stop_reason = "max_samples"
            return run


def _check_samples(prepared: Prepared, samples: Sequence[float], first_index: int) -> None:
    """Every sample must be a finite, positive time: anything else is an error, never a number."""
    for i, t in enumerate(samples):
        if math.isfinite(t) and t > 0:
            continue
        why = (
            "the cold-mode subtraction of an L2 flush from (flush + launch) came out at or below zero: the "
            "kernel is short next to the flush. Give the Variant rotations= (input copies to cycle) or time it "
            "with cache='hot'"
            if prepared.subtracts_flush
            else "the timing backend returned it; nothing valid can be computed from it"
        )
        raise InvalidSample(
            f"variant {prepared.variant.name!r}: sample {first_index + i + 1} is {t!r} s, not a positive time ({why}).",
            prepared.variant.name,
            t,
        )


@contextlib.contextmanager
def _contention_explains(guard: HealthGuard, backend: TimingBackend, started: float, waited: float) -> Iterator[None]:
    """An impossible sample taken while other processes used the GPU is their doing: contended."""
    try:
        yield
    except InvalidSample as exc:
        health = guard.after(backend, started, waited)
        if health.contended:
            raise GpuContended(
                f"variant {exc.variant!r} gave an impossible sample ({exc.value!r} s) while other processes used "
                f"the GPU ({health.describe_contention()})"
            ) from None
        raise


def _check_floor(m: Measurement) -> None:
    if m.median_s < MIN_LAUNCH_S:
        raise GpuPerfError(
            f"variant {m.name!r}: {m.median_s * 1e6:.4f} us per launch ({m.method}) is below {MIN_LAUNCH_S * 1e6:g} us, "
            "less than an empty kernel takes: its GPU work was not timed (it ran on another stream, or the launch "
            "enqueues nothing). Launch on the timing stream: it is current in CuPy and PyTorch while a variant "
            "runs, and a launch taking one argument is handed it."
        )


def _measurement(
    prepared: Prepared, samples: list[float], policy: SamplingPolicy, run: _Run, device_key: str, health: Health
) -> Measurement:
    ci = median_ci(samples, policy.confidence)
    v = prepared.variant
    return Measurement(
        name=v.name,
        samples=list(samples),
        median_s=ci.estimate,
        ci_low_s=ci.low,
        ci_high_s=ci.high,
        confidence=policy.confidence,
        spread=relative_spread(samples),
        mode=prepared.mode,
        method=prepared.method,
        batch=prepared.batch,
        throttled=any(c.throttled for c in run.clocks),
        clocks=list(run.clocks),
        bytes=v.bytes,
        flops=v.flops,
        device_key=device_key,
        stop_reason=run.stop_reason,
        notes=list(prepared.notes) + health.notes(),
        health=health,
        stream_audit=prepared.stream_audit,
    )


def measure(
    backend: TimingBackend,
    variant: Variant,
    policy: SamplingPolicy,
    cache: CacheMode,
    device_key: str = "",
    guard: HealthGuard | None = None,
) -> Measurement:
    """Time one variant; a throttled measurement is retried after a cool-down, then flagged."""
    guard = guard or HealthGuard(quiet_wait_s=0.0)

    def precise(samples: list[list[float]]) -> bool:
        return median_ci(samples[0], policy.confidence).rel_halfwidth <= policy.precision

    throttle_notes: list[str] = []
    for attempt in range(policy.throttle_retries + 1):
        started, waited = guard.before(backend, f"variant {variant.name!r}")
        prepared = backend.prepare(variant, variant.cache or cache, policy.target_sample_s)
        try:
            with _contention_explains(guard, backend, started, waited):
                run = _sample(backend, [prepared], policy, policy.budget_s, precise)
        finally:
            backend.release(prepared)
        result = _measurement(prepared, run.samples[0], policy, run, device_key, guard.after(backend, started, waited))
        _check_floor(result)
        if not result.throttled:
            break
        throttle_notes.append(f"GPU throttled during attempt {attempt + 1}: {_reasons(run.clocks)}")
        if attempt < policy.throttle_retries:
            backend.pause(policy.cooldown_s)
    result.notes.extend(throttle_notes)
    return result


def compare(
    backend: TimingBackend,
    fast: Variant,
    baseline: Variant,
    policy: SamplingPolicy,
    at_least: float | None,
    cache: CacheMode,
    device_key: str = "",
    guard: HealthGuard | None = None,
) -> Comparison:
    """Measure ``fast`` and ``baseline`` interleaved and judge the claim speedup >= at_least."""
    look = policy.look_confidence
    guard = guard or HealthGuard(quiet_wait_s=0.0)

    def precise(samples: list[list[float]]) -> bool:
        f, b = samples
        return median_ci(paired_ratios(b, f), look).rel_halfwidth <= policy.precision

    def judge(run: _Run) -> tuple[Interval, LevelShift | None, Verdict]:
        ratios = paired_ratios(run.samples[1], run.samples[0])
        speedup = bootstrap_median_ci(ratios, look)
        shift = level_shift(ratios)
        verdict = speedup_verdict(speedup, at_least)
        if shift is not None and at_least is not None and shift.lowest_median < at_least <= shift.highest_median:
            verdict = Verdict.INCONCLUSIVE  # part of the run clears the margin, part does not
        return speedup, shift, verdict

    started, waited = guard.before(backend, f"variants {fast.name!r} and {baseline.name!r}")
    pf = backend.prepare(fast, fast.cache or cache, policy.target_sample_s)
    pb = backend.prepare(baseline, baseline.cache or cache, policy.target_sample_s)
    try:
        with _contention_explains(guard, backend, started, waited):
            run = _sample(backend, [pf, pb], policy, policy.budget_s, precise)
            speedup, shift, verdict = judge(run)
            if verdict is Verdict.INCONCLUSIVE and policy.extension_budget_s > 0:
                run = _sample(backend, [pf, pb], policy, policy.extension_budget_s, lambda _: False, run)
                run.stop_reason = "extended:" + run.stop_reason
                speedup, shift, verdict = judge(run)
    finally:
        backend.release(pf)
        backend.release(pb)
    health = guard.after(backend, started, waited)
    mf = _measurement(pf, run.samples[0], policy, run, device_key, health)
    mb = _measurement(pb, run.samples[1], policy, run, device_key, health)
    _check_floor(mf)
    _check_floor(mb)
    notes = [_level_shift_note(shift)] if shift else []
    contention = health.contention_note()
    if contention and verdict in (Verdict.PASS, Verdict.FAIL):
        verdict = Verdict.INCONCLUSIVE  # another process's load is no evidence either way
    if contention:
        notes.append(contention)
    return Comparison(
        fast=mf,
        baseline=mb,
        speedup=speedup.estimate,
        ci_low=speedup.low,
        ci_high=speedup.high,
        confidence=look,
        at_least=at_least,
        verdict=verdict,
        rounds=len(run.samples[0]),
        notes=notes,
        level_shift=shift,
    )


def _level_shift_note(shift: LevelShift) -> str:
    return (
        f"the speedup moved between levels during the run: its consecutive stretches' medians range "
        f"from {shift.lowest_median:.4f}x to {shift.highest_median:.4f}x (Kruskal-Wallis p={shift.p_value:.1e}); "
        "most likely the GPU's clocks or power state changed, and another run or chip may sit at "
        "either level, so set the margin from runs on several machines"
    )


def _reasons(clocks: Sequence[ClockState]) -> str:
    seen = sorted({r for c in clocks for r in c.reasons})
    return ", ".join(seen) or "unknown"
