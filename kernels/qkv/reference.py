"""Float64 reference, seeded inputs and the roofline counts for the QKV projection.

h_qkv[i_ws, i_qkv] = sum_m w_qkv[i_qkv, m] * h_in[i_ws, m]   (h_qkv = h_in @ w_qkv.T)

A call must read w_qkv (d_qkv x d_model) and h_in (d_ws x d_model) once and write h_qkv
(d_ws x d_qkv) once, all fp32, and do one multiply-add per (i_ws, i_qkv, m).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FLOAT_BYTES = 4


@dataclass(frozen=True)
class QkvShape:
    """One projection problem: d_model inputs per word, d_qkv outputs per word, d_ws words."""

    d_model: int
    d_qkv: int
    d_ws: int

    @property
    def flops(self) -> int:
        """Floating-point operations per call, a multiply-add counted as two."""
        return 2 * self.d_ws * self.d_qkv * self.d_model

    @property
    def min_bytes(self) -> int:
        """Fewest device-memory bytes per call: each input read once, the output written once."""
        return FLOAT_BYTES * (self.d_ws * self.d_model + self.d_qkv * self.d_model + self.d_ws * self.d_qkv)

    def __str__(self) -> str:
        return f"d_model={self.d_model},d_qkv={self.d_qkv},d_ws={self.d_ws}"


def make_inputs(shape: QkvShape, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded float32 ``(w_qkv, h_in)``: normal values, weights scaled by 1/sqrt(d_model).

    The scaling keeps outputs of order one for every d_model, so the relative error of
    the comparison does not depend on the problem size through the magnitudes.
    """
    rng = np.random.default_rng(seed)
    scale = np.float32(1.0 / np.sqrt(shape.d_model))
    w_qkv = rng.standard_normal((shape.d_qkv, shape.d_model), dtype=np.float32) * scale
    h_in = rng.standard_normal((shape.d_ws, shape.d_model), dtype=np.float32)
    return w_qkv, h_in


def reference(w_qkv: np.ndarray, h_in: np.ndarray) -> np.ndarray:
    """``h_in @ w_qkv.T`` in float64, shape (d_ws, d_qkv)."""
    return np.asarray(h_in, dtype=np.float64) @ np.asarray(w_qkv, dtype=np.float64).T
