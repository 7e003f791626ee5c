"""A Triton kernel timed as it is launched: Triton enqueues on torch's current stream, which is
the plugin's timing stream while a variant runs."""
import pytest

from pytest_gpuperf import Variant

N = 1 << 24


@pytest.fixture(scope="module")
def scale():
    pytest.importorskip("torch")
    triton = pytest.importorskip("triton")
    import triton.language as tl

    @triton.jit
    def scale_kernel(x_ptr, y_ptr, n, factor, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * factor, mask=mask)

    def launch(x, y, factor, block=1024):
        scale_kernel[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), factor, BLOCK=block)

    return launch


@pytest.fixture(scope="module")
def tensors():
    import torch

    x = torch.randn(N, device="cuda")
    return x, torch.empty_like(x)


def test_values(gpuperf_device, scale, tensors):
    import torch

    x, y = tensors
    y.fill_(float("nan"))
    scale(x, y, 2.0)
    torch.testing.assert_close(y.double(), 2.0 * x.double(), rtol=0, atol=0)


def test_speed(gpu_perf, scale, tensors):
    x, y = tensors
    m = gpu_perf.measure(Variant("triton_scale", lambda: scale(x, y, 2.0), bytes=8 * N))
    gpu_perf.record("bandwidth_fraction", m.bandwidth / gpu_perf.copy_bandwidth())
