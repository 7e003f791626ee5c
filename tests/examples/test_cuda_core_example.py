"""A launcher that takes a stream (cuda.core, numba, ctypes): the variant's launch takes one
argument and is handed the plugin's timing stream, which speaks ``__cuda_stream__``."""
import pytest

from pytest_gpuperf import Variant

N = 1 << 24
SOURCE = r"""
extern "C" __global__ void scale(const float* x, float* y, float factor, unsigned long long n) {
    for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = factor * x[i];
}
"""


@pytest.fixture(scope="module")
def kernel(gpuperf_device):
    core = pytest.importorskip("cuda.core")
    cupy = pytest.importorskip("cupy")
    device = core.Device(gpuperf_device.ordinal)
    device.set_current()
    program = core.Program(SOURCE, code_type="c++", options=core.ProgramOptions(arch=gpuperf_device.arch))
    scale = program.compile("cubin").get_kernel("scale")
    x = cupy.random.default_rng(0).standard_normal(N, dtype=cupy.float32)
    y = cupy.empty_like(x)
    config = core.LaunchConfig(grid=4 * gpuperf_device.sm_count, block=256)

    wrapped = {}

    def launch(stream):  # handed the timing stream; cuda.core wraps any __cuda_stream__ object
        handle = stream.__cuda_stream__()[1]
        if handle not in wrapped:
            wrapped[handle] = device.create_stream(stream)
        core.launch(wrapped[handle], config, scale, x.data.ptr, y.data.ptr, cupy.float32(2.0), cupy.uint64(N))

    return launch, x, y, device


def test_values(kernel):
    import cupy

    launch, x, y, device = kernel
    y.fill(cupy.nan)
    cupy.cuda.Device().synchronize()
    stream = device.create_stream()
    launch(stream)
    stream.sync()  # the test's own stream: a plain call, no plugin involved
    assert bool(cupy.all(y == 2.0 * x))


def test_speed(gpu_perf, kernel):
    launch, _, _, _ = kernel
    gpu_perf.measure(Variant("cuda_core_scale", launch, bytes=8 * N))
