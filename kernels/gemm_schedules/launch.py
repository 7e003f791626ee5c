"""Build the CUTLASS GEMMs with nvcc, load them with ctypes, and launch them on CuPy arrays.

Operands are bf16 bit patterns in ``uint16`` CuPy arrays (see reference.py):
``a`` (M, K) row-major, ``bt`` (N, K) row-major (B column-major), ``out`` (M, N) row-major.
A :class:`GemmPlan` binds one problem to its buffers once (argument checks, TMA descriptors,
workspace); its ``launch()`` only enqueues the kernel on the current CuPy stream.
"""
from __future__ import annotations

import ctypes
import functools
import importlib.util
import os
from pathlib import Path
from typing import Any

from pytest_gpuperf import BuildResult, build_shared_library
from kernels.gemm_schedules.family import ARCH, CONFIGS, SOURCES, VARIANTS, GemmConfig, build_flags

ALIGNMENT_ELEMENTS = 8  # TMA: 16-byte aligned rows, so N and K are multiples of 8 bf16
_RASTER_CODES = {"heuristic": 0, "along_m": 1, "along_n": 2}
_SWIZZLES = (1, 2, 4, 8)
_INT32_MAX = 2**31 - 1


class CutlassNotFound(RuntimeError):
    """The CUTLASS C++ headers are not installed where we look."""


class GemmError(RuntimeError):
    """A call into the GEMM library failed; the message is the library's."""


def cutlass_include_dirs() -> tuple[Path, Path]:
    """``include`` and ``tools/util/include`` of CUTLASS: ``$CUTLASS_PATH`` (a CUTLASS checkout)
    if set, else the headers shipped in the ``nvidia-cutlass`` wheel (``cutlass_library/source``,
    the same place ``cutlass_library.source_path`` names)."""
    env = os.environ.get("CUTLASS_PATH")
    if env:
        root, origin = Path(env), "$CUTLASS_PATH"
    else:
        spec = importlib.util.find_spec("cutlass_library")
        if spec is None or not spec.submodule_search_locations:
            raise CutlassNotFound(
                "CUTLASS headers not found: `pip install nvidia-cutlass` (it ships them in "
                "cutlass_library/source) or set CUTLASS_PATH to a CUTLASS checkout"
            )
        root, origin = Path(list(spec.submodule_search_locations)[0]) / "source", "nvidia-cutlass"
    dirs = (root / "include", root / "tools" / "util" / "include")
    needed = (dirs[0] / "cutlass" / "gemm" / "collective" / "collective_builder.hpp",
              dirs[1] / "cutlass" / "util" / "packed_stride.hpp")
    missing = [str(p) for p in needed if not p.is_file()]
    if missing:
        raise CutlassNotFound(f"CUTLASS headers from {origin} ({root}) lack {', '.join(missing)}")
    return dirs


def build_config(config: GemmConfig, *, cache_dir: str | os.PathLike[str] | None = None) -> BuildResult:
    """Build (or fetch from the cache) the shared library of one configuration."""
    return build_shared_library(
        SOURCES,
        arch=ARCH,
        flags=build_flags(config),
        include_dirs=cutlass_include_dirs(),
        cache_dir=cache_dir,
        name=f"gemm_{config.name}",
    )


@functools.cache
def load_library(config_name: str) -> "GemmLibrary":
    """The loaded library of a configuration in family.CONFIGS (built on first use)."""
    if config_name not in CONFIGS:
        raise ValueError(f"config_name: expected one of {sorted(CONFIGS)}, got {config_name!r}")
    config = CONFIGS[config_name]
    return GemmLibrary(config, build_config(config))


def load_variant(variant: str) -> "GemmLibrary":
    """The library behind a variant name of family.VARIANTS ("pingpong", "cooperative")."""
    if variant not in VARIANTS:
        raise ValueError(f"variant: expected one of {sorted(VARIANTS)}, got {variant!r}")
    return load_library(VARIANTS[variant])


