"""Value types: what a user passes in (``Variant``), what comes back (``Measurement``, ``Comparison``,
``Calibration``), and the GPU state recorded with them (``ClockState``, ``Health``, other processes)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pytest_gpuperf._gates.detectable import detectable_claim_slowdown
from pytest_gpuperf._gates.stats import Estimate, Interval, LevelShift
from pytest_gpuperf._gates.verdict import Verdict

__all__ = [
    "CacheMode",
    "Variant",
    "Calibration",
    "Measurement",
    "Comparison",
    "ClockState",
    "THROTTLE_REASONS",
    "OtherProcess",
    "OtherActivity",
    "Health",
]

CacheMode = Literal["cold", "hot"]  # cold: caches flushed before every sample

if TYPE_CHECKING:
    from pytest_gpuperf._timing.summaries import ComparisonSummary, MeasurementSummary


# -- the GPU's state while it was measured (NVML; nvml.py and health.py read it) --
@dataclass(frozen=True)
class ClockState:
    """Clock and throttle state of the GPU at one instant (from NVML)."""

    sm_clock_mhz: int = 0
    mem_clock_mhz: int = 0
    reasons: tuple[str, ...] = ()
    temperature_c: int = 0

    @property
    def throttled(self) -> bool:
        """True when a reason that slows the GPU below its application clocks is active."""
        return bool(set(self.reasons) & THROTTLE_REASONS)


# Clock-event reasons that make a timing untrustworthy. The software power cap is normal
# under sustained load and is recorded but not treated as throttling.
THROTTLE_REASONS = frozenset({"hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown", "hw_power_brake"})


# A process whose SM utilization reaches this share of a sample period is using the GPU.
BUSY_SM_PERCENT = 5


@dataclass(frozen=True)
class OtherProcess:
    """Another process with a context on the GPU under test."""

    pid: int
    name: str
    sm_percent: int | None  # highest SM utilization sampled in the window; None when NVML gives none

    def describe(self) -> str:
        util = f", {self.sm_percent}% SM" if self.sm_percent is not None else ""
        return f"pid {self.pid} ({self.name}{util})"


@dataclass(frozen=True)
class OtherActivity:
    """Other processes on the GPU during a window, and which of them used its SMs."""

    present: tuple[OtherProcess, ...] = ()
    self_found: bool = True  # this process appeared in NVML's list (PIDs share a namespace)
    mig: bool = False  # the GPU is partitioned (MIG): other instances' work is not listed

    @property
    def busy(self) -> tuple[OtherProcess, ...]:
        return tuple(p for p in self.present if p.sm_percent is not None and p.sm_percent >= BUSY_SM_PERCENT)

    def describe_busy(self) -> str:
        return "; ".join(p.describe() for p in self.busy)


@dataclass(frozen=True)
class Health:
    """What is known of the GPU's state during one measurement."""

    unknown_reason: str | None = None  # why clocks, throttling and other processes are unknown
    contended_by: tuple[OtherProcess, ...] = ()
    unattributed: tuple[OtherProcess, ...] = ()  # present, but NVML cannot tell them from this process
    waited_s: float = 0.0
    mig: bool = False

    @property
    def contended(self) -> bool:
        return bool(self.contended_by)

    def describe_contention(self) -> str:
        return "; ".join(p.describe() for p in self.contended_by)

    def contention_note(self) -> str | None:
        if not self.contended_by:
            return None
        return (
            f"contended: other processes used this GPU while it was measured: {self.describe_contention()}. "
            "The time is not judged against baselines and is never stored as one."
        )

    def notes(self) -> list[str]:
        out = []
        if self.unknown_reason:
            out.append(f"clocks and throttling unknown: {self.unknown_reason}")
        contention = self.contention_note()
        if contention:
            out.append(contention)
        if self.unattributed:
            out.append(
                "other processes hold this GPU, and NVML reports PIDs from another namespace, so their use "
                "of it cannot be told from this process's: " + "; ".join(p.describe() for p in self.unattributed)
            )
        if self.waited_s:
            out.append(f"waited {self.waited_s:.0f} s for other processes to leave the GPU")
        if self.mig:
            out.append(
                "the GPU is in MIG mode: work in other MIG instances shares its memory bandwidth and is not detected"
            )
        return out

    def summary(self) -> dict[str, Any]:
        return {
            "state": "unknown" if self.unknown_reason else ("contended" if self.contended else "ok"),
            "unknown_reason": self.unknown_reason,
            "contended_by": [{"pid": p.pid, "name": p.name, "sm_percent": p.sm_percent} for p in self.contended_by],
            "unattributed": [{"pid": p.pid, "name": p.name} for p in self.unattributed],
            "waited_s": self.waited_s,
            "mig": self.mig,
        }


