"""A fused scale: its values against a float64 reference, its speed against two passes."""
import numpy as np
import pytest
from hypothesis import given

from pytest_gpuperf import Variant
from pytest_gpuperf import strategies as gst
from pytest_gpuperf.numerics import assert_close, poison

N = 1 << 24  # 64 MiB per float32 buffer: above L2, so both variants stream from DRAM


def scale_two_pass(x, y, tmp):
    import cupy  # imported lazily: the module must still collect on machines without CUDA

    cupy.multiply(x, 2.0, out=tmp)  # one pass writes a temporary ...
    cupy.copyto(y, tmp)  # ... a second pass copies it: twice the bytes


def scale_fused(x, y, tmp):
    import cupy

    cupy.multiply(x, 2.0, out=y)  # one pass


@given(x=gst.arrays(np.float32, gst.sizes(1, 4096)))  # sizes biased to warp and tile edges
@pytest.mark.parametrize("scale", [scale_two_pass, scale_fused])
def test_values(gpuperf_device, scale, x):  # needs a GPU (skipped without one), not --gpu-perf
    import cupy

    x_gpu = cupy.asarray(x)
    y, tmp = cupy.empty_like(x_gpu), cupy.empty_like(x_gpu)
    poison(y)  # NaN: an element the kernel never wrote fails loudly
    scale(x_gpu, y, tmp)
    assert_close(y, 2.0 * x.astype(np.float64), max_rel_l2=1e-7)


@pytest.fixture(scope="module")
def buffers():
    import cupy

    x = cupy.random.default_rng(0).standard_normal(N, dtype=cupy.float32)  # never zeros
    return x, cupy.empty_like(x), cupy.empty_like(x)


def test_speed(gpu_perf, buffers):  # a perf test: skipped unless --gpu-perf
    x, y, tmp = buffers
    base = Variant("two_pass", lambda: scale_two_pass(x, y, tmp), bytes=8 * N)
    fast = Variant("fused", lambda: scale_fused(x, y, tmp), bytes=8 * N)
    gpu_perf.assert_speedup(fast, base, at_least=1.32)  # 95% of the lowest interval measured
