"""assert_close: the verdicts of the comparison against a reference, on host arrays."""
from __future__ import annotations

import numpy as np
import pytest

from pytest_gpuperf.numerics import assert_close, poison

EXACT = {"max_rel_l2": 0.0, "atol": 0.0, "rtol": 0.0}


def reference() -> np.ndarray:
    return np.random.default_rng(0).standard_normal(1000).astype(np.float16)


def test_bit_for_bit_equal_passes_with_zero_error() -> None:
    e = reference()
    assert assert_close(e.copy(), e, **EXACT) == 0.0


def test_an_unwritten_element_fails_an_exact_check() -> None:
    e = reference()
    a = e.copy()
    poison(a[7:8])
    with pytest.raises(AssertionError, match="1 of 1000 elements are NaN"):
        assert_close(a, e, **EXACT)


def test_one_ulp_off_fails_an_exact_check() -> None:
    e = reference()
    a = e.copy()
    a[3] = np.nextafter(a[3], np.float16(np.inf))
    with pytest.raises(AssertionError, match="relative L2 error"):
        assert_close(a, e, **EXACT)


def test_values_equal_but_not_bit_for_bit_still_pass() -> None:
    e = np.array([0.0, 1.0, np.nan], np.float32)
    a = np.array([-0.0, 1.0, np.nan], np.float32)
    assert assert_close(a, e, **EXACT) == 0.0
    assert assert_close(a.astype(np.float64), e, **EXACT) == 0.0  # another dtype, the same values


def test_a_shape_mismatch_fails_even_with_equal_bytes() -> None:
    e = reference()
    with pytest.raises(AssertionError, match="shape"):
        assert_close(e.reshape(10, 100), e, **EXACT)


def test_a_nonsensical_tolerance_is_still_refused_for_an_exact_copy() -> None:
    e = reference()
    with pytest.raises(AssertionError, match="exceeds the tolerance"):
        assert_close(e.copy(), e, max_rel_l2=-1.0)


def test_a_strided_view_equal_bit_for_bit_passes() -> None:
    e = np.arange(24, dtype=np.float32).reshape(4, 6)
    assert assert_close(np.asfortranarray(e)[:, ::2], e[:, ::2], **EXACT) == 0.0
