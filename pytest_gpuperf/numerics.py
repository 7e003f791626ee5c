"""Correctness helpers: poison outputs, compare against a high-precision reference.

A fast wrong kernel must fail loudly, so outputs are poisoned (NaN for floats, an
all-ones bit pattern for integers) before each run and every element is checked to
have been written.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["poison", "to_numpy", "rel_l2_error", "assert_close"]


def to_numpy(array: Any) -> np.ndarray:
    """Return ``array`` as a host NumPy array (CuPy and torch arrays are copied back)."""
    if hasattr(array, "get") and type(array).__module__.startswith("cupy"):
        return np.asarray(array.get())
    if type(array).__module__.startswith("torch"):
        return np.asarray(array.detach().float().cpu().numpy())
    return np.asarray(array)


def poison(array: Any) -> None:
    """Fill ``array`` in place with a value no correct kernel writes (NaN, or all bits set)."""
    kind = np.dtype(array.dtype).kind if not type(array).__module__.startswith("torch") else None
    if kind is None:  # torch tensor
        if array.is_floating_point():
            array.fill_(float("nan"))
        else:
            array.fill_(-1)
        return
    if kind in "fc":
        array.fill(np.nan)
    elif kind in "iub":
        array.fill(-1 if kind == "i" else np.iinfo(array.dtype).max if kind == "u" else True)
    else:  # pragma: no cover - exotic dtypes
        raise TypeError(f"cannot poison an array of dtype {array.dtype}")


def rel_l2_error(actual: np.ndarray, expected: np.ndarray) -> float:
    """‖actual − expected‖₂ / ‖expected‖₂ over the finite entries of ``expected``."""
    finite = np.isfinite(expected)
    diff = actual[finite] - expected[finite]
    denom = np.linalg.norm(expected[finite])
    num = np.linalg.norm(diff)
    if denom == 0.0:
        return float(num)
    return float(num / denom)


def assert_close(
    actual: Any,
    expected: Any,
    *,
    max_rel_l2: float,
    atol: float | None = None,
    rtol: float = 0.0,
    name: str = "output",
) -> float:
    """Assert ``actual`` matches the reference ``expected``; return the relative L2 error.

    Checks, in order: shapes match; no element is NaN where the reference is not (an
    unwritten, still-poisoned element reads as NaN); infinities match exactly; the
    relative L2 error over finite entries is at most ``max_rel_l2``; and, if ``atol``
    is given, every finite element is within ``atol + rtol * |expected|``.
    """
    a_host, e_host = to_numpy(actual), to_numpy(expected)
    if max_rel_l2 >= 0 and (atol is None or atol >= 0) and rtol >= 0 and _same_bits(a_host, e_host):
        return 0.0  # bit for bit the reference: every check below passes, without float64 copies
    a = a_host.astype(np.float64)
    e = e_host.astype(np.float64)
    if a.shape != e.shape:
        raise AssertionError(f"{name}: shape {a.shape} != reference shape {e.shape}")
    bad_nan = np.isnan(a) & ~np.isnan(e)
    if bad_nan.any():
        idx = np.argwhere(bad_nan)[:5].tolist()
        raise AssertionError(
            f"{name}: {int(bad_nan.sum())} of {a.size} elements are NaN where the reference "
            f"is not (unwritten or poisoned output?), first at {idx}"
        )
    inf_ref = np.isinf(e)
    inf_mismatch = (np.isinf(a) | inf_ref) & (a != e)
    if inf_mismatch.any():
        idx = np.argwhere(inf_mismatch)[:5].tolist()
        raise AssertionError(f"{name}: {int(inf_mismatch.sum())} infinities differ from the reference, first at {idx}")
    err = rel_l2_error(a, e)
    if not err <= max_rel_l2:
        raise AssertionError(f"{name}: relative L2 error {err:.3e} exceeds the tolerance {max_rel_l2:.1e}")
    if atol is not None:
        finite = np.isfinite(e)
        excess = np.full(e.shape, -1.0)
        excess[finite] = np.abs(a[finite] - e[finite]) - (atol + rtol * np.abs(e[finite]))
        if (excess > 0).any():
            worst = np.unravel_index(int(np.argmax(excess)), e.shape)
            raise AssertionError(
                f"{name}: {int((excess > 0).sum())} elements outside atol={atol:g}, rtol={rtol:g}; "
                f"worst at {list(worst)}: got {a[worst]!r}, expected {e[worst]!r}"
            )
    return err


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Same shape, dtype and bytes (compared in place; a copy only of a non-contiguous array)."""
    if a.shape != b.shape or a.dtype != b.dtype or a.dtype.kind not in "biufc":
        return False
    flat_a, flat_b = np.ascontiguousarray(a).reshape(-1), np.ascontiguousarray(b).reshape(-1)
    return bool(np.array_equal(flat_a.view(np.uint8), flat_b.view(np.uint8)))
