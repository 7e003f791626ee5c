"""Compile and launch the cluster_reduce kernels through CuPy, with input checks."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from kernels.cluster_reduce.family import (
    CLUSTER_SIZE,
    COMPILE_OPTIONS,
    DEFAULT_THREADS,
    SOURCE,
    STAGES,
    VARIANTS,
    VariantSpec,
    all_kernel_names,
    kernel_name,
)

_DEFAULT_SMEM_LIMIT = 48 * 1024  # above this a kernel must opt in to more dynamic shared memory
_ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97  # cudaDevAttrMaxSharedMemoryPerBlockOptin


def shared_bytes(variant: str, size: int) -> int:
    """Dynamic shared memory one block of `variant` needs for `size` elements."""
    return VARIANTS[variant].smem_buffers * size * 2


def check_arguments(variant: str, stage: str, *, n_elements: int, size: int, threads: int) -> VariantSpec:
    """Validate everything that does not need the device; return the variant's spec."""
    if variant not in VARIANTS:
        raise ValueError(f"variant: expected one of {sorted(VARIANTS)}, got {variant!r}")
    if stage not in STAGES:
        raise ValueError(f"stage: expected one of {list(STAGES)}, got {stage!r}")
    spec = VARIANTS[variant]
    if not isinstance(size, (int, np.integer)) or size <= 0:
        raise ValueError(f"size: expected a positive number of elements per block, got {size!r}")
    if size % spec.vec != 0:
        raise ValueError(f"size: variant {variant!r} needs a multiple of {spec.vec} elements per block, got {size}")
    if n_elements <= 0 or n_elements % (CLUSTER_SIZE * size) != 0:
        raise ValueError(
            f"x: expected a length that is a positive multiple of {CLUSTER_SIZE} * size = "
            f"{CLUSTER_SIZE * size}, got {n_elements}"
        )
    if n_elements // size > 2**31 - 1:
        raise ValueError(f"x: {n_elements // size} blocks exceed the grid limit of 2**31 - 1")
    if not isinstance(threads, (int, np.integer)) or not (32 <= threads <= 1024) or threads % 32 != 0:
        raise ValueError(f"threads: expected a multiple of 32 between 32 and 1024, got {threads!r}")
    return spec


def _module() -> Any:
    from pytest_gpuperf import load_module

    return load_module(SOURCE, options=COMPILE_OPTIONS, name_expressions=all_kernel_names())


def _check_array(name: str, array: Any) -> None:
    import cupy

    if not isinstance(array, cupy.ndarray):
        raise ValueError(f"{name}: expected a cupy.ndarray, got {type(array).__name__}")
    if array.dtype != np.float16:
        raise ValueError(f"{name}: expected dtype float16, got {array.dtype}")
    if array.ndim != 1 or not array.flags.c_contiguous:
        raise ValueError(f"{name}: expected a contiguous 1-D array, got shape {array.shape}")


def make_launch(
    variant: str,
    stage: str,
    x: Any,
    out: Any,
    *,
    size: int,
    threads: int = DEFAULT_THREADS,
    skew: bool = False,
) -> Callable[[], None]:
    """Return a callable that enqueues one cluster_reduce of `x` into `out` on the current stream.

    `x` and `out` are contiguous 1-D float16 CuPy arrays of ``clusters * 2 * size`` elements;
    `out` must not overlap `x` (the baseline reads the neighbour's slice from `x` while other
    blocks write). ``skew=True`` selects the instantiation that forces the worst block
    interleaving (for tests). All checks and the shared-memory opt-in happen here, once; the
    returned callable only launches.
    """
    import cupy

    _check_array("x", x)
    _check_array("out", out)
    spec = check_arguments(variant, stage, n_elements=x.size, size=size, threads=threads)
    if spec.vec > 1 and (x.data.ptr % 16 or out.data.ptr % 16):
        raise ValueError(f"x, out: variant {variant!r} makes 16-byte accesses and needs 16-byte aligned arrays")
    if out.size != x.size:
        raise ValueError(f"out: expected {x.size} elements like x, got {out.size}")
    x_begin, out_begin = x.data.ptr, out.data.ptr
    if x_begin < out_begin + out.nbytes and out_begin < x_begin + x.nbytes:
        raise ValueError("out: must not overlap x (the kernel reads x while writing out)")

    device = cupy.cuda.Device()
    if int(device.compute_capability) < 90:  # a string such as "90"
        raise RuntimeError(f"thread-block clusters need compute capability 9.0, device has {device.compute_capability}")
    nbytes = shared_bytes(variant, size)
    limit = cupy.cuda.runtime.deviceGetAttribute(_ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device.id)
    if nbytes > limit:
        raise ValueError(
            f"size: {variant!r} needs {nbytes} bytes of shared memory per block for size={size}, "
            f"the device allows {limit}"
        )

    kernel = _module().get_function(kernel_name(variant, stage, skew))
    if nbytes > _DEFAULT_SMEM_LIMIT:
        kernel.max_dynamic_shared_size_bytes = nbytes
    grid = (x.size // size,)
    block = (int(threads),)
    args = (x, out, np.int32(size))

    def launch() -> None:
        kernel(grid, block, args, shared_mem=nbytes)

    return launch


def cluster_reduce(
    variant: str,
    stage: str,
    x: Any,
    *,
    size: int,
    threads: int = DEFAULT_THREADS,
    skew: bool = False,
    out: Any = None,
) -> Any:
    """Run one variant on `x` (allocating `out` if not given) and return `out`; does not synchronize."""
    import cupy

    if out is None:
        _check_array("x", x)
        out = cupy.empty_like(x)
    make_launch(variant, stage, x, out, size=size, threads=threads, skew=skew)()
    return out