class GemmLibrary:
    """ctypes bindings of one built configuration of gemm_sm90.cu."""

    def __init__(self, config: GemmConfig, build: BuildResult) -> None:
        self.config = config
        self.build = build
        lib = ctypes.CDLL(str(build.library))
        lib.gemm_config.restype = ctypes.c_char_p
        lib.gemm_config.argtypes = []
        lib.gemm_last_error.restype = ctypes.c_char_p
        lib.gemm_last_error.argtypes = []
        lib.gemm_workspace_size.restype = ctypes.c_int
        lib.gemm_workspace_size.argtypes = [ctypes.c_int] * 5 + [ctypes.POINTER(ctypes.c_size_t)]
        lib.gemm_plan_create.restype = ctypes.c_int
        lib.gemm_plan_create.argtypes = [
            ctypes.c_int, ctypes.c_int, ctypes.c_int,
            ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
            ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
        ]  # fmt: skip
        lib.gemm_plan_run.restype = ctypes.c_int
        lib.gemm_plan_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        lib.gemm_plan_destroy.restype = None
        lib.gemm_plan_destroy.argtypes = [ctypes.c_void_p]
        self._lib = lib

    def describe(self) -> str:
        """The configuration as compiled: schedule, tile, cluster, pipeline stages, shared memory."""
        return self._lib.gemm_config().decode()

    def last_error(self) -> str:
        return self._lib.gemm_last_error().decode()

    def plan(self, a: Any, bt: Any, out: Any, *, max_swizzle: int = 1, raster: str = "heuristic") -> "GemmPlan":
        """Bind ``out = a @ bt.T`` to these buffers; see :class:`GemmPlan`."""
        return GemmPlan(self, a, bt, out, max_swizzle=max_swizzle, raster=raster)


def check_operands(a: Any, bt: Any, out: Any) -> tuple[int, int, int]:
    """Validate the operands of ``out = a @ bt.T`` and return (M, N, K); raise ValueError naming
    the bad argument."""
    for name, arr in (("a", a), ("bt", bt), ("out", out)):
        if getattr(arr, "ndim", None) != 2:
            raise ValueError(f"{name}: expected a 2-D array, got {getattr(arr, 'shape', type(arr).__name__)}")
        if str(arr.dtype) not in ("uint16", "bfloat16"):
            raise ValueError(f"{name}: expected bf16 data (dtype bfloat16, or its bits as uint16), got {arr.dtype}")
        if not arr.flags.c_contiguous:
            raise ValueError(f"{name}: expected a C-contiguous (row-major) array")
    m, k = a.shape
    n, k_b = bt.shape
    if k_b != k:
        raise ValueError(f"bt: expected shape (N, K) with K = {k} (a's columns), got {bt.shape}")
    if tuple(out.shape) != (m, n):
        raise ValueError(f"out: expected shape (M, N) = {(m, n)}, got {tuple(out.shape)}")
    if min(m, n, k) < 1:
        raise ValueError(f"a, bt: expected M, N, K >= 1, got {(m, n, k)}")
    if max(m, n, k) > _INT32_MAX:
        raise ValueError(f"a, bt: expected M, N, K < 2**31, got {(m, n, k)}")
    if k % ALIGNMENT_ELEMENTS:
        raise ValueError(f"a: expected K a multiple of {ALIGNMENT_ELEMENTS} (16-byte TMA rows), got K = {k}")
    if n % ALIGNMENT_ELEMENTS:
        raise ValueError(f"bt: expected N a multiple of {ALIGNMENT_ELEMENTS} (16-byte TMA rows), got N = {n}")
    for name, arr in (("a", a), ("bt", bt), ("out", out)):
        data = getattr(arr, "data", None)
        ptr = getattr(data, "ptr", None)
        if not isinstance(ptr, int):
            raise ValueError(f"{name}: expected a CuPy device array, got {type(arr).__module__}.{type(arr).__name__}")
        if ptr % 16:
            raise ValueError(f"{name}: expected a 16-byte aligned device pointer, got {ptr:#x}")
    return m, n, k


