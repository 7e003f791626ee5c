"""Time callables outside pytest (sweeps, notebooks) with the same engine the fixture uses."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from pytest_gpuperf._timing.device import DeviceInfo
from pytest_gpuperf._timing.nvml import probe
from pytest_gpuperf._timing.results import CacheMode, Comparison, Measurement, Variant
from pytest_gpuperf._timing.sampler import SamplingPolicy, compare, measure
from pytest_gpuperf.errors import GpuPerfError


@functools.cache
def device(ordinal: int = 0) -> DeviceInfo:
    """The GPU ``ordinal`` as the timing here sees it (probed once per process); GpuPerfError when
    there is none."""
    found = probe(ordinal)
    if not isinstance(found, DeviceInfo):
        raise GpuPerfError(f"no GPU to time on: {found.reason}")
    return found


@functools.cache
def _backend(ordinal: int) -> tuple[DeviceInfo, Any]:
    from pytest_gpuperf._timing.cupy_backend import CupyBackend

    info = device(ordinal)
    return info, CupyBackend(info)


def time_callable(
    launch: Callable[[], Any],
    *,
    name: str = "callable",
    cache: CacheMode = "cold",
    bytes: int | None = None,
    flops: int | None = None,
    ordinal: int = 0,
    policy: SamplingPolicy | None = None,
) -> Measurement:
    """GPU time per call of ``launch`` (which enqueues work on the current CuPy stream)."""
    info, backend = _backend(ordinal)
    variant = Variant(name, launch, bytes=bytes, flops=flops)
    return measure(backend, variant, policy or SamplingPolicy(), cache, info.key)


def compare_callables(
    fast: Variant,
    baseline: Variant,
    *,
    at_least: float | None = None,
    cache: CacheMode = "cold",
    ordinal: int = 0,
    policy: SamplingPolicy | None = None,
) -> Comparison:
    """Interleaved measurement of two variants, as ``gpu_perf.assert_speedup`` does, without asserting."""
    info, backend = _backend(ordinal)
    return compare(backend, fast, baseline, policy or SamplingPolicy(), at_least, cache, info.key)
