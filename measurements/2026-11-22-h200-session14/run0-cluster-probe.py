"""Probe: cluster occupancy for the megakernel's block shape, and exchange latency via DSMEM vs L2."""
import sys, time, traceback
import numpy as np
import ctypes
import cupy as cp
from cuda.bindings import driver as cu

SRC = r'''

__device__ __forceinline__ void st_gpu(unsigned* p, unsigned v){asm volatile("st.relaxed.gpu.global.u32 [%0], %1;"::"l"(p),"r"(v):"memory");}
__device__ __forceinline__ unsigned ld_gpu(const unsigned* p){unsigned v;asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];":"=r"(v):"l"(p):"memory");return v;}
__device__ __forceinline__ unsigned cluster_rank(){unsigned r;asm volatile("mov.u32 %0, %%cluster_ctarank;":"=r"(r));return r;}
__device__ __forceinline__ unsigned remote(unsigned local, unsigned rank){unsigned r;asm volatile("mapa.shared::cluster.u32 %0, %1, %2;":"=r"(r):"r"(local),"r"(rank));return r;}
__device__ __forceinline__ void st_cluster(unsigned addr, unsigned v){asm volatile("st.relaxed.cluster.shared::cluster.u32 [%0], %1;"::"r"(addr),"r"(v):"memory");}
__device__ __forceinline__ unsigned ld_local(unsigned addr){unsigned v;asm volatile("ld.relaxed.cluster.shared::cta.u32 %0, [%1];":"=r"(v):"r"(addr):"memory");return v;}
__device__ __forceinline__ void cluster_sync(){asm volatile("barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;":::"memory");}

extern "C" __global__ void pingpong_global(unsigned* flags, int iters, long long* out, int partner) {
  if (threadIdx.x != 0) return;
  int b = blockIdx.x; if (b != 0 && b != partner) return;
  int me = b == 0 ? 0 : 1;
  long long t0 = clock64();
  for (int i = 1; i <= iters; ++i) {
    if (me == 0) { st_gpu(flags, i); while (ld_gpu(flags + 32) != (unsigned)i) {} }
    else { while (ld_gpu(flags) != (unsigned)i) {} st_gpu(flags + 32, i); }
  }
  out[me] = clock64() - t0;
}

extern "C" __global__ void pingpong_cluster(int iters, long long* out, int partner) {
  __shared__ unsigned flag[32];
  if (threadIdx.x == 0) flag[0] = 0;
  cluster_sync();
  unsigned rank = cluster_rank();
  unsigned local = (unsigned)__cvta_generic_to_shared(flag);
  if (threadIdx.x == 0 && blockIdx.x < gridDim.x / 1 && (rank == 0 || rank == (unsigned)partner)) {
    unsigned other = rank == 0 ? partner : 0;
    unsigned raddr = remote(local, other);
    long long t0 = clock64();
    for (int i = 1; i <= iters; ++i) {
      if (rank == 0) { st_cluster(raddr, i); while (ld_local(local) != (unsigned)i) {} }
      else { while (ld_local(local) != (unsigned)i) {} st_cluster(raddr, i); }
    }
    if (rank == 0) out[blockIdx.x / 16 * 0 + 0] = clock64() - t0;
  }
  cluster_sync();
}

extern "C" __global__ void cluster_barrier_loop(int iters, long long* out) {
  extern __shared__ char dyn[];
  cluster_sync();
  long long t0 = clock64();
  for (int i = 0; i < iters; ++i) cluster_sync();
  if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = clock64() - t0;
}
'''

def check(res):
    err = res[0]
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA error {err}")
    return res[1:] if len(res) > 2 else (res[1] if len(res) == 2 else None)

def launch_ex(func, grid, block, smem, cluster, args_types, stream=0, cooperative=False):
    cfg = cu.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid, 1, 1
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = block, 1, 1
    cfg.sharedMemBytes = smem
    cfg.hStream = cu.CUstream(stream)
    attrs = []
    if cluster > 1:
        a = cu.CUlaunchAttribute(); a.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        a.value.clusterDim.x, a.value.clusterDim.y, a.value.clusterDim.z = cluster, 1, 1
        attrs.append(a)
    if cooperative:
        a = cu.CUlaunchAttribute(); a.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_COOPERATIVE
        a.value.cooperative = 1
        attrs.append(a)
    cfg.attrs = attrs; cfg.numAttrs = len(attrs)
    check(cu.cuLaunchKernelEx(cfg, func, args_types, 0))

def main():
    dev = cp.cuda.Device()
    print("GPU", cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "SMs", dev.attributes["MultiProcessorCount"])
    mod = cp.RawModule(code=SRC, options=("-std=c++17", "--gpu-architecture=sm_90a"))
    fns = {n: mod.get_function(n) for n in ("pingpong_global", "pingpong_cluster", "cluster_barrier_loop")}
    f = cu.CUfunction(fns["cluster_barrier_loop"].kernel.ptr)
    smem = 208944
    check(cu.cuFuncSetAttribute(f, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem))
    check(cu.cuFuncSetAttribute(f, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1))
    for c in (1, 2, 4, 8, 16):
        cfg = cu.CUlaunchConfig()
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = 128, 1, 1
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = 512, 1, 1
        cfg.sharedMemBytes = smem
        a = cu.CUlaunchAttribute(); a.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        a.value.clusterDim.x, a.value.clusterDim.y, a.value.clusterDim.z = c, 1, 1
        cfg.attrs = [a]; cfg.numAttrs = 1
        try:
            n = check(cu.cuOccupancyMaxActiveClusters(f, cfg))
            print(f"cluster {c:2d}: max active clusters {n} -> {n * c} blocks")
        except Exception as e:
            print(f"cluster {c}: {e}")
    out = cp.zeros(8, dtype=cp.int64)
    flags = cp.zeros(64, dtype=cp.uint32)
    iters = 2000
    # global ping-pong between block 0 and a far block
    for partner in (1, 64, 131):
        flags[:] = 0
        fg = cu.CUfunction(fns["pingpong_global"].kernel.ptr)
        launch_ex(fg, 132, 32, 0, 1, ((flags.data.ptr, iters, out.data.ptr, partner), (ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int)))
        cp.cuda.Device().synchronize()
        print(f"L2 ping-pong block 0 <-> {partner}: {out[0].get() / iters:.0f} cycles per round trip")
    fc = cu.CUfunction(fns["pingpong_cluster"].kernel.ptr)
    check(cu.cuFuncSetAttribute(fc, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1))
    for c, partner in ((8, 1), (8, 7), (16, 15)):
        try:
            launch_ex(fc, 128, 32, 0, c, ((iters, out.data.ptr, partner), (ctypes.c_int, ctypes.c_void_p, ctypes.c_int)))
            cp.cuda.Device().synchronize()
            print(f"DSMEM ping-pong cluster {c}, rank 0 <-> {partner}: {out[0].get() / iters:.0f} cycles per round trip")
        except Exception as e:
            print("cluster ping-pong failed", c, e)
    for c in (8, 16):
        for coop in (False, True):
            try:
                launch_ex(f, 128, 512, smem, c, ((1000, out.data.ptr), (ctypes.c_int, ctypes.c_void_p)), cooperative=coop)
                cp.cuda.Device().synchronize()
                print(f"cluster barrier, cluster {c}, 128 x 512 threads, 204 KB smem, cooperative={coop}: {out[0].get() / 1000:.0f} cycles each")
            except Exception as e:
                print("cluster barrier failed", c, coop, e)
    print("clock rate kHz", dev.attributes["ClockRate"])

if __name__ == "__main__":
    main()
