"""Sampling: rounds of interleaved samples, judged at a fixed schedule of looks in time.

One *round* times each prepared slot once (a variant, a second variant, a reference kernel),
in an order that alternates from round to round (A B, then B A: counterbalanced, so neither
slot always runs second). The data is judged only at *looks*, placed in time: the first once
the run has spanned ``min_time_s`` (clipped to the budget), then each time the span doubles,
and at the end of the budget (and of a speedup claim's extension). A level that one variant
holds for a while (its own clock or power state) is invisible to any statistic of a run
shorter than the level's dwell, so no verdict is reached on less. Every look's interval uses
confidence 1 - (1 - confidence) / looks (Bonferroni over the looks the schedule allows), so
however sampling stops, the chance that any look reaches a wrong decision stays within
1 - confidence.

Estimates are batch means on the log scale (``stats.batch_estimate``): a decision needs the
batches to be long next to the series' correlation time and free of serial correlation, and a
run whose batches are not is INCONCLUSIVE, never PASS or FAIL.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from pytest_gpuperf._gates.stats import (
    BATCH_FACTOR,
    Estimate,
    Interval,
    LevelShift,
    batch_estimate,
    bootstrap_median_ci,
    level_shift,
    median_ci,
    relative_spread,
)
from pytest_gpuperf._gates.verdict import Verdict, speedup_verdict
from pytest_gpuperf._timing.backend import Prepared, TimingBackend
from pytest_gpuperf._timing.health import HealthGuard
from pytest_gpuperf._timing.results import CacheMode, Calibration, ClockState, Comparison, Health, Measurement, Variant
from pytest_gpuperf.errors import GpuContended, GpuPerfError, InvalidSample

MAX_KEPT_CLOCK_STATES = 6
# No launch that does GPU work takes less: an empty kernel replayed from a CUDA graph takes
# 0.78 us on an H100. A shorter per-launch time means the work was not timed.
MIN_LAUNCH_S = 0.5e-6


# Called after each batch of rounds with the rounds taken so far: a live status line follows it.
OnRounds = Callable[[int], None]


@dataclass(frozen=True)
class SamplingPolicy:
    """How long and how precisely to measure. Defaults suit kernels from 1 µs to 100 ms."""

    confidence: float = 0.99
    precision: float = 0.005  # a measurement may stop once its interval is within ±0.5%
    budget_s: float = 1.0  # per measurement (per pair for comparisons), wall/device seconds
    extension_budget_s: float = 2.0  # extra time an undecided speedup claim may take
    min_samples: int = 40  # rounds a look needs (unless the budget ends first)
    max_samples: int = 20_000  # rounds at which sampling stops whatever the time
    min_time_s: float = 1.0  # no look before the run has spanned this long (clipped to the budget)
    round_size: int = 10  # rounds enqueued per backend call
    target_sample_s: float = 1e-3  # one sample = one graph replay of about this long
    throttle_retries: int = 1
    cooldown_s: float = 1.0

    def look_times(self, extended: bool = False) -> tuple[float, ...]:
        """Seconds into the run at which the data is judged: from ``min_time_s`` (at most the
        budget) doubling, the end of the budget, and with ``extended`` the extension's too."""
        total = self.budget_s + (self.extension_budget_s if extended else 0.0)
        first = max(1e-9, min(self.min_time_s, self.budget_s))
        times = {self.budget_s, total}
        t = first
        while t < total:
            times.add(t)
            t *= 2.0
        return tuple(sorted(times))

    def look_confidence(self, extended: bool = False) -> float:
        """Confidence of each look's interval: Bonferroni over every look the schedule allows."""
        return 1.0 - (1.0 - self.confidence) / len(self.look_times(extended))


@dataclass
class _Run:
    """Samples of one measurement or comparison, slot by slot, and what was seen while taking them."""

    samples: list[list[float]]
    stop_reason: str = ""
    looks: int = 0
    rounds_started: int = 0
    began: float | None = None  # the backend's clock when the first round was taken
    first_clock: ClockState | None = None
    last_clock: ClockState | None = None
    throttled_clocks: list[ClockState] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.samples[0])

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


