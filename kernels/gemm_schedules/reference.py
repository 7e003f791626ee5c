"""Seeded bf16 inputs (never zeros) and the float64 reference for D = A @ B.

bf16 values travel as their raw 16-bit patterns in ``uint16`` arrays: CuPy has no bfloat16 dtype
to rely on, and the kernels and cuBLAS only need the bytes. Every helper takes the array module
(``numpy`` or ``cupy``) so large inputs can be made on the device.
"""
from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np


def float32_to_bf16_bits(x: Any, xp: ModuleType = np) -> Any:
    """Round float32 ``x`` to bf16 (nearest, ties to even) and return the bit patterns (uint16).

    Inputs must be finite (NaN payloads are not preserved).
    """
    bits = xp.ascontiguousarray(x, dtype=xp.float32).view(xp.uint32)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    return ((bits + rounding) >> 16).astype(xp.uint16)


def bf16_bits_to_float32(bits: Any, xp: ModuleType = np) -> Any:
    """The float32 values of bf16 bit patterns (exact: bf16 is float32's upper half)."""
    return (xp.ascontiguousarray(bits, dtype=xp.uint16).astype(xp.uint32) << 16).view(xp.float32)


def make_inputs(m: int, n: int, k: int, seed: int, xp: ModuleType = np) -> tuple[Any, Any]:
    """A (M, K) and B stored as (N, K), bf16 bits drawn from N(0, 1); seeded, never all zeros."""
    rng = xp.random.default_rng(seed)
    a = rng.standard_normal((m, k), dtype=xp.float32)
    bt = rng.standard_normal((n, k), dtype=xp.float32)
    return float32_to_bf16_bits(a, xp), float32_to_bf16_bits(bt, xp)


def reference_gemm(a_bits: np.ndarray, bt_bits: np.ndarray) -> np.ndarray:
    """D = A @ B in float64 from host bf16 bits: A (M, K), B given as (N, K); returns (M, N)."""
    a = bf16_bits_to_float32(np.asarray(a_bits)).astype(np.float64)
    bt = bf16_bits_to_float32(np.asarray(bt_bits)).astype(np.float64)
    return a @ bt.T


def tolerances(k: int) -> dict[str, float]:
    """Tolerances for a bf16-output GEMM against an exact reference on the same bf16 inputs.

    Both sides see identical bf16 inputs, so the error is the fp32 accumulation (relative
    ~sqrt(K) * 2**-24, far below 1e-4 for K <= 32768) plus the final rounding to bf16: at most
    half an ulp, 2**-8 = 3.9e-3 of |d| (about 1.7e-3 RMS, checked on CPU with a simulated
    kernel). The relative L2 error therefore cannot exceed ~3.9e-3: bound 5e-3. Elementwise,
    rtol 8e-3 (twice the half-ulp bound) plus an atol for entries near zero from cancellation,
    where accumulation error dominates: entries are ~sqrt(K) in size (N(0, 1) inputs), and
    1e-3 * sqrt(K) sits well above the accumulation error.
    """
    return {"max_rel_l2": 5e-3, "rtol": 8e-3, "atol": 1e-3 * float(np.sqrt(k))}
