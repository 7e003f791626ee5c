"""Compile the qkv kernels (qkv.cu) and launch them, with input checks.

Launches follow the note: blocks = number of SMs by default, warps per block a parameter.
``make_launcher`` checks everything once and returns a closure that only enqueues the kernel
on the current CuPy stream, so it can be timed as is.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from kernels.qkv.reference import QkvShape

SOURCE = Path(__file__).with_name("qkv.cu")
COMPILE_OPTIONS = ("--std=c++17",)

VARIANTS = ("qkv_base", "qkv_base_w2", "qkv_strip", "qkv_strip_w2")
W2_VARIANTS = frozenset({"qkv_base_w2", "qkv_strip_w2"})
STRIP_VARIANTS = frozenset({"qkv_strip", "qkv_strip_w2"})
STRIP_WORDS = (4, 8, 16)  # words per thread instantiated for the strip kernels
MAX_WARPS_PER_BLOCK = 32
_INT_MAX = 2**31 - 1  # the kernels index with 32-bit int


def max_warps_per_block(variant: str, words_per_thread: int = 8) -> int:
    """The largest block ``variant`` is built for (qkv.cu's ``__launch_bounds__``), in warps.

    Strip kernels: 16 warps for 4 or 8 words per thread, 8 for 16; the base kernels take any
    block (30-32 registers). The launcher still checks the compiled kernel's own limit.
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant: expected one of {VARIANTS}, got {variant!r}")
    if variant not in STRIP_VARIANTS:
        return MAX_WARPS_PER_BLOCK
    return 8 if words_per_thread >= 16 else 16


def strip_kernel_name(variant: str, words_per_thread: int, vec_m: bool) -> str:
    """Template name of a strip kernel instantiation, as given to NVRTC."""
    return f"{variant}<{words_per_thread}, {'true' if vec_m else 'false'}>"


NAME_EXPRESSIONS = tuple(
    strip_kernel_name(variant, words, vec_m)
    for variant in ("qkv_strip", "qkv_strip_w2")
    for words in STRIP_WORDS
    for vec_m in (True, False)
)


def load_qkv_module() -> Any:
    """The compiled ``cupy.RawModule`` holding every qkv kernel (cached per process)."""
    from pytest_gpuperf import load_module

    return load_module(SOURCE, options=COMPILE_OPTIONS, name_expressions=NAME_EXPRESSIONS)


@dataclass(frozen=True)
class LaunchConfig:
    """Grid and block of a launch. ``blocks`` (exact) overrides ``blocks_per_sm`` x SMs."""

    warps_per_block: int = 8
    blocks_per_sm: int = 1
    blocks: int | None = None
    words_per_thread: int = 8  # strip variants only

    def __post_init__(self) -> None:
        if not 1 <= self.warps_per_block <= MAX_WARPS_PER_BLOCK:
            raise ValueError(f"warps_per_block: expected 1..{MAX_WARPS_PER_BLOCK}, got {self.warps_per_block}")
        if self.blocks_per_sm < 1:
            raise ValueError(f"blocks_per_sm: expected at least 1, got {self.blocks_per_sm}")
        if self.blocks is not None and self.blocks < 1:
            raise ValueError(f"blocks: expected None or at least 1, got {self.blocks}")
        if self.words_per_thread not in STRIP_WORDS:
            raise ValueError(f"words_per_thread: expected one of {STRIP_WORDS}, got {self.words_per_thread}")

    def grid_blocks(self, sm_count: int) -> int:
        return self.blocks if self.blocks is not None else self.blocks_per_sm * sm_count

    def label(self, variant: str) -> str:
        grid = f"{self.blocks}blk" if self.blocks is not None else f"{self.blocks_per_sm}xSM"
        words = f" wpt={self.words_per_thread}" if variant in STRIP_VARIANTS else ""
        return f"{self.warps_per_block}w {grid}{words}"


def padded_qkv(d_qkv: int) -> int:
    """Row length of w2: d_qkv rounded up to a multiple of 4 (one float4 per strip thread)."""
    return (d_qkv + 3) // 4 * 4


def _check_matrix(name: str, array: Any, shape: tuple[int, int]) -> None:
    if str(array.dtype) != "float32":
        raise ValueError(f"{name}: expected dtype float32, got {array.dtype}")
    if tuple(array.shape) != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {tuple(array.shape)}")
    if not array.flags.c_contiguous:
        raise ValueError(f"{name}: expected a C-contiguous (row-major) array")


def check_problem(w_qkv: Any, h_in: Any, h_qkv: Any) -> QkvShape:
    """Check dtypes, shapes and layout of the three matrices; return the problem shape.

    Works on any array with ``shape``, ``dtype`` and ``flags`` (NumPy or CuPy).
    """
    for name, array in (("w_qkv", w_qkv), ("h_in", h_in), ("h_qkv", h_qkv)):
        if len(array.shape) != 2:
            raise ValueError(f"{name}: expected a 2-D matrix, got shape {tuple(array.shape)}")
    d_qkv, d_model = (int(n) for n in w_qkv.shape)
    d_ws = int(h_in.shape[0])
    if d_qkv < 1 or d_model < 1 or d_ws < 1:
        raise ValueError(f"w_qkv, h_in: expected non-empty matrices, got {tuple(w_qkv.shape)} and {tuple(h_in.shape)}")
    _check_matrix("w_qkv", w_qkv, (d_qkv, d_model))
    _check_matrix("h_in", h_in, (d_ws, d_model))
    _check_matrix("h_qkv", h_qkv, (d_ws, d_qkv))
    largest = max(d_ws * d_model, d_ws * d_qkv, d_model * padded_qkv(d_qkv))
    if largest > _INT_MAX // 2:
        raise ValueError(f"h_in, w_qkv: {largest} elements in one matrix exceed the kernels' 32-bit indexing")
    return QkvShape(d_model=d_model, d_qkv=d_qkv, d_ws=d_ws)


@dataclass(frozen=True)
class QkvBuffers:
    """Device arrays of one problem: weights in both layouts, input and output."""

    w_qkv: Any  # (d_qkv, d_model)
    w2: Any  # (d_model, padded_qkv(d_qkv)), from rearrange_weights
    h_in: Any  # (d_ws, d_model)
    h_qkv: Any  # (d_ws, d_qkv)
    shape: QkvShape


@functools.cache
def _sm_count(device_id: int) -> int:
    import cupy

    return int(cupy.cuda.Device(device_id).attributes["MultiProcessorCount"])


def sm_count() -> int:
    """Multiprocessors of the current CUDA device."""
    import cupy

    return _sm_count(cupy.cuda.Device().id)


def _is_aligned16(array: Any) -> bool:
    return int(array.data.ptr) % 16 == 0


def _check_w2(w2: Any, shape: QkvShape) -> None:
    _check_matrix("w2", w2, (shape.d_model, padded_qkv(shape.d_qkv)))
    if not _is_aligned16(w2):
        raise ValueError("w2: expected a 16-byte aligned array (as rearrange_weights allocates)")


def rearrange_weights(w_qkv: Any, out: Any = None) -> Any:
    """w2 = w_qkv transposed, rows padded with zeros to padded_qkv(d_qkv); run once per weights.

    Writes into ``out`` (d_model x padded_qkv(d_qkv), float32) when given, else a new array.
    """
    import cupy
    import numpy as np

    d_qkv, d_model = (int(n) for n in w_qkv.shape)
    _check_matrix("w_qkv", w_qkv, (d_qkv, d_model))
    ld_w2 = padded_qkv(d_qkv)
    w2 = cupy.empty((d_model, ld_w2), dtype=cupy.float32) if out is None else out
    _check_w2(w2, QkvShape(d_model=d_model, d_qkv=d_qkv, d_ws=1))
    threads = 256
    blocks = min((d_model * ld_w2 + threads - 1) // threads, 8 * sm_count())
    kernel = load_qkv_module().get_function("qkv_w_rearrange")
    kernel((blocks,), (threads,), (w_qkv, w2, np.int32(d_model), np.int32(d_qkv), np.int32(ld_w2)))
    return w2


def upload(w_qkv: Any, h_in: Any) -> QkvBuffers:
    """Copy host inputs to the device, allocate the output and build w2."""
    import cupy

    w_dev = cupy.ascontiguousarray(cupy.asarray(w_qkv, dtype=cupy.float32))
    h_dev = cupy.ascontiguousarray(cupy.asarray(h_in, dtype=cupy.float32))
    h_qkv = cupy.empty((h_dev.shape[0], w_dev.shape[0]), dtype=cupy.float32)
    shape = check_problem(w_dev, h_dev, h_qkv)
    return QkvBuffers(w_qkv=w_dev, w2=rearrange_weights(w_dev), h_in=h_dev, h_qkv=h_qkv, shape=shape)


def make_launcher(variant: str, bufs: QkvBuffers, config: LaunchConfig = LaunchConfig()) -> Callable[[], None]:
    """Check ``variant``, buffers and ``config`` once; return a closure that enqueues the kernel."""
    import numpy as np

    if variant not in VARIANTS:
        raise ValueError(f"variant: expected one of {VARIANTS}, got {variant!r}")
    shape = check_problem(bufs.w_qkv, bufs.h_in, bufs.h_qkv)
    uses_w2 = variant in W2_VARIANTS
    if uses_w2:
        _check_w2(bufs.w2, shape)
    weights = bufs.w2 if uses_w2 else bufs.w_qkv

    module = load_qkv_module()
    if variant in STRIP_VARIANTS:
        vec_m = shape.d_model % 4 == 0 and _is_aligned16(bufs.h_in) and _is_aligned16(weights)
        kernel = module.get_function(strip_kernel_name(variant, config.words_per_thread, vec_m))
    else:
        kernel = module.get_function(variant)

    threads = 32 * config.warps_per_block
    max_threads = int(kernel.max_threads_per_block)
    if threads > max_threads:
        raise ValueError(
            f"warps_per_block: {config.warps_per_block} warps exceed the {max_threads // 32} that "
            f"{variant} (words_per_thread={config.words_per_thread}) can run per block"
        )
    blocks = config.grid_blocks(sm_count())
    if shape.d_ws * padded_qkv(shape.d_qkv) + blocks * threads > _INT_MAX:
        raise ValueError(f"blocks: {blocks} blocks of {threads} threads overflow the kernels' 32-bit indexing")

    dims = (np.int32(shape.d_model), np.int32(shape.d_qkv), np.int32(shape.d_ws))
    args: tuple[Any, ...] = (weights, bufs.h_in, bufs.h_qkv, *dims)
    if uses_w2:
        args += (np.int32(padded_qkv(shape.d_qkv)),)
    if variant in STRIP_VARIANTS:
        vec_out = shape.d_qkv % 4 == 0 and _is_aligned16(bufs.h_qkv)
        args += (np.int32(vec_out),)

    grid, block = (blocks,), (threads,)

    def launch() -> None:
        kernel(grid, block, args)

    return launch


def launch(variant: str, bufs: QkvBuffers, config: LaunchConfig = LaunchConfig()) -> None:
    """Compute ``bufs.h_qkv`` with ``variant`` (enqueued on the current stream)."""
    make_launcher(variant, bufs, config)()


def make_cublas_launcher(bufs: QkvBuffers) -> Callable[[], None]:
    """cuBLAS reference on the same buffers: ``h_qkv = h_in @ w_qkv.T`` through ``cupy.matmul``.

    fp32 unless the environment sets CUPY_TF32=1 (then cuBLAS may use TF32 tensor cores).
    """
    import cupy

    check_problem(bufs.w_qkv, bufs.h_in, bufs.h_qkv)
    w_t = bufs.w_qkv.T  # a transposed view: cuBLAS reads it in place, no copy

    def launch() -> None:
        cupy.matmul(bufs.h_in, w_t, out=bufs.h_qkv)

    return launch
