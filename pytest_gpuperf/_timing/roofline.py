"""The device's measured copy bandwidth: the ceiling memory-bound kernels are judged against.

A ``cudaMemcpy`` captured in a CUDA graph runs on the copy engines, which move far less
than the SMs can (2.77 TB/s against 4.2 TB/s on an H200), so the copy is a kernel: 16-byte
loads and stores, grid-stride, several words in flight per thread, and the best
of a few launch shapes (one shape alone measured 3.9 TB/s, below what a merge kernel
reached). Bytes read plus bytes written are counted, as nvbench and the ANCHORS table do.
"""

from __future__ import annotations

from typing import Any

from pytest_gpuperf._timing.device import DeviceInfo

COPY_SOURCE = r"""
// Each thread moves UNROLL 16-byte words per step, all loads issued before the stores.
template <int UNROLL>
__global__ void gpuperf_copy16(const uint4* __restrict__ src, uint4* __restrict__ dst, unsigned long long n) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long base = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; base < n;
         base += UNROLL * stride) {
        uint4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            unsigned long long i = base + u * stride;
            if (i < n) v[u] = src[i];
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            unsigned long long i = base + u * stride;
            if (i < n) dst[i] = v[u];
        }
    }
}

// One tile of UNROLL x blockDim 16-byte words per block, no grid-stride loop: blocks sweep
// memory in launch order (the layout PyTorch's elementwise copy uses).
template <int UNROLL>
__global__ void gpuperf_copy16_tiles(const uint4* __restrict__ src, uint4* __restrict__ dst, unsigned long long n) {
    const unsigned long long base = (unsigned long long)blockIdx.x * blockDim.x * UNROLL + threadIdx.x;
    uint4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        unsigned long long i = base + (unsigned long long)u * blockDim.x;
        if (i < n) v[u] = src[i];
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        unsigned long long i = base + (unsigned long long)u * blockDim.x;
        if (i < n) dst[i] = v[u];
    }
}
"""
# (kernel, unroll, threads, blocks per SM or None for one tile per block): the fastest of
# these is the device's copy bandwidth.
COPY_CONFIGS = (
    ("gpuperf_copy16", 4, 512, 4),
    ("gpuperf_copy16", 8, 512, 4),
    ("gpuperf_copy16", 4, 512, 8),
    ("gpuperf_copy16_tiles", 4, 256, None),
    ("gpuperf_copy16_tiles", 8, 128, None),
)


def copy_buffer_bytes(device: DeviceInfo) -> int:
    """Large enough that L2 plays no part (16x L2, at least 1 GiB), small enough to fit."""
    return int(min(max(16 * device.l2_bytes, 1 << 30), device.memory_bytes // 8)) // 16 * 16


def copy_launches(device: DeviceInfo) -> tuple[list[tuple[str, Any]], int]:
    """Named launch callables copying one device buffer with the SMs, and the bytes each moves (read + write)."""
    import cupy

    nbytes = copy_buffer_bytes(device)
    n16 = nbytes // 16
    src = cupy.random.default_rng(7).integers(0, 2**31 - 1, nbytes // 4, dtype=cupy.int32)
    dst = cupy.empty_like(src)
    names = sorted({f"{kernel}<{unroll}>" for kernel, unroll, _, _ in COPY_CONFIGS})
    module = cupy.RawModule(code=COPY_SOURCE, name_expressions=names)
    launches = []
    for kernel_name, unroll, threads, per_sm in COPY_CONFIGS:
        kernel = module.get_function(f"{kernel_name}<{unroll}>")
        grid = device.sm_count * per_sm if per_sm else -(-n16 // (threads * unroll))

        def launch(kernel: Any = kernel, grid: int = grid, threads: int = threads) -> None:
            kernel((grid,), (threads,), (src, dst, cupy.uint64(n16)))

        label = f"b{per_sm}" if per_sm else "tiles"
        launches.append((f"copy-u{unroll}-t{threads}-{label}", launch))
    return launches, 2 * nbytes


def copy_bandwidth(ordinal: int = 0) -> float:
    """Measured device-to-device copy bandwidth of GPU ``ordinal`` in bytes/s (read + write): the best of a few configurations."""
    from pytest_gpuperf._timing.bench import device, time_callable

    launches, moved = copy_launches(device(ordinal))
    times = [time_callable(fn, name=name, cache="hot", bytes=moved, ordinal=ordinal).median_s for name, fn in launches]
    return moved / min(times)
