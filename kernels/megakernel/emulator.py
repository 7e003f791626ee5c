"""Run megakernel.cu on the CPU through the fiber emulator in emulate/ (needs a C++17 compiler).

Every GPU thread becomes a fiber; fibers switch at barriers and shuffles in a seeded random
order. This checks the kernel's indexing, work split, barriers-as-written and numerics against the
reference on machines without a GPU; it says nothing about the memory model or speed.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path


from kernels.megakernel.config import ModelConfig
from kernels.megakernel.family import VARIANTS
from kernels.megakernel.layout import PARAMS_DTYPE, DecodeBuffers

HERE = Path(__file__).resolve().parent
SOURCES = (HERE / "megakernel.cu", HERE / "mk_device.cuh", HERE / "emulate" / "cuda_emulation.h",
           HERE / "emulate" / "run_decode.cpp")


def compiler() -> str | None:
    """The C++ compiler the emulator builds with ($CXX, else g++ or clang++), or None."""
    for candidate in (os.environ.get("CXX"), "g++", "clang++"):
        if candidate and shutil.which(candidate):
            return candidate
    return None


@functools.cache
def load_library(config: ModelConfig, own_grid_barrier: bool = False, defines: tuple[str, ...] = ()) -> ctypes.CDLL:
    """Build (once per source text, shape, barrier choice and tuning macros ``defines``, e.g.
    ``("MK_ACC_COPIES=2",)``; cached on disk) and load the emulator library."""
    cxx = compiler()
    if cxx is None:
        raise RuntimeError("no C++ compiler found (set CXX)")
    flags = ["-std=c++17", "-O2", "-fPIC", "-shared", "-DMK_EMULATE", *config.compile_defines(), f"-I{HERE}"]
    if own_grid_barrier:
        flags.append("-DMK_OWN_GRID_BARRIER")
    flags += [f"-D{d}" for d in defines]
    digest = hashlib.sha256(("\0".join(flags) + cxx).encode())
    for source in SOURCES:
        digest.update(source.read_bytes())
    cache = Path(os.environ.get("MK_EMULATOR_CACHE", Path(tempfile.gettempdir()) / "megakernel-emulator"))
    cache.mkdir(parents=True, exist_ok=True)
    library = cache / f"mk_emulate_{digest.hexdigest()[:16]}.so"
    if not library.exists():
        partial = library.with_suffix(f".{os.getpid()}.tmp")
        result = subprocess.run([cxx, *flags, "-o", str(partial), str(HERE / "emulate" / "run_decode.cpp")],
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"building the emulator failed:\n{result.stderr}")
        partial.replace(library)  # atomic: a concurrent build of the same text wins harmlessly
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


__all__ = ["compiler", "emulate_decode", "load_library", "shared_bytes_of"]
