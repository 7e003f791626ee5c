"""Compile and launch the merge_attn_states kernels, with input checks.

Arrays are CuPy arrays: outputs ``[num_tokens, num_heads, head_size]`` as ``float16`` (fp16) or
``uint16`` holding bf16 bits (bf16); LSEs ``[num_heads, num_tokens]`` float32. ``make_launcher``
checks everything once and returns a closure that only enqueues the kernel on the current CuPy
stream (no allocation, no synchronization), as timing needs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from kernels.merge_attn_states.family import (
    COMPILE_OPTIONS,
    DEFAULT_LAUNCH,
    DEFAULT_NAME_EXPRESSIONS,
    DTYPES,
    HEAD_SIZES,
    SOURCES,
    VARIANTS,
    VECTORIZED_SWEEP,
    name_expression,
)
from kernels.merge_attn_states.reference import STORAGE_DTYPES, MergeInputs, to_storage

_MAX_GRID_Y = 65535
_MAX_ELEMENTS = 2**31  # the kernels index with 32-bit integers


@dataclass(frozen=True)
class VectorizedConfig:
    """Launch shape of the vectorized kernel: threads per block, 16-byte packs per thread. The
    default (``family.DEFAULT_LAUNCH``, 256 x 1) is the H200 sweep's choice; see family.py."""

    block_threads: int = DEFAULT_LAUNCH[0]
    packs_per_thread: int = DEFAULT_LAUNCH[1]


DEFAULT_VECTORIZED = VectorizedConfig()


def kernel_name(variant: str, dtype: str, head_size: int, output_lse: bool,
                config: VectorizedConfig = DEFAULT_VECTORIZED) -> str:
    """The template instantiation (NVRTC name expression) that runs this configuration."""
    return name_expression(variant, dtype, head_size, output_lse, (config.block_threads, config.packs_per_thread))


# Every default configuration in one module: one NVRTC compile serves all correctness tests.
_DEFAULT_NAMES = DEFAULT_NAME_EXPRESSIONS


def get_kernel(variant: str, dtype: str, head_size: int, output_lse: bool,
               config: VectorizedConfig = DEFAULT_VECTORIZED) -> Any:
    """The compiled ``cupy.RawKernel`` for this configuration (compiled once per process)."""
    from pytest_gpuperf import load_module

    name = kernel_name(variant, dtype, head_size, output_lse, config)
    if name in _DEFAULT_NAMES:
        names = _DEFAULT_NAMES
    else:  # a sweep configuration: compile all of them for this dtype and shape at once
        names = tuple(kernel_name("vectorized", dtype, head_size, output_lse, VectorizedConfig(block, packs))
                      for block, packs in VECTORIZED_SWEEP)
    module = load_module(SOURCES[0], options=COMPILE_OPTIONS, name_expressions=names)
    return module.get_function(name)


def _check_variant(variant: str, config: VectorizedConfig | None) -> VectorizedConfig:
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    if config is None:
        return DEFAULT_VECTORIZED
    if variant != "vectorized":
        raise ValueError(f"config applies to the vectorized variant only, got variant={variant!r}")
    if (config.block_threads, config.packs_per_thread) not in VECTORIZED_SWEEP:
        raise ValueError(
            f"config must be one of (block_threads, packs_per_thread) {VECTORIZED_SWEEP}, got {config}"
        )
    return config


def _check_array(name: str, array: Any, shape: tuple[int, ...], dtype: np.dtype, aligned: bool) -> None:
    if not hasattr(getattr(array, "data", None), "ptr"):
        raise ValueError(f"{name} must be a CuPy array on the device, got {type(array).__name__}")
    if array.dtype != dtype:
        raise ValueError(f"{name} must have dtype {dtype}, got {array.dtype}")
    if tuple(array.shape) != shape:
        raise ValueError(f"{name} must have shape {shape}, got {tuple(array.shape)}")
    if not array.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous")
    if aligned and array.data.ptr % 16:
        raise ValueError(f"{name} must be 16-byte aligned for the vectorized variant")