class GemmPlan:
    """``out = a @ bt.T`` bound to its buffers; ``launch()`` only enqueues (no allocation, no sync).

    The plan keeps the arrays and its workspace alive; the kernel parameters embed their addresses.
    """

    def __init__(self, library: GemmLibrary, a: Any, bt: Any, out: Any, *, max_swizzle: int = 1,
                 raster: str = "heuristic") -> None:
        import cupy

        if max_swizzle not in _SWIZZLES:
            raise ValueError(f"max_swizzle: expected one of {_SWIZZLES}, got {max_swizzle!r}")
        if raster not in _RASTER_CODES:
            raise ValueError(f"raster: expected one of {sorted(_RASTER_CODES)}, got {raster!r}")
        m, n, k = check_operands(a, bt, out)
        self.shape = (m, n, k)
        self.library = library
        self._lib = library._lib
        self._arrays = (a, bt, out)
        raster_code = _RASTER_CODES[raster]
        size = ctypes.c_size_t(0)
        if self._lib.gemm_workspace_size(m, n, k, max_swizzle, raster_code, ctypes.byref(size)):
            raise GemmError(f"{library.config.name}: {library.last_error()}")
        self._workspace = cupy.empty(max(int(size.value), 1), dtype=cupy.uint8)
        handle = ctypes.c_void_p(None)
        # initialize() could enqueue workspace setup on this stream; for the data-parallel
        # persistent scheduler used here the workspace is 0 bytes and it enqueues nothing.
        # The kernel itself goes to whatever stream is current at each launch().
        stream = cupy.cuda.get_current_stream().ptr
        status = self._lib.gemm_plan_create(
            m, n, k, a.data.ptr, bt.data.ptr, out.data.ptr, self._workspace.data.ptr,
            int(size.value), max_swizzle, raster_code, stream, ctypes.byref(handle),
        )  # fmt: skip
        if status:
            raise GemmError(f"{library.config.name} {self.shape}: {library.last_error()}")
        self._handle = handle
        self._stream_of = cupy.cuda.get_current_stream

    def launch(self) -> None:
        """Enqueue the GEMM on the current CuPy stream."""
        if not self._handle:
            raise GemmError("launch on a closed plan")
        if self._lib.gemm_plan_run(self._handle, self._stream_of().ptr):
            raise GemmError(f"{self.library.config.name} {self.shape}: {self.library.last_error()}")

    def close(self) -> None:
        """Free the plan's host state (the kernel parameters were copied at each launch)."""
        handle, self._handle = getattr(self, "_handle", None), ctypes.c_void_p(None)
        if handle:
            self._lib.gemm_plan_destroy(handle)

    def __del__(self) -> None:
        self.close()


def gemm(a: Any, bt: Any, out: Any = None, *, variant: str = "pingpong") -> Any:
    """``a @ bt.T`` as bf16 bits (uint16), computed by the variant's CUTLASS kernel."""
    import cupy

    if out is None:
        out = cupy.empty((a.shape[0], bt.shape[0]), dtype=cupy.uint16)
    plan = load_variant(variant).plan(a, bt, out)
    plan.launch()
    return out


# cuBLAS enum values (cublas_api.h, library_types.h); stable across CUDA 11-13.
_CUBLAS_OP_N, _CUBLAS_OP_T = 0, 1
_CUDA_R_16BF = 14
_CUBLAS_COMPUTE_32F = 68
_CUBLAS_GEMM_DEFAULT = -1


class CublasGemm:
    """The baseline: the same bf16 product through cuBLAS (``cublasGemmEx``, fp32 compute).

    cuBLAS is column-major: the row-major (M, N) ``out`` is a column-major N x M matrix, and
    out^T = bt @ a^T, where ``bt`` read column-major is K x N (so transposed: "T") and ``a`` read
    column-major is K x M (not transposed: "N"). Like the CUTLASS kernels, a "TN" product.
    """

    def __init__(self, a: Any, bt: Any, out: Any) -> None:
        import cupy
        import numpy as np
        from cupy.cuda import cublas, device

        m, n, k = check_operands(a, bt, out)
        self.shape = (m, n, k)
        self._arrays = (a, bt, out)
        self._scalars = np.array([1.0, 0.0], dtype=np.float32)  # alpha, beta (host pointer mode)
        self._gemm_ex = cublas.gemmEx
        self._set_stream = cublas.setStream
        self._current_stream = cupy.cuda.get_current_stream
        # CuPy's handle of this thread and device. A cuBLAS handle carries a stream, and whichever
        # stream it was last set to is where its calls run, so launch() sets it on every call.
        self._handle = device.get_cublas_handle()
        alpha = self._scalars.ctypes.data
        self._args = (
            self._handle, _CUBLAS_OP_T, _CUBLAS_OP_N, n, m, k,
            alpha, bt.data.ptr, _CUDA_R_16BF, k,
            a.data.ptr, _CUDA_R_16BF, k,
            alpha + 4, out.data.ptr, _CUDA_R_16BF, n,
            _CUBLAS_COMPUTE_32F, _CUBLAS_GEMM_DEFAULT,
        )  # fmt: skip

    def launch(self) -> None:
        """Enqueue cublasGemmEx on the stream current at this call (``cupy.cuda.get_current_stream()``).

        The handle is bound to that stream here, on every call, rather than trusting the binding
        it was created or last used with. (CuPy 14.2's ``gemmEx`` also rebinds it to the current
        stream internally; this does not depend on that.) While that stream is capturing a CUDA
        graph, CuPy's ``setStream`` raises NotImplementedError, so the timing engine falls back to
        events around eager launches.
        """
        self._set_stream(self._handle, self._current_stream().ptr)
        self._gemm_ex(*self._args)
