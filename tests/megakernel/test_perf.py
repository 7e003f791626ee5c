"""megakernel perf gates on the full Qwen3-0.6B shape (run with --gpu-perf).

One decode step per launch; the timed work includes the logits write. Positions 1..1000 read a
random KV prefill. Margins come from kernels/megakernel/family.py; a None margin measures and
records the ratio without gating.
"""
from __future__ import annotations

from typing import Any, Iterator

import pytest

from kernels.megakernel.config import QWEN3_0_6B
from kernels.megakernel.family import (
    BEST_VARIANT,
    COMPARISONS,
    GATE_POSITIONS,
    MAX_SEQ,
    MIN_ROOFLINE_FRACTION,
    MIN_SPEEDUP_VS_HF,
    PERF_POSITIONS,
    ROOFLINE_POSITIONS,
    VARIANTS,
    speedup_margin,
)
from kernels.megakernel.reference import random_kv_cache
from pytest_gpuperf import Variant

TOKEN = 1234
HF_POSITIONS = (1, 200, 1000)


@pytest.fixture(scope="module")
def model(full_model: Any) -> Any:
    """The full model with a random KV prefill of every position."""
    full_model.set_kv_cache(*random_kv_cache(QWEN3_0_6B, MAX_SEQ, seed=1))
    return full_model


def step(model: Any, variant: str, position: int) -> Variant:
    return Variant(f"{variant}@{position}", model.launcher(variant, TOKEN, position),
                   bytes=QWEN3_0_6B.step_bytes(position), flops=QWEN3_0_6B.step_flops(position))


@pytest.mark.sm90
@pytest.mark.parametrize("position", PERF_POSITIONS)
@pytest.mark.parametrize("variant", VARIANTS)
def test_ms_per_token(gpu_perf: Any, model: Any, variant: str, position: int) -> None:
    m = gpu_perf.measure(step(model, variant, position))
    gpu_perf.record("ms_per_token", m.median_s * 1e3, "ms")
    gpu_perf.record("tokens_per_s", 1.0 / m.median_s, "tok/s")
    gpu_perf.record("roofline_fraction", m.bandwidth / gpu_perf.copy_bandwidth())


@pytest.mark.sm90
@pytest.mark.parametrize("position", GATE_POSITIONS)
@pytest.mark.parametrize("comparison", COMPARISONS)
def test_variant_speedup(gpu_perf: Any, model: Any, comparison: str, position: int) -> None:
    """The note's claims, each against the variant it builds on (head_based against the baseline,
    as the issue asks; the note measured it 0.67x, so its margin may be below 1)."""
    fast, base = COMPARISONS[comparison]
    gpu_perf.assert_speedup(step(model, fast, position), step(model, base, position),
                            at_least=speedup_margin(gpu_perf.device.arch, comparison, position))


@pytest.mark.sm90
@pytest.mark.parametrize("position", ROOFLINE_POSITIONS)
def test_best_variant_against_roofline(gpu_perf: Any, model: Any, position: int) -> None:
    """Bytes of weights + KV read per token over the measured copy bandwidth, as a fraction of the
    measured time (the issue's target: at least 0.5 at positions up to 200)."""
    m = gpu_perf.measure(step(model, BEST_VARIANT, position))
    fraction = m.bandwidth / gpu_perf.copy_bandwidth()
    gpu_perf.record("roofline_fraction", fraction)
    floor = MIN_ROOFLINE_FRACTION.get(gpu_perf.device.arch)
    if floor is not None:
        assert fraction >= floor, (f"{BEST_VARIANT} at position {position}: {fraction:.1%} of the copy-bandwidth "
                                   f"roofline, below the {floor:.0%} gate ({m.median_s * 1e3:.3f} ms/token)")


@pytest.fixture(scope="module")
def hf_peer(model: Any, full_weights: Any) -> Iterator[Any]:
    """transformers' Qwen3 with a static cache and the same weights, one step in a CUDA graph."""
    from kernels.megakernel import hf_peer as peer_module

    reason = peer_module.unavailable_reason()
    if reason:
        pytest.skip(reason)
    peer = peer_module.HFStaticCachePeer(QWEN3_0_6B, full_weights, MAX_SEQ)
    peer.set_step(TOKEN, HF_POSITIONS[0])
    peer.capture()
    yield peer
    del peer


@pytest.mark.sm90
@pytest.mark.parametrize("position", HF_POSITIONS)
def test_speedup_vs_hf_static_cache_graph(gpu_perf: Any, model: Any, hf_peer: Any, position: int) -> None:
    """The issue's target: at least 8x faster than transformers with a static cache in a CUDA graph."""
    hf_peer.set_step(TOKEN, position)
    hf = Variant(f"hf-static-graph@{position}", hf_peer.launcher_on_cupy_stream(), bytes=QWEN3_0_6B.step_bytes(position))
    cmp = gpu_perf.assert_speedup(step(model, BEST_VARIANT, position), hf,
                                  at_least=MIN_SPEEDUP_VS_HF.get(gpu_perf.device.arch))
    gpu_perf.record("speedup_vs_hf_static_graph", cmp.speedup, "x")
