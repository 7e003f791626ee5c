"""megakernel perf gates on the full Qwen3-0.6B shape (run with --gpu-perf).

One decode step per launch; the timed work includes the logits write. Positions 1..1000 read a
random KV prefill. Margins come from kernels/megakernel/margins.json; a None margin measures and
records the ratio without gating. The absolute gates (roofline fraction, speedup over the
transformers peer) judge the fastest of family.GATE_CANDIDATES as measured in the same test.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

import numpy as np
import pytest

from kernels.megakernel.config import QWEN3_0_6B
from kernels.megakernel.family import (
    COMPARISONS,
    GATE_CANDIDATES,
    GATE_POSITIONS,
    HF_CHECK_STEPS,
    MAX_SEQ,
    MIN_ROOFLINE_FRACTION,
    MIN_SPEEDUP_VS_HF,
    shortfall_is_strict,
    target_shortfall,
    PERF_POSITIONS,
    ROOFLINE_POSITIONS,
    VARIANTS,
    speedup_margin,
)
from kernels.megakernel.reference import random_kv_cache
from pytest_gpuperf import Variant

if TYPE_CHECKING:
    from pytest_gpuperf import GpuPerf

TOKEN = 1234
HF_POSITIONS = (1, 200, 1000)
KV_SEED = 1

# The NVRTC modules these tests load (config names), compiled ahead by tests/prebuild.py under --gpu-perf.
RUN_TIME_MODULES = ("QWEN3_0_6B",)


@pytest.fixture(scope="module")
def kv_prefill() -> tuple[np.ndarray, np.ndarray]:
    """Random bf16 K and V for every position (the same prefill the peer gets)."""
    return random_kv_cache(QWEN3_0_6B, MAX_SEQ, seed=KV_SEED)


@pytest.fixture(scope="module")
def model(full_model: Any, kv_prefill: tuple[np.ndarray, np.ndarray]) -> Any:
    """The full model with a random KV prefill of every position."""
    full_model.set_kv_cache(*kv_prefill)
    return full_model


def step(model: Any, variant: str, position: int) -> Variant:
    return Variant(f"{variant}@{position}", model.launcher(variant, TOKEN, position),
                   bytes=QWEN3_0_6B.step_bytes(position), flops=QWEN3_0_6B.step_flops(position))


def fastest_candidate(gpu_perf: GpuPerf, model: Any, position: int) -> tuple[str, Any]:
    """Measure every gate candidate at ``position``; the fastest and its measurement."""
    measured = {v: gpu_perf.measure(step(model, v, position)) for v in GATE_CANDIDATES}
    best = min(measured, key=lambda v: measured[v].median_s)
    for v, m in measured.items():
        gpu_perf.record(f"ms_per_token[{v}]", m.median_s * 1e3, "ms")
    return best, measured[best]


def expect_shortfall(request: pytest.FixtureRequest, device: Any, target: str, position: int) -> None:
    """Mark the test xfail where family.TARGET_SHORTFALLS documents that a target is not met on this
    GPU model at this position: strict, unless the shortfall is within the pool's spread of the
    target (family.UNSETTLED_SHORTFALLS)."""
    reason = target_shortfall(device.arch, device.name, target, position)
    if reason:
        strict = shortfall_is_strict(device.arch, device.name, target, position)
        request.applymarker(pytest.mark.xfail(strict=strict, raises=(AssertionError,), reason=f"target not met: {reason}"))


# Every variant at every position is the sweep's grid: the gated variants stay in every run, the
# rest are the full tier (--gpu-perf-full, nightly). The comparisons still check every variant
# against its stored baseline at GATE_POSITIONS.
MS_PER_TOKEN_CASES = [
    pytest.param(variant, position, marks=() if variant in GATE_CANDIDATES else pytest.mark.gpu_perf_full,
                 id=f"{variant}-{position}")
    for variant in VARIANTS
    for position in PERF_POSITIONS
]


@pytest.mark.sm90
@pytest.mark.parametrize(("variant", "position"), MS_PER_TOKEN_CASES)
def test_ms_per_token(gpu_perf: GpuPerf, model: Any, variant: str, position: int) -> None:
    m = gpu_perf.measure(step(model, variant, position))
    gpu_perf.record("ms_per_token", m.median_s * 1e3, "ms")
    gpu_perf.record("tokens_per_s", 1.0 / m.median_s, "tok/s")
    gpu_perf.record("roofline_fraction", m.bandwidth / gpu_perf.copy_bandwidth())


@pytest.mark.sm90
@pytest.mark.parametrize("position", GATE_POSITIONS)
@pytest.mark.parametrize("comparison", COMPARISONS)
def test_variant_speedup(gpu_perf: GpuPerf, model: Any, comparison: str, position: int) -> None:
    """The note's claims, each against the variant it builds on (head_based against the baseline,
    as the issue asks; the note measured it 0.67x, ours measured 1.09x)."""
    fast, base = COMPARISONS[comparison]
    gpu_perf.assert_speedup(step(model, fast, position), step(model, base, position),
                            at_least=speedup_margin(gpu_perf.device.arch, comparison, position))


@pytest.mark.sm90
@pytest.mark.parametrize("position", ROOFLINE_POSITIONS)
def test_best_variant_against_roofline(gpu_perf: GpuPerf, model: Any, position: int, request: pytest.FixtureRequest) -> None:
    """Bytes of weights + KV read per token over the measured copy bandwidth, as a fraction of the
    measured time of the fastest candidate (the issue's target: at least 0.5 at positions <= 200)."""
    expect_shortfall(request, gpu_perf.device, "roofline", position)
    best, m = fastest_candidate(gpu_perf, model, position)
    fraction = m.bandwidth / gpu_perf.copy_bandwidth()
    gpu_perf.record(f"roofline_fraction[{best}]", fraction)
    floor = MIN_ROOFLINE_FRACTION.get(gpu_perf.device.arch)
    if floor is not None:
        assert fraction >= floor, (f"{best} (fastest of {GATE_CANDIDATES}) at position {position}: {fraction:.1%} of "
                                   f"the copy-bandwidth roofline, below the {floor:.0%} gate ({m.median_s * 1e3:.3f} ms/token)")


@pytest.fixture(scope="module")
def hf_peer(gpu: Any, model: Any, full_weights: Any, kv_prefill: tuple[np.ndarray, np.ndarray]) -> Iterator[Any]:
    """transformers' Qwen3 with a static cache and the same weights, one step in a CUDA graph,
    checked to compute our model's logits before anything is timed."""
    import cupy

    from kernels.megakernel import hf_peer as peer_module

    reason = peer_module.unavailable_reason()
    if reason:
        pytest.skip(reason)
    peer = peer_module.HFStaticCachePeer(QWEN3_0_6B, full_weights, MAX_SEQ)
    try:
        k, v = kv_prefill
        for token, position in HF_CHECK_STEPS:
            # The earlier tests' timed steps (TOKEN at PERF_POSITIONS) wrote rows 1, 10, ... of our
            # cache; ours must come from the same prefill the peer gets (a 0.88 on an H200 was this).
            model.set_kv_cache(k, v)
            ours = cupy.asnumpy(model.step(GATE_CANDIDATES[0], token, position)).copy()
            record = peer_module.cross_check(peer, ours, k, v, token, position)
            if not record["ok"]:
                known = target_shortfall(gpu.arch, gpu.name, "hf_peer")
                message = f"the transformers peer is not our model at position {position}: {record}"
                if known:
                    pytest.xfail(f"{message} (known: {known})")
                pytest.fail(message)
        model.set_kv_cache(k, v)  # our steps above wrote their rows
        peer.set_step(TOKEN, HF_POSITIONS[0])
        peer.capture()
        yield peer
    finally:
        peer.close()


@pytest.mark.sm90
@pytest.mark.parametrize("position", HF_POSITIONS)
def test_speedup_vs_hf_static_cache_graph(gpu_perf: GpuPerf, model: Any, hf_peer: Any,
                                          kv_prefill: tuple[np.ndarray, np.ndarray], position: int,
                                          request: pytest.FixtureRequest) -> None:
    """The issue's target: at least 8x faster than transformers with a static cache in a CUDA graph."""
    expect_shortfall(request, gpu_perf.device, "hf_speedup", position)
    hf_peer.prefill(*kv_prefill, position)
    hf_peer.set_step(TOKEN, position)
    best, _ = fastest_candidate(gpu_perf, model, position)
    hf = Variant(f"hf-static-graph@{position}", hf_peer.launcher_on_cupy_stream(), bytes=QWEN3_0_6B.step_bytes(position))
    cmp = gpu_perf.assert_speedup(step(model, best, position), hf, at_least=MIN_SPEEDUP_VS_HF.get(gpu_perf.device.arch))
    gpu_perf.record(f"speedup_vs_hf_static_graph[{best}]", cmp.speedup, "x")
    counters = hf_peer.write_positions()
    assert not counters or set(counters) == {position + 1}, f"peer write counters drifted: {sorted(set(counters))}"