def make_launcher(
    variant: str,
    output: Any,
    output_lse: Any | None,
    prefix_output: Any,
    prefix_lse: Any,
    suffix_output: Any,
    suffix_lse: Any,
    *,
    dtype: str,
    config: VectorizedConfig | None = None,
) -> Callable[[], None]:
    """Check the arguments and return a closure that enqueues one merge on the current stream.

    ``output_lse`` may be None (the output LSE is then not written). ``config`` picks the
    vectorized kernel's launch shape (default ``DEFAULT_VECTORIZED``).
    """
    config = _check_variant(variant, config)
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    if getattr(prefix_output, "ndim", None) != 3:
        raise ValueError("prefix_output must be a 3-d array [num_tokens, num_heads, head_size]")
    num_tokens, num_heads, head_size = (int(n) for n in prefix_output.shape)
    if head_size not in HEAD_SIZES:
        raise ValueError(f"head_size (prefix_output.shape[2]) must be one of {HEAD_SIZES}, got {head_size}")
    if num_tokens < 1 or num_heads < 1:
        raise ValueError(f"num_tokens and num_heads must be at least 1, got {num_tokens} and {num_heads}")
    if num_tokens * num_heads * head_size >= _MAX_ELEMENTS:
        raise ValueError(f"num_tokens * num_heads * head_size must be below 2**31, got shape {prefix_output.shape}")
    if variant != "vectorized" and num_heads > _MAX_GRID_Y:
        raise ValueError(f"num_heads must be at most {_MAX_GRID_Y} for the {variant} variant, got {num_heads}")

    aligned = variant == "vectorized"
    value_shape = (num_tokens, num_heads, head_size)
    lse_shape = (num_heads, num_tokens)
    float32 = np.dtype(np.float32)
    for name, array in (("output", output), ("prefix_output", prefix_output), ("suffix_output", suffix_output)):
        _check_array(name, array, value_shape, STORAGE_DTYPES[dtype], aligned)
    for name, array in (("prefix_lse", prefix_lse), ("suffix_lse", suffix_lse)):
        _check_array(name, array, lse_shape, float32, aligned=False)
    if output_lse is not None:
        _check_array("output_lse", output_lse, lse_shape, float32, aligned=False)
    if output.data.ptr in (prefix_output.data.ptr, suffix_output.data.ptr):
        raise ValueError("output must not alias prefix_output or suffix_output (the kernels read them __restrict__)")

    kernel = get_kernel(variant, dtype, head_size, output_lse is not None, config)
    lse_arg = output_lse if output_lse is not None else np.uint64(0)  # a null float*
    args: tuple[Any, ...] = (output, lse_arg, prefix_output, prefix_lse, suffix_output, suffix_lse)
    if variant == "vectorized":
        packs = num_tokens * num_heads * head_size // 8
        per_block = config.block_threads * config.packs_per_thread
        grid: tuple[int, ...] = ((packs + per_block - 1) // per_block,)
        block: tuple[int, ...] = (config.block_threads,)
        args += (np.uint32(num_tokens), np.uint32(num_heads))
    else:
        grid, block = (num_tokens, num_heads), (head_size,)

    def launch() -> None:
        kernel(grid, block, args)

    return launch


def merge_attn_states(variant: str, output: Any, output_lse: Any | None, prefix_output: Any, prefix_lse: Any,
                      suffix_output: Any, suffix_lse: Any, *, dtype: str,
                      config: VectorizedConfig | None = None) -> None:
    """Merge once with ``variant`` (see ``make_launcher``)."""
    make_launcher(variant, output, output_lse, prefix_output, prefix_lse, suffix_output, suffix_lse,
                  dtype=dtype, config=config)()


@dataclass
class DeviceBuffers:
    """Inputs uploaded to the GPU plus output buffers; ``output_lse`` is None when not requested."""

    dtype: str
    prefix_output: Any
    prefix_lse: Any
    suffix_output: Any
    suffix_lse: Any
    output: Any
    output_lse: Any | None

    def launcher(self, variant: str, config: VectorizedConfig | None = None) -> Callable[[], None]:
        """``make_launcher`` over these buffers."""
        return make_launcher(variant, self.output, self.output_lse, self.prefix_output, self.prefix_lse,
                             self.suffix_output, self.suffix_lse, dtype=self.dtype, config=config)


def upload(inputs: MergeInputs, output_lse: bool) -> DeviceBuffers:
    """Copy ``inputs`` to the current device and allocate (unpoisoned) outputs."""
    import cupy

    num_tokens, num_heads, head_size = inputs.shape
    return DeviceBuffers(
        dtype=inputs.dtype,
        prefix_output=cupy.asarray(inputs.prefix_output),
        prefix_lse=cupy.asarray(inputs.prefix_lse),
        suffix_output=cupy.asarray(inputs.suffix_output),
        suffix_lse=cupy.asarray(inputs.suffix_lse),
        output=cupy.empty((num_tokens, num_heads, head_size), dtype=STORAGE_DTYPES[inputs.dtype]),
        output_lse=cupy.empty((num_heads, num_tokens), dtype=np.float32) if output_lse else None,
    )


def run_poisoned(variant: str, inputs: MergeInputs, output_lse: bool,
                 config: VectorizedConfig | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """Upload ``inputs``, poison the outputs, merge once; return the host output (storage form)
    and the output LSE (None when not requested)."""
    from pytest_gpuperf.numerics import poison

    buffers = upload(inputs, output_lse)
    poison(buffers.output)
    if buffers.output_lse is not None:
        poison(buffers.output_lse)
    buffers.launcher(variant, config)()
    lse = buffers.output_lse.get() if buffers.output_lse is not None else None
    return buffers.output.get(), lse


def random_device_buffers(num_tokens: int, num_heads: int, head_size: int, dtype: str, output_lse: bool,
                          *, seed: int = 0) -> DeviceBuffers:
    """Seeded random inputs drawn on the device (fast for perf shapes; no host copy, no reference):
    values ~ normal(0, 1) rounded to ``dtype``, LSEs ~ normal(0, 4), all finite."""
    import cupy

    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    rng = cupy.random.default_rng(seed)
    value_shape = (num_tokens, num_heads, head_size)
    lse_shape = (num_heads, num_tokens)

    def values() -> Any:
        return to_storage(rng.standard_normal(value_shape, dtype=cupy.float32), dtype)

    def lse() -> Any:
        return rng.standard_normal(lse_shape, dtype=cupy.float32) * cupy.float32(4.0)

    return DeviceBuffers(
        dtype=dtype,
        prefix_output=values(),
        prefix_lse=lse(),
        suffix_output=values(),
        suffix_lse=lse(),
        output=cupy.empty(value_shape, dtype=STORAGE_DTYPES[dtype]),
        output_lse=cupy.empty(lse_shape, dtype=np.float32) if output_lse else None,
    )
