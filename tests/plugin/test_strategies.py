"""The hypothesis strategies kernels' value tests draw their inputs from."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis.errors import NoSuchExample

from pytest_gpuperf import strategies as gst


@settings(max_examples=200, deadline=None)
@given(x=gst.arrays(np.float32, gst.sizes(1, 64)))
def test_arrays_hold_no_subnormal_values_unless_asked(x: np.ndarray) -> None:
    tiny = np.finfo(np.float32).tiny
    assert np.all(np.isfinite(x)) and np.all(np.abs(x) <= 8.0)
    assert not np.any((x != 0) & (np.abs(x) < tiny)), "a subnormal input a GPU may flush to zero"


def _a_subnormal(subnormal: bool, examples: int) -> float:
    tiny = np.finfo(np.float32).tiny
    # derandomize: the search is the same on every run, so the verdict cannot depend on the seed
    return find(
        gst.finite_floats(np.float32, subnormal=subnormal),
        lambda v: v != 0 and abs(v) < tiny,
        settings=settings(max_examples=examples, database=None, derandomize=True),
    )


def test_subnormal_values_are_drawn_when_asked() -> None:
    v = _a_subnormal(subnormal=True, examples=2000)
    assert 0 < abs(v) < np.finfo(np.float32).tiny


def test_subnormal_values_are_never_drawn_unless_asked() -> None:
    with pytest.raises(NoSuchExample):
        _a_subnormal(subnormal=False, examples=300)
