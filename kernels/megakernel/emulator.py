"""Run megakernel.cu on the CPU through the fiber emulator in emulate/ (needs a C++17 compiler).

Every GPU thread becomes a fiber; fibers switch at barriers and shuffles in a seeded random
order. This checks the kernel's indexing, work split, barriers-as-written and numerics against the
reference on machines without a GPU; it says nothing about the memory model or speed.

The emulator library is built into pytest-gpuperf's build cache, in a folder private to the user
(``$MK_EMULATOR_CACHE``, else ``<cache root>/megakernel-emulator``; never the shared temporary
folder, where anyone could plant a library for this process to load). It is keyed on the
compiler's path and version, the flags, the relevant environment and every file the compiler's
``-MD`` output names, and verified against its recorded sha256 before it is loaded.
"""
from __future__ import annotations

import ctypes
import functools
from pathlib import Path

from kernels.megakernel.config import ModelConfig
from kernels.megakernel.family import VARIANTS
from kernels.megakernel.layout import PARAMS_DTYPE, DecodeBuffers
from pytest_gpuperf import build_host_library, cache_folder, find_host_compiler

HERE = Path(__file__).resolve().parent
CACHE_ENV = "MK_EMULATOR_CACHE"
BUILD_TIMEOUT_S = 600.0  # about 7 s on one core
LIBRARY = "mk_emulate.so"


def compiler() -> str | None:
    """The C++ compiler the emulator builds with ($CXX, else g++ or clang++), or None."""
    return find_host_compiler()


def cache_dir() -> Path:
    """Where emulator libraries are kept: ``$MK_EMULATOR_CACHE``, else
    ``<pytest-gpuperf cache root>/megakernel-emulator``; created with mode 0700 and refused
    (UnsafePathError) when another user owns it or can write it."""
    return cache_folder("megakernel-emulator", env=CACHE_ENV)


def build_library(config: ModelConfig, own_grid_barrier: bool = False, defines: tuple[str, ...] = ()) -> Path:
    """The emulator library for ``config``, the barrier choice and the tuning macros ``defines``
    (e.g. ``("MK_ACC_COPIES=2",)``): from the cache, or built into it."""
    flags = ["-std=c++17", "-O2", "-fPIC", "-shared", "-DMK_EMULATE", *config.compile_defines(), f"-I{HERE}"]
    if own_grid_barrier:
        flags.append("-DMK_OWN_GRID_BARRIER")
    flags += [f"-D{d}" for d in defines]
    main = HERE / "emulate" / "run_decode.cpp"
    return build_host_library(main, flags=flags, library=LIBRARY, cache_dir=cache_dir(), cache_env=CACHE_ENV,
                              search_folders=(HERE,), timeout_s=BUILD_TIMEOUT_S,
                              what=f"the megakernel emulator from {main}")


@functools.cache
def load_library(config: ModelConfig, own_grid_barrier: bool = False, defines: tuple[str, ...] = ()) -> ctypes.CDLL:
    """Build (see :func:`build_library`; once per process for each argument set) and load the
    emulator library."""
    library = build_library(config, own_grid_barrier, defines)
    lib = ctypes.CDLL(str(library))
    lib.mk_emulate_decode.restype = ctypes.c_int
    lib.mk_emulate_decode.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                      ctypes.c_uint, ctypes.c_char_p, ctypes.c_int]
    lib.mk_emulate_params_bytes.restype = ctypes.c_int
    lib.mk_emulate_shared_bytes.restype = ctypes.c_int
    lib.mk_emulate_shared_bytes_ring.restype = ctypes.c_int
    if lib.mk_emulate_params_bytes() != PARAMS_DTYPE.itemsize:
        raise RuntimeError(f"MegakernelParams is {lib.mk_emulate_params_bytes()} bytes in C++ but "
                           f"{PARAMS_DTYPE.itemsize} in layout.PARAMS_DTYPE")
    return lib


def emulate_decode(buffers: DecodeBuffers, variant: str, token: int, position: int, blocks: int, seed: int = 0,
                   own_grid_barrier: bool = False, defines: tuple[str, ...] = ()) -> None:
    """One decode step of ``variant`` on ``blocks`` emulated blocks of 512 threads, in place on the
    NumPy arrays of ``buffers`` (logits, KV cache at ``position``, scratch)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    if not 0 <= token < buffers.config.vocab:
        raise ValueError(f"token must be in [0, {buffers.config.vocab}), got {token}")
    if not 0 <= position < buffers.max_seq:
        raise ValueError(f"position must be in [0, {buffers.max_seq}), got {position}")
    if blocks < buffers.config.kv_heads or blocks > buffers["sumsq_partial"].size:
        raise ValueError(f"blocks must be in [{buffers.config.kv_heads}, {buffers['sumsq_partial'].size}], got {blocks}")
    lib = load_library(buffers.config, own_grid_barrier, tuple(defines))
    params = buffers.params()
    error = ctypes.create_string_buffer(512)
    status = lib.mk_emulate_decode(VARIANTS.index(variant), params.ctypes.data, token, position, blocks, seed,
                                   error, len(error))
    if status != 0:
        raise RuntimeError(f"emulated {variant} step failed: {error.value.decode()}")


def shared_bytes_of(config: ModelConfig, ring: bool = False) -> int:
    """kSharedBytes (or kSharedBytesRing) as the C++ source computes it (checks layout.shared_bytes)."""
    lib = load_library(config)
    return int(lib.mk_emulate_shared_bytes_ring() if ring else lib.mk_emulate_shared_bytes())


__all__ = ["build_library", "cache_dir", "compiler", "emulate_decode", "load_library", "shared_bytes_of"]