def _orders(slots: int, first_round: int, rounds: int) -> list[list[int]]:
    """Slot order of each round: forward on even rounds, reversed on odd ones (A B, B A)."""
    forward = list(range(slots))
    return [forward if (first_round + r) % 2 == 0 else forward[::-1] for r in range(rounds)]


def _take_rounds(backend: TimingBackend, prepared: Sequence[Prepared], run: _Run, rounds: int) -> None:
    orders = _orders(len(prepared), run.rounds_started, rounds)
    for p, acc, new in zip(prepared, run.samples, backend.run_rounds(prepared, rounds, orders), strict=False):
        _check_samples(p, new, len(acc))
        acc.extend(new)
    run.rounds_started += rounds
    run.observe(backend.clock_state())


def _sample(
    backend: TimingBackend,
    prepared: Sequence[Prepared],
    policy: SamplingPolicy,
    look_times: Sequence[float],
    until_s: float,
    look: Callable[[_Run], bool],
    run: _Run | None = None,
    on_rounds: OnRounds | None = None,
) -> _Run:
    """Take rounds until a look says stop, the looks up to ``until_s`` seconds into the run are
    used up, or ``policy.max_samples`` rounds are taken.

    ``look(run)`` judges the data and returns whether to stop. Looks fall at ``look_times``
    (seconds since the run's first round), each once the run has spanned it and holds
    ``min_samples`` rounds, or at ``until_s`` with what there is; a continued run (an
    extension) goes on with the schedule's later looks.
    """
    run = run or _Run([[] for _ in prepared])
    if run.began is None:
        run.began = backend.now()
    began = run.began
    for at in look_times[run.looks :]:
        if at > until_s + 1e-12:
            break
        while run.n < policy.max_samples and (backend.now() - began < at or run.n < policy.min_samples):
            if backend.now() - began >= until_s:
                break
            _take_rounds(backend, prepared, run, min(policy.round_size, policy.max_samples - run.n))
            if on_rounds is not None:
                on_rounds(run.n)
        run.looks += 1
        if look(run):
            run.stop_reason = run.stop_reason or "decided"
            return run
        if run.n >= policy.max_samples:
            run.stop_reason = "max_samples"
            return run
    run.stop_reason = "budget"
    return run


# -- checks ----------------------------------------------------------------------------
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


# -- results ---------------------------------------------------------------------------
def _logs(samples: Sequence[float]) -> np.ndarray:
    return np.log(np.asarray(samples, dtype=np.float64))


def _location(samples: Sequence[float], confidence: float) -> tuple[Interval, Estimate | None]:
    """The batch-means interval of a run's samples; the order-statistic one where too short to batch."""
    est = batch_estimate(_logs(samples))
    if est is None:
        return median_ci(samples, confidence), None
    return est.interval(confidence), est


def _measurement(
    prepared: Prepared,
    samples: list[float],
    run: _Run,
    device_key: str,
    health: Health,
    confidence: float,
    calibration: Calibration | None = None,
) -> Measurement:
    ci, est = _location(samples, confidence)
    v = prepared.variant
    notes = list(prepared.notes) + health.notes()
    if est is not None and not est.independent:
        notes.append(_correlation_note(est))
    return Measurement(
        name=v.name,
        samples=list(samples),
        median_s=ci.estimate,
        ci_low_s=ci.low,
        ci_high_s=ci.high,
        confidence=ci.confidence,
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
        notes=notes,
        health=health,
        stream_audit=prepared.stream_audit,
        estimate=est,
        calibration=calibration,
        looks=run.looks,
    )


