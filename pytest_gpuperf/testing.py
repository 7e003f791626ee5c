"""A fake device and a fake timing backend, for testing gates and reports without a GPU.

Install them from a ``conftest.py`` through the plugin's hooks::

    from pytest_gpuperf.testing import FakeBackend, fake_device

    def pytest_gpuperf_device(config, ordinal):
        return fake_device(compute_capability=(9, 0))

    def pytest_gpuperf_backend(config, device):
        return FakeBackend({"baseline": 12e-6, "fast": 10e-6}, spread=0.02, seed=1)

The fake draws each sample from a seeded log-normal distribution around the variant's
configured time (with optional outliers) and keeps a simulated clock, so time budgets,
statistics and verdicts are deterministic.
"""
from __future__ import annotations

import math
from typing import Callable, Mapping, Sequence

import numpy as np

from pytest_gpuperf.device import GIB, DeviceInfo
from pytest_gpuperf.results import CacheMode, ClockState, Variant
from pytest_gpuperf.timing.backend import Prepared

__all__ = ["FakeBackend", "fake_device"]


def fake_device(
    compute_capability: tuple[int, int] = (9, 0),
    *,
    name: str = "Fake GPU",
    sm_count: int = 132,
    memory_gib: int = 80,
    l2_mib: int = 50,
    ordinal: int = 0,
) -> DeviceInfo:
    """A DeviceInfo for a GPU that does not exist."""
    return DeviceInfo(
        name=name,
        compute_capability=compute_capability,
        sm_count=sm_count,
        memory_bytes=memory_gib * GIB,
        l2_bytes=l2_mib * 2**20,
        ordinal=ordinal,
        pci_bus_id=f"0000:{ordinal:02x}:00.0",
        driver_version="0.0-fake",
        cuda_runtime_version="0.0",
        cuda_driver_version="0.0",
        cupy_version="none",
    )


class FakeBackend:
    """Seeded synthetic timings.

    ``times`` maps a variant name to its true per-launch seconds (or is a callable of the
    name); ``spread`` is the log-normal sigma per sample; a fraction ``outlier_rate`` of
    samples is multiplied by ``outlier_factor``; ``throttled`` makes every clock reading
    report thermal slowdown. ``levels`` maps a variant name to ``(factor, from_s)``: once the
    simulated clock has passed ``from_s`` seconds, that variant takes ``factor`` times as long
    (a GPU that moved to another clock or power level during the run).
    """

    name = "fake"

    def __init__(
        self,
        times: Mapping[str, float] | Callable[[str], float] | None = None,
        *,
        default_s: float = 10e-6,
        spread: float = 0.01,
        outlier_rate: float = 0.0,
        outlier_factor: float = 1.5,
        seed: int = 0,
        throttled: bool = False,
        call_launch: bool = True,
        levels: Mapping[str, tuple[float, float]] | None = None,
    ):
        self._times = times or {}
        self._default = default_s
        self.spread = spread
        self.outlier_rate = outlier_rate
        self.outlier_factor = outlier_factor
        self._rng = np.random.default_rng(seed)
        self._clock = 0.0
        self.throttled = throttled
        self._call_launch = call_launch
        self._levels = dict(levels or {})
        self.prepared_names: list[str] = []

    def true_time(self, name: str) -> float:
        if callable(self._times):
            return float(self._times(name))
        return float(self._times.get(name, self._default))

    def prepare(self, variant: Variant, cache: CacheMode, target_sample_s: float) -> Prepared:
        if self._call_launch:
            variant.launch()
        self.prepared_names.append(variant.name)
        t = self.true_time(variant.name)
        batch = max(1, min(2048, math.ceil(target_sample_s / t)))
        return Prepared(variant=variant, mode=cache, method="fake", batch=batch, state=t)

    def run_rounds(self, prepared: Sequence[Prepared], rounds: int) -> list[list[float]]:
        out: list[list[float]] = []
        for p in prepared:
            noise = self._rng.lognormal(0.0, self.spread, rounds) if self.spread else np.ones(rounds)
            outliers = self._rng.random(rounds) < self.outlier_rate
            noise = np.where(outliers, noise * self.outlier_factor, noise)
            factor, from_s = self._levels.get(p.variant.name, (1.0, math.inf))
            samples = p.state * noise * (factor if self._clock >= from_s else 1.0)
            self._clock += float(samples.sum()) * p.batch
            out.append(samples.tolist())
        # The fake records samples per variant in blocks; interleaving only matters on a GPU.
        return out

    def clock_state(self) -> ClockState | None:
        reasons = ("hw_thermal_slowdown",) if self.throttled else ()
        return ClockState(sm_clock_mhz=1980, mem_clock_mhz=2619, reasons=reasons, temperature_c=40)

    def now(self) -> float:
        return self._clock

    def pause(self, seconds: float) -> None:
        self._clock += seconds

    def release(self, prepared: Prepared) -> None:
        prepared.state = None
