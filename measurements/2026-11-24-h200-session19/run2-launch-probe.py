"""Session 19 run 2: what a launch of the megakernel's footprint costs between two decode steps.

Empty kernels of 132 x 512 threads with 1 block per SM (204 KiB of dynamic shared memory, as the ring
variants), launched back to back in a CUDA graph and timed by the plugin (time_callable, hot):
cooperative and plain launches; then with programmatic dependent launch (cuLaunchKernelEx with
PROGRAMMATIC_STREAM_SERIALIZATION, cuda.bindings), and a kernel that spins ~50 us so the overlap
of one launch's set-up with the previous kernel shows as a smaller time per launch.
"""
import ctypes
import sys

import cupy
import numpy as np

from pytest_gpuperf.bench import time_callable

SRC = r'''
extern "C" __global__ void __launch_bounds__(512, 1) spin(int* flag, long long cycles, int pdl) {
    extern __shared__ char smem[];
    if (pdl) asm volatile("griddepcontrol.launch_dependents;");
    if (pdl) asm volatile("griddepcontrol.wait;" ::: "memory");
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
    if (threadIdx.x == 0 && blockIdx.x == 100000) flag[0] = (int)smem[0];
}
'''
mod = cupy.RawModule(code=SRC, options=("-std=c++17",))
k = mod.get_function("spin")
SMEM = 208944
cupy.cuda.driver.funcSetAttribute(k.kernel.ptr, 8, SMEM)
sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
flag = cupy.zeros(1, cupy.int32)
print(cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(), sms, "SMs", flush=True)


def plain(cycles, coop, smem=SMEM):
    args = (flag, np.int64(cycles), np.int32(0))
    return lambda: k.kernel((sms,), (512,), args, shared_mem=smem, enable_cooperative_groups=coop)


def pdl(cycles, coop=False):
    from cuda.bindings import driver as drv
    cfg = drv.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = sms, 1, 1
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = 512, 1, 1
    cfg.sharedMemBytes = SMEM
    attrs = []
    a = drv.CUlaunchAttribute()
    a.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    a.value.programmaticStreamSerializationAllowed = 1
    attrs.append(a)
    if coop:
        c = drv.CUlaunchAttribute()
        c.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_COOPERATIVE
        c.value.cooperative = 1
        attrs.append(c)
    cfg.attrs = attrs
    cfg.numAttrs = len(attrs)
    f = drv.CUfunction(k.kernel.ptr)
    params = ((flag.data.ptr, cycles, 1), (ctypes.c_void_p, ctypes.c_longlong, ctypes.c_int))

    def launch():
        cfg.hStream = drv.CUstream(cupy.cuda.get_current_stream().ptr)
        err, = drv.cuLaunchKernelEx(cfg, f, params, 0)
        if err != drv.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuLaunchKernelEx: {err}")
    return launch


rows = []
for cycles in (0, 100_000):
    for name, make in (("plain", lambda c: plain(c, False)), ("cooperative", lambda c: plain(c, True)),
                       ("plain, no smem", lambda c: plain(c, False, 0)),
                       ("pdl", lambda c: pdl(c)), ("pdl+cooperative", lambda c: pdl(c, True))):
        try:
            m = time_callable(make(cycles), name=f"{name}/{cycles}", cache="hot")
            rows.append((name, cycles, m.median_s * 1e6, m.ci_low_s * 1e6, m.ci_high_s * 1e6, m.method))
            print(f"{name:18s} spin {cycles:7d} cycles: {m.median_s * 1e6:8.2f} us per launch "
                  f"[{m.ci_low_s * 1e6:.2f}, {m.ci_high_s * 1e6:.2f}] ({m.method})", flush=True)
        except Exception as exc:  # report and go on
            print(f"{name:18s} spin {cycles:7d} cycles: FAILED {type(exc).__name__}: {exc}", flush=True)
sys.exit(0)
