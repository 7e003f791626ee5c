"""merge_attn_states perf gates over a fixed shape grid (run with --gpu-perf).

Three gates, as the issue asks: reordered vs baseline (the design note's claim) and vectorized vs
baseline, interleaved A/B at the margins measured per architecture in
kernels/merge_attn_states/family.py (a None margin measures and records the ratio without gating),
and the vectorized variant's bandwidth as a fraction of the device's copy bandwidth on DRAM-sized
shapes, an absolute gate at the issue's 85%. 9 + 6 + 4 = 19 tests.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import pytest

from kernels.merge_attn_states.family import (
    BANDWIDTH_CASES,
    BANDWIDTH_FRACTION_TARGET,
    REORDERED_CASES,
    VECTORIZED_CASES,
    PerfCase,
    bandwidth_floor,
    speedup_margin,
)
from kernels.merge_attn_states.launch import DeviceBuffers, random_device_buffers
from pytest_gpuperf import Variant

if TYPE_CHECKING:
    from pytest_gpuperf import GpuPerf


@pytest.fixture(scope="module")
def buffers_for() -> Iterator[Callable[[PerfCase], DeviceBuffers]]:
    """Device inputs per perf case (about 1.5 GB for all nine), drawn once and shared by the tests
    of this module."""
    cache: dict[str, DeviceBuffers] = {}

    def get(case: PerfCase) -> DeviceBuffers:
        if case.id not in cache:
            cache[case.id] = random_device_buffers(case.num_tokens, case.num_heads, case.head_size, case.dtype,
                                                   case.output_lse, seed=7)
        return cache[case.id]

    yield get
    cache.clear()


# A 1.7 us launch moves with the chip more than the default allows: with no code change the tiny
# cases ran 2.7%, 4.7% and (on one H200) 7-8% slower than their baselines on other H200s,
# while the DRAM-sized cases stayed within 2.7%. A launch this short is bound by latency, which the
# copy reference does not track, so their regression checks fail only beyond a 10% band; the
# interleaved speedup gates and --gpu-perf-against are their precise checks.
TINY_TOLERANCE = 0.12
TINY_BAND = 0.10


def params(cases: Sequence[PerfCase]) -> list[Any]:
    """The cases as pytest params, tiny ones with the wider regression tolerance."""
    tiny = [pytest.mark.gpu_perf(tolerance=TINY_TOLERANCE, machine_noise=TINY_BAND, calibrated_noise=TINY_BAND)]
    return [pytest.param(case, id=case.id, marks=tiny if case.size == "tiny" else []) for case in cases]


def shared(gpu_perf: GpuPerf, buffers_for: Callable[[PerfCase], DeviceBuffers], case: PerfCase) -> DeviceBuffers:
    """``buffers_for(case)`` with its arrays through gpu_perf.shared: under --gpu-perf-against both
    revisions launch on the same buffers (so --gpu-perf-changed-only can prove them the same), and
    the revision's build allocates none of its own."""
    def arrays() -> tuple[Any, ...]:
        b = buffers_for(case)
        return (b.dtype, b.prefix_output, b.prefix_lse, b.suffix_output, b.suffix_lse, b.output, b.output_lse)

    return DeviceBuffers(*gpu_perf.shared(("merge_attn_states buffers", case.id), arrays))


def variant(name: str, case: PerfCase, buffers: DeviceBuffers) -> Variant:
    return Variant(name, buffers.launcher(name), bytes=case.bytes, cache=case.cache)


@pytest.mark.sm80
@pytest.mark.parametrize("case", params(REORDERED_CASES))
def test_reordered_vs_baseline(gpu_perf: GpuPerf, buffers_for: Callable[[PerfCase], DeviceBuffers], case: PerfCase) -> None:
    """The design note's claim: loading the outputs before the LSE arithmetic is faster."""
    buffers = shared(gpu_perf, buffers_for, case)
    gpu_perf.assert_speedup(
        variant("reordered", case, buffers),
        variant("baseline", case, buffers),
        at_least=speedup_margin(gpu_perf.device.arch, "reordered_vs_baseline", case),
    )


@pytest.mark.sm80
@pytest.mark.parametrize("case", params(VECTORIZED_CASES))
def test_vectorized_vs_baseline(gpu_perf: GpuPerf, buffers_for: Callable[[PerfCase], DeviceBuffers], case: PerfCase) -> None:
    buffers = shared(gpu_perf, buffers_for, case)
    gpu_perf.assert_speedup(
        variant("vectorized", case, buffers),
        variant("baseline", case, buffers),
        at_least=speedup_margin(gpu_perf.device.arch, "vectorized_vs_baseline", case),
    )


@pytest.mark.sm80
@pytest.mark.parametrize("case", BANDWIDTH_CASES, ids=lambda case: case.id)
def test_vectorized_bandwidth(gpu_perf: GpuPerf, buffers_for: Callable[[PerfCase], DeviceBuffers], case: PerfCase) -> None:
    """Achieved bandwidth of the vectorized variant as a fraction of the measured copy bandwidth
    (an SM copy kernel, bytes read + written), gated at the issue's target."""
    measurement = gpu_perf.measure(variant("vectorized", case, shared(gpu_perf, buffers_for, case)))
    fraction = measurement.bandwidth / gpu_perf.copy_bandwidth()
    gpu_perf.record("bandwidth_fraction", fraction)
    gpu_perf.record("bandwidth", measurement.bandwidth / 1e9, unit="GB/s")
    floor = bandwidth_floor(gpu_perf.device.arch, case)
    assert fraction >= floor, (
        f"vectorized {case.id}: {measurement.bandwidth / 1e9:.0f} GB/s is {fraction:.1%} of copy bandwidth, "
        f"below the floor {floor:.0%} (issue target {BANDWIDTH_FRACTION_TARGET:.0%})"
    )
