"""The hypothesis strategies kernels' value tests draw their inputs from."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings

from pytest_gpuperf import strategies as gst


@settings(max_examples=200, deadline=None)
@given(x=gst.arrays(np.float32, gst.sizes(1, 64)))
def test_arrays_hold_no_subnormal_values_unless_asked(x: np.ndarray) -> None:
    tiny = np.finfo(np.float32).tiny
    assert np.all(np.isfinite(x)) and np.all(np.abs(x) <= 8.0)
    assert not np.any((x != 0) & (np.abs(x) < tiny)), "a subnormal input a GPU may flush to zero"


def test_subnormal_values_are_drawn_when_asked() -> None:
    tiny = np.finfo(np.float32).tiny
    seen: list[bool] = []

    @settings(max_examples=300, deadline=None, database=None)
    @given(v=gst.finite_floats(np.float32, subnormal=True))
    def draw(v: float) -> None:
        seen.append(v != 0 and abs(v) < tiny)

    draw()
    assert any(seen)
