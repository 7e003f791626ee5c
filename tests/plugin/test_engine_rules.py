"""Decision rules inside the CuPy timing backend that can be checked without a GPU."""
from __future__ import annotations

import pytest

from pytest_gpuperf._timing.cupy_backend import _batch_for, escaped_work


@pytest.mark.parametrize(
    ("stream_ms", "device_ms", "escaped"),
    [
        (5.0, 5.05, False),  # everything on the timing stream: the device drains with it
        (0.05, 0.12, False),  # a few tiny launches: synchronize overhead only
        (0.3, 16.0, True),  # cuBLAS on another stream: the GEMM suite's bug on an H200
        (2.0, 3.5, True),  # half as much work again ran elsewhere
    ],
)
def test_escaped_work_rule(stream_ms: float, device_ms: float, escaped: bool) -> None:
    assert escaped_work(stream_ms * 1e-3, device_ms * 1e-3) is escaped


@pytest.mark.parametrize(("per_launch", "target", "batch"), [(2.5e-6, 1e-3, 400), (1e-3, 1e-3, 1), (5e-3, 1e-3, 1), (0.0, 1e-3, 2048)])
def test_batch_size_targets_the_sample_length(per_launch: float, target: float, batch: int) -> None:
    assert _batch_for(per_launch, target) == batch


@pytest.mark.parametrize(
    ("per_launch", "cycle", "batch"),
    [(70e-6, 8, 16), (100e-6, 8, 16), (2.5e-6, 3, 402), (1e-3, 8, 8), (70e-6, 1, 15)],  # decode GEMMs: 15 and 10 before
)
def test_batch_is_a_whole_number_of_rotation_cycles(per_launch: float, cycle: int, batch: int) -> None:
    """Each sample weighs every rotated input copy the same (a decode GEMM's copies differ by up to 27%)."""
    assert _batch_for(per_launch, 1e-3, cycle) == batch
