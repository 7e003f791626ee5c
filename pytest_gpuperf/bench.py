"""Timing and profiling outside pytest (sweeps, notebooks, scripts) with the engine the fixtures
use: a callable's GPU time per call, two variants interleaved, the device's copy bandwidth,
Nsight Compute counters of chosen launches, and a results file that records where it came from.

    from pytest_gpuperf.bench import time_callable

    m = time_callable(lambda: kernel(grid, block, args), name="mine", bytes=2 * n * 4)
    print(m.median_s, m.ci_low_s, m.ci_high_s)
"""

from pytest_gpuperf._counters.ncu import CounterError, CountersUnavailable, profile_launches
from pytest_gpuperf._report.provenance import provenance
from pytest_gpuperf._store.files import atomic_write_json as write_json
from pytest_gpuperf._timing.bench import compare_callables, device, time_callable
from pytest_gpuperf._timing.roofline import copy_bandwidth
from pytest_gpuperf._timing.sampler import SamplingPolicy

__all__ = [
    "time_callable",
    "compare_callables",
    "SamplingPolicy",
    "device",
    "copy_bandwidth",
    "profile_launches",
    "CounterError",
    "CountersUnavailable",
    "provenance",
    "write_json",
]
