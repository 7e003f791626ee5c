"""Float64 reference and seeded inputs for cluster_reduce.

Layout: a flat fp16 vector of ``clusters * 2 * size`` elements; block ``b`` of the grid owns
``x[b*size:(b+1)*size]`` and blocks ``2c`` and ``2c+1`` form cluster ``c``. Every block's
output slice is ``stage(round_fp16(a + b))`` where ``a`` and ``b`` are the two slices of its
cluster, so both blocks of a cluster produce the same values.

Two fp16 values add exactly in float64, and NumPy's float64 -> float16 cast rounds to nearest
even, so the reference equals a correctly rounded fp16 add (PTX ``add.rn.f16``) bit for bit.
"""
from __future__ import annotations

import numpy as np

from kernels.cluster_reduce.family import CLUSTER_SIZE

_FP16_MAX = 65504.0


def make_input(clusters: int, size: int, *, seed: int, scale: float = 1.0) -> np.ndarray:
    """Seeded fp16 input for ``clusters`` clusters of ``size`` elements per block, no zeros.

    Values are normal(0, scale) clipped to the finite fp16 range; sums of two may still
    overflow to infinity at large scales, which the reference reproduces.
    """
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(clusters * CLUSTER_SIZE * size) * scale
    np.clip(values, -_FP16_MAX, _FP16_MAX, out=values)
    x = values.astype(np.float16)
    # Tiny scales underflow to zero; zeros would hide unwritten outputs, so nudge them.
    zeros = x == 0
    x[zeros] = np.where(rng.random(int(zeros.sum())) < 0.5, np.float16(2.0**-24), np.float16(-(2.0**-24)))
    return x


def _pairs(x: np.ndarray, size: int) -> np.ndarray:
    return np.asarray(x).reshape(-1, CLUSTER_SIZE, size)


def _stage(values: np.ndarray, stage: str) -> np.ndarray:
    if stage == "ffn":
        # __hgt(x, 0) ? x : 0 -- NaN and -0 become +0
        return np.where(values > 0, values, np.float16(0.0)).astype(np.float16)
    return values


def _add_fp16(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return (a.astype(np.float64) + b.astype(np.float64)).astype(np.float16)


def reference(x: np.ndarray, size: int, stage: str) -> np.ndarray:
    """Expected output (fp16, same shape as ``x``) for the correct variants."""
    pairs = _pairs(x, size)
    summed = _stage(_add_fp16(pairs[:, 0], pairs[:, 1]), stage)
    return np.repeat(summed[:, None, :], CLUSTER_SIZE, axis=1).reshape(np.shape(x))


def racy_reference(x: np.ndarray, size: int, stage: str) -> np.ndarray:
    """Output of the note's in-place DSMEM kernel when rank 1 reads after rank 0 wrote.

    Rank 0 overwrote its slots with ``stage(a + b)`` before rank 1 read them, so rank 1
    computes ``stage(b + stage(a + b))``; rank 0 is still right.
    """
    pairs = _pairs(x, size)
    rank0 = _stage(_add_fp16(pairs[:, 0], pairs[:, 1]), stage)
    rank1 = _stage(_add_fp16(pairs[:, 1], rank0), stage)
    return np.stack([rank0, rank1], axis=1).reshape(np.shape(x))
