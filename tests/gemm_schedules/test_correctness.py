"""Every schedule against a float64 reference (hypothesis shapes) and against cuBLAS (large, irregular)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kernels.gemm_schedules.family import VARIANTS
from kernels.gemm_schedules.launch import check_operands
from kernels.gemm_schedules.reference import bf16_bits_to_float32, make_inputs, reference_gemm, tolerances
from pytest_gpuperf.numerics import assert_close, poison

# N and K are multiples of 8 (16-byte TMA rows); M is free. The ranges straddle the tiles
# (128 and 256 rows, 128 and 256 columns, 64-deep k-blocks) so partial tiles are common.
m_sizes = st.integers(min_value=1, max_value=700)
n_sizes = st.integers(min_value=1, max_value=90).map(lambda x: 8 * x)
k_sizes = st.integers(min_value=1, max_value=160).map(lambda x: 8 * x)


def run_plan(library: Any, a: Any, bt: Any, out: Any) -> np.ndarray:
    import cupy

    plan = library.plan(a, bt, out)
    poison(out)
    plan.launch()
    cupy.cuda.get_current_stream().synchronize()
    return bf16_bits_to_float32(out.get())


@pytest.mark.sm90(exact=True)  # sm_90a code (wgmma, setmaxnreg) runs on compute capability 9.0 only
@pytest.mark.parametrize("variant", list(VARIANTS))
@settings(max_examples=30, deadline=None)
@given(m=m_sizes, n=n_sizes, k=k_sizes, seed=st.integers(0, 2**31 - 1))
@example(m=1, n=8, k=8, seed=1)
@example(m=257, n=136, k=72, seed=2)  # one row past two Cooperative tiles, a partial k-block
def test_matches_float64_reference(
    gpu: Any, load_gemm: Callable[[str], Any], variant: str, m: int, n: int, k: int, seed: int
) -> None:
    import cupy

    library = load_gemm(variant)
    a_host, bt_host = make_inputs(m, n, k, seed)
    a, bt = cupy.asarray(a_host), cupy.asarray(bt_host)
    out = cupy.empty((m, n), dtype=cupy.uint16)
    expected = reference_gemm(a_host, bt_host)
    assert_close(run_plan(library, a, bt, out), expected, name=f"{variant} {m}x{n}x{k}", **tolerances(k))


@pytest.mark.sm90(exact=True)
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_matches_cublas_on_a_large_irregular_shape(gpu: Any, load_gemm: Callable[[str], Any], variant: str) -> None:
    """3001 x 5000 x 4104: every tile edge partial; reference = cupy.matmul (cuBLAS, fp32) on the
    exact float32 values of the bf16 inputs, so only the final bf16 rounding differs."""
    import cupy

    m, n, k = 3001, 5000, 4104
    library = load_gemm(variant)
    a, bt = make_inputs(m, n, k, seed=4, xp=cupy)
    out = cupy.empty((m, n), dtype=cupy.uint16)
    expected = cupy.matmul(bf16_bits_to_float32(a, cupy), bf16_bits_to_float32(bt, cupy).T).get()
    actual = run_plan(library, a, bt, out)
    assert_close(actual, expected, name=f"{variant} vs cuBLAS", **tolerances(k))
    # The plan is reusable: a second launch into the re-poisoned output gives the same bits.
    again = run_plan(library, a, bt, out)
    np.testing.assert_array_equal(again, actual)


@pytest.mark.sm90(exact=True)
def test_cublas_baseline_matches_reference(gpu: Any) -> None:
    """The perf baseline computes the same function (same layouts) as the CUTLASS kernels."""
    import cupy

    from kernels.gemm_schedules.launch import CublasGemm

    m, n, k = 300, 264, 520
    a_host, bt_host = make_inputs(m, n, k, seed=5)
    a, bt = cupy.asarray(a_host), cupy.asarray(bt_host)
    out = cupy.empty((m, n), dtype=cupy.uint16)
    poison(out)
    CublasGemm(a, bt, out).launch()
    cupy.cuda.get_current_stream().synchronize()
    assert_close(bf16_bits_to_float32(out.get()), reference_gemm(a_host, bt_host), name="cuBLAS", **tolerances(k))


# ---------------------------------------------------------------------------------------------
# Argument checks: run on CPU with NumPy arrays (they fail before the device-pointer check).


def _arrays(m: int, n: int, k: int, dtype: Any = np.uint16) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.ones((m, k), dtype), np.ones((n, k), dtype), np.ones((m, n), dtype)


@pytest.mark.parametrize(
    ("arrays", "match"),
    [
        (_arrays(4, 8, 12), "a: expected K a multiple of 8"),
        (_arrays(4, 12, 8), "bt: expected N a multiple of 8"),
        (_arrays(4, 8, 8, np.float16), "a: expected bf16"),
        ((np.ones((4, 8), np.uint16), np.ones((8, 16), np.uint16), np.ones((4, 8), np.uint16)), "bt: expected shape"),
        ((np.ones((4, 8), np.uint16), np.ones((8, 8), np.uint16), np.ones((8, 4), np.uint16)), "out: expected shape"),
        ((np.ones((4, 8), np.uint16)[:, ::2], np.ones((8, 4), np.uint16), np.ones((4, 8), np.uint16)), "a: expected a C-contiguous"),
        ((np.ones(8, np.uint16), np.ones((8, 8), np.uint16), np.ones((8, 8), np.uint16)), "a: expected a 2-D"),
        (_arrays(4, 8, 8), "a: expected a CuPy device array"),
    ],
)
def test_bad_arguments_are_named(arrays: tuple[np.ndarray, np.ndarray, np.ndarray], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        check_operands(*arrays)