@dataclass(frozen=True)
class Variant:
    """A named way of launching work.

    ``launch()`` enqueues the work on the current stream and returns without synchronizing
    (it is captured into a CUDA graph when it can be). While it runs, the plugin's timing
    stream is the current stream of CuPy and PyTorch (so also of Triton, ``torch.compile``d
    functions and extensions launching on torch's current stream). A launch that takes one
    argument, ``launch(stream)``, is handed the timing stream instead: a ``TimingStream``
    with the ``__cuda_stream__`` protocol (cuda.core) whose ``int()`` is the ``cudaStream_t``
    (numba's ``external_stream``, ctypes). CuPy launches must not allocate (CuPy's pool is not
    capture-aware); PyTorch allocations are captured into the graph's private pool.
    ``bytes`` and ``flops`` are the minimum traffic and arithmetic of one call; when given,
    results also report bandwidth and FLOP/s. ``cache`` overrides the session's cache mode.

    ``rotations`` (optional) are launches of the same work on distinct input copies. In cold
    mode they are cycled instead of flushing L2, which is far less noisy for kernels of a
    few microseconds; together they should cover at least twice the L2 size.

    ``reference`` names the reference kernel that regression checks calibrate against (see
    ``reference_kind``); ``"none"`` compares raw times only.
    """

    name: str
    launch: Callable[[], Any] = field(repr=False)
    bytes: int | None = None
    flops: int | None = None
    cache: CacheMode | None = None
    rotations: tuple[Callable[[], Any], ...] = field(default=(), repr=False)
    reference: str | None = None  # "copy", "gemm", "none"; None picks by the declared bytes and flops

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise ValueError(f"Variant name must be a non-empty string, got {self.name!r}")
        if not callable(self.launch):
            raise TypeError(f"Variant {self.name!r}: launch must be callable, got {type(self.launch).__name__}")
        if self.cache not in (None, "cold", "hot"):
            raise ValueError(f"Variant {self.name!r}: cache must be 'cold' or 'hot', got {self.cache!r}")
        if not all(callable(r) for r in self.rotations):
            raise TypeError(f"Variant {self.name!r}: rotations must be a tuple of callables")
        if self.reference not in (None, "copy", "gemm", "none"):
            raise ValueError(
                f"Variant {self.name!r}: reference must be 'copy', 'gemm' or 'none', got {self.reference!r}"
            )

    @property
    def reference_kind(self) -> str | None:
        """The reference kernel regression checks calibrate against: ``reference`` when set, else
        a tensor-core GEMM for work declaring over 50 FLOP per byte, else a device copy."""
        if self.reference == "none":
            return None
        if self.reference:
            return self.reference
        if self.flops and self.bytes and self.flops / self.bytes > 50:
            return "gemm"
        return "copy"

    def renamed(self, name: str) -> Variant:
        return dataclasses.replace(self, name=name)


@dataclass(frozen=True)
class Calibration:
    """A variant's time relative to a reference kernel timed in the same rounds.

    Machine-to-machine differences, clock levels and drift that slow the variant and the
    reference alike cancel in the ratio, which regression checks compare when both the stored
    baseline and the run have it.
    """

    reference: str  # the reference kernel's name (e.g. "reference:copy")
    estimate: Estimate  # log(t_variant / t_reference), batch means over rounds
    reference_median_s: float

    def summary(self) -> dict[str, Any]:
        return {"reference": self.reference, "reference_median_s": self.reference_median_s, **self.estimate.summary()}


