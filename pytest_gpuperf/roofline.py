"""The device's measured copy bandwidth: the ceiling memory-bound kernels are judged against.

A ``cudaMemcpy`` captured in a CUDA graph runs on the copy engines, which move far less
than the SMs can (2.77 TB/s against 4.2 TB/s on an H200), so the copy is a kernel: 16-byte
loads and stores, grid-stride, enough blocks to fill every SM. Bytes read plus bytes
written are counted, as nvbench and the ANCHORS table do.
"""
from __future__ import annotations

from typing import Any

from pytest_gpuperf.device import DeviceInfo

COPY_SOURCE = r"""
extern "C" __global__ void gpuperf_copy16(const uint4* __restrict__ src, uint4* __restrict__ dst, unsigned long long n) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += 4 * stride) {
        uint4 a = src[i];
        uint4 b = i + stride < n ? src[i + stride] : make_uint4(0, 0, 0, 0);
        uint4 c = i + 2 * stride < n ? src[i + 2 * stride] : make_uint4(0, 0, 0, 0);
        uint4 d = i + 3 * stride < n ? src[i + 3 * stride] : make_uint4(0, 0, 0, 0);
        dst[i] = a;
        if (i + stride < n) dst[i + stride] = b;
        if (i + 2 * stride < n) dst[i + 2 * stride] = c;
        if (i + 3 * stride < n) dst[i + 3 * stride] = d;
    }
}
"""
THREADS = 512


def copy_buffer_bytes(device: DeviceInfo) -> int:
    """Large enough that L2 plays no part (16x L2, at least 1 GiB), small enough to fit."""
    return int(min(max(16 * device.l2_bytes, 1 << 30), device.memory_bytes // 8)) // 16 * 16


def copy_launch(device: DeviceInfo) -> tuple[Any, int]:
    """A launch callable copying a device buffer with the SMs, and the bytes it moves (read + write)."""
    import cupy

    nbytes = copy_buffer_bytes(device)
    n16 = nbytes // 16
    src = cupy.random.default_rng(7).integers(0, 2**31 - 1, nbytes // 4, dtype=cupy.int32)
    dst = cupy.empty_like(src)
    kernel = cupy.RawKernel(COPY_SOURCE, "gpuperf_copy16")
    blocks = device.sm_count * 4

    def launch() -> None:
        kernel((blocks,), (THREADS,), (src, dst, cupy.uint64(n16)))

    return launch, 2 * nbytes


def copy_bandwidth(ordinal: int = 0) -> float:
    """Measured device-to-device copy bandwidth of GPU ``ordinal`` in bytes/s (read + write)."""
    from pytest_gpuperf.bench import device, time_callable

    info = device(ordinal)
    launch, moved = copy_launch(info)
    m = time_callable(launch, name="device-copy", cache="hot", bytes=moved, ordinal=ordinal)
    return moved / m.median_s
