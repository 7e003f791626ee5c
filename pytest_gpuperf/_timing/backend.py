"""The interface every timing backend implements (CuPy on a GPU, a fake on CPU)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pytest_gpuperf._timing.breakdown import Breakdown
from pytest_gpuperf._timing.results import CacheMode, ClockState, OtherActivity, Variant


@dataclass
class Prepared:
    """A variant made ready to time: warmed up, its batch size chosen, graphs captured."""

    variant: Variant
    mode: CacheMode
    method: str
    batch: int
    notes: list[str] = field(default_factory=list)
    state: Any = None  # backend-specific (graphs, flush buffers)
    stream_audit: str = "none"  # how escaped work was looked for: "cupti" (every operation traced) or "capture"
    subtracts_flush: bool = False  # samples are (flush + launch) minus flush alone (cold mode by flushing L2)


class TimingBackend(Protocol):
    """Produces per-launch times; the sampler decides how many and what they mean."""

    name: str

    def prepare(self, variant: Variant, cache: CacheMode, target_sample_s: float) -> Prepared:
        """Warm up ``variant`` (surfacing launch errors) and get it ready to sample."""

    def run_rounds(
        self, prepared: Sequence[Prepared], rounds: int, orders: Sequence[Sequence[int]] | None = None
    ) -> list[list[float]]:
        """Time ``rounds`` rounds of the variants interleaved; round r times them in the order of
        the indices ``orders[r]`` (default: as given, A B A B ...).

        Returns one list per variant (in ``prepared``'s order) of per-launch seconds, one value per round.
        """

    def reference(self, kind: str) -> Prepared | None:
        """A reference kernel prepared for timing (``copy``: a device copy of 4x L2; ``gemm``: a
        tensor-core GEMM), kept for the session; None where the backend has none of that kind."""

    def clock_state(self) -> ClockState | None:
        """Current clocks and throttle reasons, or None when they cannot be read."""

    def health_unknown_reason(self) -> str | None:
        """Why clocks, throttling and other processes cannot be read (None: they can)."""

    def other_activity(self, since: float) -> OtherActivity | None:
        """Other processes on the GPU and their SM use since ``since`` (on ``now()``'s clock)."""

    def now(self) -> float:
        """The clock that time budgets are measured on, in seconds."""

    def pause(self, seconds: float) -> None:
        """Let the GPU cool down before a re-measurement."""

    def release(self, prepared: Prepared) -> None:
        """Free what ``prepare`` allocated."""

    def breakdown(self, variant: Variant) -> Breakdown | str:
        """The kernels one launch of ``variant`` runs, each with its own time, or why there is no
        breakdown. Taken after a verdict, never between timed samples. Optional: the plugin gives
        no breakdowns with a backend that lacks it."""
