"""How close a QKV result must be to the float64 reference, and the checks that say so."""
from __future__ import annotations

from typing import Any

import numpy as np

from pytest_gpuperf.numerics import to_numpy

# Each output is a sum of d_model fp32 products accumulated in fp32 (FMA) against a float64
# reference on the same fp32 inputs, so only accumulation rounding differs. Two checks:
# - the L2 norm of the error over the L2 norm of |h_in| @ |w_qkv|.T (the outputs' size were
#   every product of one sign) <= 1e-5. Rounding errors scale with that sum, not with the
#   output: an output that cancels to near zero (hypothesis found d_model=171 with a single
#   output, whose relative error was 1.4e-5 on an H100) keeps the rounding of
#   its large partial sums. Simulated fp32 sequential sums gave at most 1.4e-7 of it over 300
#   random single-output problems (d_model 1-600; 1.5e-5 of that output at d_model=171), while a
#   wrong index or a missing term of typical size (2e-3 to 4e-2 of it) fails it; a term that is
#   itself near zero can go unseen, by this check and the next alike (tests/qkv/test_checks.py
#   checks three shapes);
# - every element within the worst-case bound of any summation order,
#   |err| <= gamma_n * sum_m |w| |h| with gamma_n = n u / (1 - n u), n = d_model + 1 (the
#   +1 covers the final rounding), u = 2^-24, plus d_model * FLT_MIN for flushed denormals
#   (CuPy compiles with -ftz=true).
MAX_REL_L2 = 1e-5


def assert_fp32_accumulation(actual: Any, exact: np.ndarray, w_qkv: np.ndarray, h_in: np.ndarray, name: str) -> None:
    """``actual`` is ``exact`` up to fp32 accumulation rounding: both checks above, in that order."""
    got = to_numpy(actual).astype(np.float64)
    products = np.abs(h_in.astype(np.float64)) @ np.abs(w_qkv.astype(np.float64)).T  # the costly part: once
    _assert_small_against_the_products(got, exact, products, name)
    _assert_within_rounding_bound(got, exact, products, w_qkv.shape[1], name)


def _assert_small_against_the_products(got: np.ndarray, exact: np.ndarray, products: np.ndarray, name: str) -> None:
    """The error's L2 norm is at most MAX_REL_L2 of the L2 norm of |h_in| @ |w_qkv|.T."""
    scale = np.linalg.norm(products)
    err = np.linalg.norm(got - exact) / scale if scale else np.linalg.norm(got - exact)
    if not err <= MAX_REL_L2:
        raise AssertionError(
            f"{name}: L2 error {err:.3e} of the products' size exceeds {MAX_REL_L2:.0e} "
            f"(relative to the outputs: {np.linalg.norm(got - exact) / max(np.linalg.norm(exact), 1e-300):.3e})"
        )


def _assert_within_rounding_bound(got: np.ndarray, exact: np.ndarray, products: np.ndarray, d_model: int, name: str) -> None:
    """Every element within the worst-case fp32 accumulation error of its exact value."""
    n = d_model + 1
    u = 2.0**-24
    gamma = n * u / (1.0 - n * u)
    bound = gamma * products + n * float(np.finfo(np.float32).tiny)
    excess = np.abs(got - exact) - bound
    if not (excess <= 0).all():  # also catches NaN
        worst = np.unravel_index(int(np.nanargmax(np.where(np.isnan(excess), np.inf, excess))), exact.shape)
        raise AssertionError(
            f"{name}: {int((~(excess <= 0)).sum())} of {exact.size} elements outside the fp32 rounding bound; "
            f"worst at {list(worst)}: got {got[worst]!r}, exact {exact[worst]!r}, bound {bound[worst]:.3g}"
        )