def _correlation_note(est: Estimate) -> str:
    """Why an estimate's batches cannot decide a gate (``Estimate.independent`` is false)."""
    if est.level_moved:
        return (
            f"the time moved between levels during the run: its batch medians range from {math.exp(est.batch_low):.4g} "
            f"to {math.exp(est.batch_high):.4g} and neighbouring batches are alike (von Neumann p={est.serial_p:.1e}), "
            "so their spread says nothing of another run; no gate decides on it"
        )
    # tau may be shorter than a batch: a batch must span BATCH_FACTOR correlation times to decide.
    return (
        f"samples stay correlated over about {est.tau:.1f} rounds (their integrated autocorrelation time), so a "
        f"batch must span {est.needed_batch_size} rounds ({BATCH_FACTOR:g}x that) to decide a gate and these "
        f"batches are {est.batch_size}; no gate decides on it (a longer --gpu-perf-budget gives longer batches)"
    )


def _calibration(reference: Prepared | None, samples: list[float], ref_samples: list[float]) -> Calibration | None:
    """The variant's time relative to the reference kernel, round by round."""
    if reference is None:
        return None
    est = batch_estimate(_logs(samples) - _logs(ref_samples))
    if est is None:
        return None
    ref_ci, _ = _location(ref_samples, 0.99)
    return Calibration(reference.variant.name, est, ref_ci.estimate)


# -- measure ----------------------------------------------------------------------------
def measure(
    backend: TimingBackend,
    variant: Variant,
    policy: SamplingPolicy,
    cache: CacheMode,
    device_key: str = "",
    guard: HealthGuard | None = None,
    reference: Prepared | None = None,
    on_rounds: OnRounds | None = None,
) -> Measurement:
    """Time one variant (interleaved with ``reference`` when given, for calibration).

    Sampling stops at the first look whose interval is within ``precision`` on independent
    batches (of the calibrated ratio too, when calibrated), or when the budget is spent; batches
    that are not independent by then are extended once by ``extension_budget_s``, to the first
    look where they are. A throttled measurement is retried after a cool-down, then flagged.
    """
    guard = guard or HealthGuard(quiet_wait_s=0.0)
    began = time.perf_counter()

    extends = policy.extension_budget_s > 0
    confidence = policy.look_confidence(extends)

    def estimates(run: _Run) -> list[Estimate | None]:
        series = [_logs(run.samples[0])]
        if reference is not None:
            series.append(series[0] - _logs(run.samples[1]))
        return [batch_estimate(logs) for logs in series]

    def decisive(run: _Run) -> bool:
        return all(est is not None and est.independent for est in estimates(run))

    def precise(run: _Run) -> bool:
        found = estimates(run)
        return all(
            est is not None and est.independent and est.interval(confidence).rel_halfwidth <= policy.precision
            for est in found
        )

    throttle_notes: list[str] = []
    for attempt in range(policy.throttle_retries + 1):
        started, waited = guard.before(backend, f"variant {variant.name!r}")
        prepared = backend.prepare(variant, variant.cache or cache, policy.target_sample_s)
        slots = [prepared] if reference is None else [prepared, reference]
        try:
            with _contention_explains(guard, backend, started, waited):
                run = _sample(
                    backend, slots, policy, policy.look_times(), policy.budget_s, precise, on_rounds=on_rounds
                )
        finally:
            backend.release(prepared)
        health = guard.after(backend, started, waited)
        calibration = _calibration(reference, run.samples[0], run.samples[1]) if reference else None
        result = _measurement(prepared, run.samples[0], run, device_key, health, confidence, calibration)
        _check_floor(result)
        if not result.throttled:
            break
        throttle_notes.append(f"GPU throttled during attempt {attempt + 1}: {_reasons(run.clocks)}")
        if attempt < policy.throttle_retries:
            backend.pause(policy.cooldown_s)
    result.notes.extend(throttle_notes)
    result.wall_s = time.perf_counter() - began
    return result


# -- compare ----------------------------------------------------------------------------
@dataclass(frozen=True)
class _Judgement:
    speedup: Interval
    estimate: Estimate | None
    shift: LevelShift | None
    verdict: Verdict
    reason: str


