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


def racy_reference(x: np.ndarray, size: int, stage: str, late_rank: int = 1) -> np.ndarray:
    """Output of the note's in-place DSMEM kernel when rank ``late_rank`` reads every slot of its
    neighbour after the neighbour overwrote it.

    With ``late_rank=1`` (the forced interleaving, ``skew=True``) rank 0 overwrote its slots with
    ``stage(a + b)`` first, so rank 1 computes ``stage(b + stage(a + b))``; rank 0 is right.
    With ``late_rank=0`` rank 0 computes ``stage(a + stage(a + b))`` (the fp16 add commutes
    bit for bit) and rank 1 is right.
    """
    if late_rank not in (0, 1):
        raise ValueError(f"late_rank: expected 0 or 1, got {late_rank!r}")
    pairs = _pairs(x, size)
    summed = _stage(_add_fp16(pairs[:, 0], pairs[:, 1]), stage)
    late = _stage(_add_fp16(pairs[:, late_rank], summed), stage)
    ranks = [summed, summed]
    ranks[late_rank] = late
    return np.stack(ranks, axis=1).reshape(np.shape(x))


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return (a64 == b64) | (np.isnan(a64) & np.isnan(b64))


def race_breakdown(out: np.ndarray, x: np.ndarray, size: int, stage: str) -> dict[str, int]:
    """Classify the wrong elements of a ``dsmem_note`` output by the race that explains them.

    Per slot ``i`` of a cluster, a thread of each rank reads its own slot, then the neighbour's,
    then overwrites its own; the store depends on both loads, so at most one of the two ranks
    can read an overwritten value. Every element must therefore be right, or equal the race's
    prediction for its rank (``racy_reference(..., late_rank=rank)``), and never both ranks of
    one slot wrong. Returns the counts of wrong elements in all, per late rank, and of those no
    race explains (``unexplained``: a slot with both ranks wrong counts both of its elements).
    """
    got = _pairs(out, size)
    right = _same(got, _pairs(reference(x, size, stage), size))
    wrong = ~right
    explained = np.zeros_like(wrong)
    counts: dict[str, int] = {"wrong": int(wrong.sum())}
    for rank in (0, 1):
        racy = _pairs(racy_reference(x, size, stage, late_rank=rank), size)
        hit = wrong[:, rank] & _same(got[:, rank], racy[:, rank])
        explained[:, rank] = hit
        counts[f"rank{rank}_late"] = int(hit.sum())
    both = wrong[:, 0] & wrong[:, 1]
    explained[:, 0] &= ~both
    explained[:, 1] &= ~both
    counts["unexplained"] = int((wrong & ~explained).sum())
    return counts
