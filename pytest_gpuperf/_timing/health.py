"""Whether a measurement's GPU was in a state to be trusted: clocks known, GPU not shared.

Before each measurement the guard looks for other processes using the GPU's SMs (NVML's
per-process utilization) and waits for them to stop, up to a wait budget shared by the whole
run. Processes still busy then, or busy at any time during the measurement, make it
*contended*: it is reported with their PIDs and names, never judged as a regression and
never stored as a baseline. Without NVML the clocks, throttling and other processes are
unknown, which every result states; ``--gpu-perf-require-health`` makes that an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from pytest_gpuperf._timing.results import Health, OtherActivity
from pytest_gpuperf.errors import GpuPerfError

POLL_S = 1.0  # between looks at a busy GPU
# NVML's per-process utilization samples arrive about once a second, so a look at the GPU spans
# at least this long: a shorter window can hold no sample and make a busy GPU look quiet.
LOOKBACK_S = 2.0


class HealthSource(Protocol):
    """What a timing backend tells the guard (``TimingBackend`` provides it)."""

    def now(self) -> float: ...

    def pause(self, seconds: float) -> None: ...

    def health_unknown_reason(self) -> str | None: ...

    def other_activity(self, since: float) -> OtherActivity | None: ...


@dataclass
class HealthGuard:
    """One per run: the wait budget for a quiet GPU is shared by all of the run's measurements."""

    quiet_wait_s: float = 60.0
    require_health: bool = False
    waited_total_s: float = field(default=0.0, init=False)

    def before(self, source: HealthSource, what: str) -> tuple[float, float]:
        """Wait for other processes to stop using the GPU (within the budget left).

        Returns (start of the measurement on ``source.now()``'s clock, seconds waited).
        """
        reason = source.health_unknown_reason()
        if reason and self.require_health:
            raise GpuPerfError(
                f"{what}: clocks and throttling are unknown ({reason}), and --gpu-perf-require-health is set. "
                "Install nvidia-ml-py where NVML works, or drop --gpu-perf-require-health."
            )
        waited = 0.0
        while self.waited_total_s < self.quiet_wait_s:
            activity = source.other_activity(source.now() - LOOKBACK_S)
            if activity is None or not activity.self_found or not activity.busy:
                break
            step = min(POLL_S, self.quiet_wait_s - self.waited_total_s)
            source.pause(step)
            waited += step
            self.waited_total_s += step
        return source.now(), waited

    def after(self, source: HealthSource, started: float, waited: float) -> Health:
        """The health of a measurement that ran from ``started`` until now."""
        reason = source.health_unknown_reason()
        if reason:
            return Health(unknown_reason=reason, waited_s=waited)
        activity = source.other_activity(min(started, source.now() - LOOKBACK_S))
        if activity is None:
            return Health(unknown_reason="NVML could not list the processes on this GPU", waited_s=waited)
        if not activity.self_found:
            return Health(unattributed=activity.present, waited_s=waited, mig=activity.mig)
        return Health(contended_by=activity.busy, waited_s=waited, mig=activity.mig)