def _judge_speedup(run: _Run, at_least: float | None, confidence: float) -> _Judgement:
    """The speedup t(baseline) / t(fast) from the paired per-round log-ratios, and the claim's verdict."""
    d = _logs(run.samples[1]) - _logs(run.samples[0])
    est = batch_estimate(d)
    if est is None:  # too few rounds to batch: the order-statistic interval of the ratios
        speedup = bootstrap_median_ci(np.exp(d), confidence)
    else:
        speedup = est.interval(confidence)
    independent = est is None or est.independent
    verdict = speedup_verdict(speedup, at_least, independent)
    reason = "" if independent or est is None else _correlation_note(est)
    return _Judgement(speedup, est, level_shift(est), verdict, reason)


def compare(
    backend: TimingBackend,
    fast: Variant,
    baseline: Variant,
    policy: SamplingPolicy,
    at_least: float | None,
    cache: CacheMode,
    device_key: str = "",
    guard: HealthGuard | None = None,
    reference: Prepared | None = None,
    on_rounds: OnRounds | None = None,
) -> Comparison:
    """Measure ``fast`` and ``baseline`` interleaved (with ``reference`` when given) and judge
    the claim speedup >= at_least. Sampling stops at the first look with a decided claim; an
    undecided claim samples to its budget, then gets one extension of ``extension_budget_s``."""
    extends = policy.extension_budget_s > 0
    look_conf = policy.look_confidence(extends)
    looks = policy.look_times(extends)
    guard = guard or HealthGuard(quiet_wait_s=0.0)
    began = time.perf_counter()

    def decided(run: _Run) -> bool:
        judgement = _judge_speedup(run, at_least, look_conf)
        if at_least is None:  # measured, not gated: stop once precise
            return (
                judgement.estimate is not None
                and judgement.estimate.independent
                and (judgement.speedup.rel_halfwidth <= policy.precision)
            )
        return judgement.verdict is not Verdict.INCONCLUSIVE

    started, waited = guard.before(backend, f"variants {fast.name!r} and {baseline.name!r}")
    pf = backend.prepare(fast, fast.cache or cache, policy.target_sample_s)
    pb = backend.prepare(baseline, baseline.cache or cache, policy.target_sample_s)
    slots = [pf, pb] if reference is None else [pf, pb, reference]
    try:
        with _contention_explains(guard, backend, started, waited):
            run = _sample(backend, slots, policy, looks, policy.budget_s, decided, on_rounds=on_rounds)
            judgement = _judge_speedup(run, at_least, look_conf)
            extensible = run.stop_reason == "budget" and run.looks < len(looks)
            if judgement.verdict is Verdict.INCONCLUSIVE and at_least is not None and extends and extensible:
                run = _sample(backend, slots, policy, looks, looks[-1], decided, run, on_rounds)
                run.stop_reason = "extended:" + run.stop_reason
                judgement = _judge_speedup(run, at_least, look_conf)
    finally:
        backend.release(pf)
        backend.release(pb)
    health = guard.after(backend, started, waited)
    ref_samples = run.samples[2] if reference is not None else []
    mf = _measurement(
        pf, run.samples[0], run, device_key, health, look_conf, _calibration(reference, run.samples[0], ref_samples)
    )
    mb = _measurement(
        pb, run.samples[1], run, device_key, health, look_conf, _calibration(reference, run.samples[1], ref_samples)
    )
    _check_floor(mf)
    _check_floor(mb)
    verdict = judgement.verdict
    notes = [judgement.reason] if judgement.reason else []
    contention = health.contention_note()
    if contention and verdict in (Verdict.PASS, Verdict.FAIL):
        verdict = Verdict.INCONCLUSIVE  # another process's load is no evidence either way
    if contention:
        notes.append(contention)
    s = judgement.speedup
    return Comparison(
        fast=mf,
        baseline=mb,
        speedup=s.estimate,
        ci_low=s.low,
        ci_high=s.high,
        confidence=look_conf,
        at_least=at_least,
        verdict=verdict,
        rounds=run.n,
        notes=notes,
        level_shift=judgement.shift,
        estimate=judgement.estimate,
        looks=run.looks,
        schedule_looks=len(looks),
        wall_s=time.perf_counter() - began,
    )


def _reasons(clocks: Sequence[ClockState]) -> str:
    seen = sorted({r for c in clocks for r in c.reasons})
    return ", ".join(seen) or "unknown"