@dataclass
class Measurement:
    """GPU time of one variant: per-launch samples and their statistics, in seconds."""

    name: str
    samples: list[float]
    median_s: float
    ci_low_s: float
    ci_high_s: float
    confidence: float
    spread: float
    mode: CacheMode
    method: str
    batch: int
    throttled: bool = False
    clocks: list[ClockState] = field(default_factory=list)
    bytes: int | None = None
    flops: int | None = None
    device_key: str = ""
    stop_reason: str = ""
    notes: list[str] = field(default_factory=list)
    health: Health | None = None  # clocks known? other processes on the GPU? (None: not checked)
    stream_audit: str = "none"  # "cupti": every GPU operation traced to its stream; "capture": capture checks only
    estimate: Estimate | None = None  # batch-means estimate of log(time); None for runs too short to batch
    calibration: Calibration | None = None
    looks: int = 0
    wall_s: float = 0.0  # wall time this measurement took, warm-up and capture included (0 inside a comparison)

    @property
    def contended(self) -> bool:
        """Other processes used the GPU during the measurement: the time is not judged or stored."""
        return self.health is not None and self.health.contended

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def rel_halfwidth(self) -> float:
        return (self.ci_high_s - self.ci_low_s) / (2 * self.median_s) if self.median_s else math.inf

    @property
    def interval(self) -> Interval:
        """The median and its interval, for comparisons with a stored baseline."""
        return Interval(self.median_s, self.ci_low_s, self.ci_high_s, self.confidence)

    @property
    def bandwidth(self) -> float | None:
        """Bytes per second at the median time, when ``bytes`` was declared."""
        return self.bytes / self.median_s if self.bytes else None

    @property
    def flop_rate(self) -> float | None:
        """FLOP per second at the median time, when ``flops`` was declared."""
        return self.flops / self.median_s if self.flops else None

    def summary(self) -> MeasurementSummary:
        """JSON-ready statistics (no raw samples)."""
        return {
            "name": self.name,
            "median_s": self.median_s,
            "ci_low_s": self.ci_low_s,
            "ci_high_s": self.ci_high_s,
            "confidence": self.confidence,
            "n": self.n,
            "spread": self.spread,
            "mode": self.mode,
            "method": self.method,
            "batch": self.batch,
            "throttled": self.throttled,
            "bytes": self.bytes,
            "flops": self.flops,
            "bandwidth": self.bandwidth,
            "flop_rate": self.flop_rate,
            "stop_reason": self.stop_reason,
            "sm_clock_mhz": [c.sm_clock_mhz for c in self.clocks[:1] + self.clocks[-1:]],
            "clock_reasons": sorted({r for c in self.clocks for r in c.reasons}),
            "notes": list(self.notes),
            "health": self.health.summary() if self.health else None,
            "stream_audit": self.stream_audit,
            "estimate": self.estimate.summary() if self.estimate else None,
            "calibration": self.calibration.summary() if self.calibration else None,
            "looks": self.looks,
            "wall_s": self.wall_s,
        }


@dataclass
class Comparison:
    """Two variants measured interleaved on the same inputs, and the speedup claim's outcome."""

    fast: Measurement
    baseline: Measurement
    speedup: float
    ci_low: float
    ci_high: float
    confidence: float
    at_least: float | None
    verdict: Verdict
    rounds: int
    notes: list[str] = field(default_factory=list)
    level_shift: LevelShift | None = None
    estimate: Estimate | None = None  # batch-means estimate of the per-round log speedup
    looks: int = 0
    schedule_looks: int = 0  # the looks the sampling policy allowed
    wall_s: float = 0.0  # wall time the comparison took, warm-up and capture included

    @property
    def speedup_interval(self) -> Interval:
        return Interval(self.speedup, self.ci_low, self.ci_high, self.confidence)

    @property
    def detectable(self) -> float | None:
        """How much slower than its margin the fast variant must be for the claim to FAIL at its
        error rate (``detectable``); None for a claim with no margin or undecidable batches."""
        if self.at_least is None:
            return None
        independent = self.estimate.independent if self.estimate is not None else True
        return detectable_claim_slowdown(self.speedup_interval, independent)

    def summary(self) -> ComparisonSummary:
        return {
            "fast": self.fast.name,
            "baseline": self.baseline.name,
            "speedup": self.speedup,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "confidence": self.confidence,
            "at_least": self.at_least,
            "verdict": str(self.verdict),
            "rounds": self.rounds,
            "notes": list(self.notes),
            "level_shift": self.level_shift.summary() if self.level_shift else None,
            "estimate": self.estimate.summary() if self.estimate else None,
            "looks": self.looks,
            "wall_s": self.wall_s,
            "detectable_slowdown": self.detectable,
        }
