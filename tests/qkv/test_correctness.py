"""qkv correctness on the GPU: every variant against the float64 reference.

Shapes, launch configurations and input seeds are drawn by hypothesis: d_model, d_qkv and
d_ws from 1 up to 600, 2000 and 5000 (odd sizes exercise the tails, the scalar d_model
path and the zero padding of w2), warps per block 1 to 16 and grids from one block up.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels.qkv.accuracy import assert_fp32_accumulation
from kernels.qkv.family import LAYERS
from kernels.qkv.launch import (
    NAME_EXPRESSIONS,
    STRIP_VARIANTS,
    STRIP_WORDS,
    VARIANTS,
    LaunchConfig,
    QkvBuffers,
    launch,
    load_qkv_module,
    max_warps_per_block,
    padded_qkv,
    rearrange_weights,
    upload,
)
from kernels.qkv.reference import QkvShape, make_inputs, reference
from pytest_gpuperf import strategies as gst
from pytest_gpuperf.numerics import assert_close, poison, to_numpy

# Keeps the float64 reference (and the bound's |h| @ |w|.T) to about 0.1 s per example.
MAX_MULTIPLY_ADDS = 40_000_000
STRIP16_MAX_WARPS = max_warps_per_block("qkv_strip", 16)  # __launch_bounds__(256) in qkv.cu


def check_variant(variant: str, bufs: QkvBuffers, w_qkv: np.ndarray, h_in: np.ndarray, config: LaunchConfig) -> None:
    name = f"{variant} ({bufs.shape}, {config.label(variant)})"
    expected = reference(w_qkv, h_in)
    poison(bufs.h_qkv)
    launch(variant, bufs, config)
    assert_close(bufs.h_qkv, expected, max_rel_l2=math.inf, name=name)  # NaN (poison) and infinities
    assert_fp32_accumulation(bufs.h_qkv, expected, w_qkv, h_in, name)


@st.composite
def problem_shapes(draw: st.DrawFn) -> QkvShape:
    d_model = draw(gst.sizes(1, 600))
    d_qkv = draw(gst.sizes(1, 2000))
    d_ws = draw(gst.sizes(1, 5000))
    d_ws = max(1, min(d_ws, MAX_MULTIPLY_ADDS // (d_model * d_qkv)))
    return QkvShape(d_model=d_model, d_qkv=d_qkv, d_ws=d_ws)


@st.composite
def launch_configs(draw: st.DrawFn) -> LaunchConfig:
    words = draw(st.sampled_from(STRIP_WORDS))
    warps = draw(st.sampled_from((1, 2, 3, 4, 8, 16)))
    if words == 16:
        warps = min(warps, STRIP16_MAX_WARPS)
    blocks = draw(st.one_of(st.none(), st.integers(1, 300)))
    return LaunchConfig(warps_per_block=warps, blocks=blocks, words_per_thread=words)


@pytest.mark.sm80
@pytest.mark.parametrize("variant", VARIANTS)
@settings(max_examples=40, deadline=None)
@given(shape=problem_shapes(), config=launch_configs(), seed=gst.seeds())
def test_variant_matches_reference(gpu: Any, variant: str, shape: QkvShape, config: LaunchConfig, seed: int) -> None:
    w_qkv, h_in = make_inputs(shape, seed)
    check_variant(variant, upload(w_qkv, h_in), w_qkv, h_in, config)


@pytest.mark.sm80
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_note_layers_default_launch(gpu: Any, variant: str, layer: str) -> None:
    """The note's two layers with the default launch (blocks = SMs, 8 warps)."""
    w_qkv, h_in = make_inputs(LAYERS[layer], seed=2023)
    check_variant(variant, upload(w_qkv, h_in), w_qkv, h_in, LaunchConfig())


@pytest.mark.sm80
@settings(max_examples=30, deadline=None)
@given(d_model=gst.sizes(1, 600), d_qkv=gst.sizes(1, 2000), seed=gst.seeds())
def test_rearranged_weights_are_padded_transpose(gpu: Any, d_model: int, d_qkv: int, seed: int) -> None:
    import cupy

    w_qkv, _ = make_inputs(QkvShape(d_model=d_model, d_qkv=d_qkv, d_ws=1), seed)
    w2 = cupy.empty((d_model, padded_qkv(d_qkv)), dtype=cupy.float32)
    poison(w2)
    host = to_numpy(rearrange_weights(cupy.asarray(w_qkv), out=w2))
    np.testing.assert_array_equal(host[:, :d_qkv], w_qkv.T)
    np.testing.assert_array_equal(host[:, d_qkv:], 0.0)


@pytest.mark.sm80
@pytest.mark.parametrize("variant", sorted(STRIP_VARIANTS))
@pytest.mark.parametrize("words", STRIP_WORDS)
def test_strip_unaligned_arrays_take_scalar_path(gpu: Any, variant: str, words: int) -> None:
    """Arrays that start 4 bytes past a 16-byte boundary must not be read or written as float4."""
    import cupy

    shape = QkvShape(d_model=64, d_qkv=200, d_ws=77)
    w_qkv, h_in = make_inputs(shape, seed=words)

    def offset_copy(host: np.ndarray) -> Any:
        flat = cupy.empty(host.size + 1, dtype=cupy.float32)
        view = flat[1:].reshape(host.shape)
        view[...] = cupy.asarray(host)
        return view

    aligned = upload(w_qkv, h_in)
    bufs = QkvBuffers(
        w_qkv=offset_copy(w_qkv),
        w2=aligned.w2,
        h_in=offset_copy(h_in),
        h_qkv=offset_copy(np.zeros((shape.d_ws, shape.d_qkv), np.float32)),
        shape=shape,
    )
    check_variant(variant, bufs, w_qkv, h_in, LaunchConfig(words_per_thread=words))


@pytest.mark.sm80
def test_kernels_fit_registers_without_spilling(gpu: Any) -> None:
    """No kernel spills to local memory, and each can launch the block sizes the sweep uses."""
    module = load_qkv_module()
    for name in ("qkv_base", "qkv_base_w2", "qkv_w_rearrange", *NAME_EXPRESSIONS):
        kernel = module.get_function(name)
        assert kernel.local_size_bytes == 0, f"{name}: {kernel.local_size_bytes} bytes of local memory (spills)"
        needed = 32 * STRIP16_MAX_WARPS if "<16," in name else 512 if "<" in name else 1024
        assert kernel.max_threads_per_block >= needed, (
            f"{name}: at most {kernel.max_threads_per_block} threads per block ({kernel.num_regs} registers)"
        )
