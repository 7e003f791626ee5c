"""Probe: how much weight streaming slows an exchange between two blocks, and through which path.

Every block of a 132-block grid (one per SM, the megakernel's 512 threads and a 5 x 32 KB ring)
can stream 32 KB bulk copies (cp.async.bulk, the megakernel ring's copies) from a 2 GiB buffer,
keeping `depth` pages in flight. Blocks 0 and `partner` ping-pong a word through L2 (relaxed gpu
stores and loads, as the LL words travel) and time the round trips. Cases separate the load the
other SMs put on L2 and DRAM (`others`) from the load on the pinging SMs' own memory path
(`pingers`). Streamed bytes over the ping-pong's time give the streaming bandwidth.
Not part of the package: `python3 run4-load-probe.py` on the GPU machine.
"""
import cupy as cp
import numpy as np

SRC = r'''
__device__ __forceinline__ void st_gpu(unsigned* p, unsigned v){asm volatile("st.relaxed.gpu.global.u32 [%0], %1;"::"l"(p),"r"(v):"memory");}
__device__ __forceinline__ unsigned ld_gpu(const unsigned* p){unsigned v;asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];":"=r"(v):"l"(p):"memory");return v;}
__device__ __forceinline__ unsigned saddr(const void* p){return (unsigned)__cvta_generic_to_shared(p);}
__device__ __forceinline__ bool landed(unsigned long long* bar, unsigned use){
  unsigned d; asm volatile("{\n\t.reg .pred p;\n\tmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n}"
                          :"=r"(d):"r"(saddr(bar)),"r"(use & 1u):"memory"); return d != 0u; }
__device__ __forceinline__ void copy(void* dst, const void* src, unsigned bytes, unsigned long long* bar){
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"::"r"(saddr(bar)),"r"(bytes):"memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               ::"r"(saddr(dst)),"l"(src),"r"(bytes),"r"(saddr(bar)):"memory");
}
constexpr int kSlots = 5, kPage = 32768;

extern "C" __global__ void __launch_bounds__(512) loaded_pingpong(
    unsigned* flags, int iters, long long* out, int partner, int depth_others, int depth_pingers,
    const char* buf, long long buf_pages, unsigned long long* streamed) {
  extern __shared__ __align__(128) char smem[];
  unsigned long long* bars = reinterpret_cast<unsigned long long*>(smem + kSlots * kPage);
  const int b = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const bool pinger = b == 0 || b == partner;
  const int depth = pinger ? depth_pingers : depth_others;
  if (threadIdx.x == 0) {
    for (int i = 0; i < kSlots; ++i) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;"::"r"(saddr(bars + i)):"memory");
    asm volatile("fence.mbarrier_init.release.cluster;":::"memory");
  }
  __syncthreads();
  volatile unsigned* stop = flags + 64;
  if (warp == 1 && lane == 0 && depth > 0) {
    long long issued = 0, done = 0, page = (long long)b * 977;
    while (*stop == 0u) {
      while (done < issued && landed(bars + done % kSlots, (unsigned)(done / kSlots))) ++done;
      if (issued - done < depth) {
        copy(smem + (issued % kSlots) * kPage, buf + (page % buf_pages) * kPage, kPage, bars + issued % kSlots);
        ++issued; page += 131;
      }
    }
    while (done < issued) { if (landed(bars + done % kSlots, (unsigned)(done / kSlots))) ++done; }
    atomicAdd(streamed, (unsigned long long)done * kPage);
  }
  if (warp == 0 && lane == 0 && pinger) {
    const int me = b == 0 ? 0 : 1;
    for (int i = 1; i <= 200; ++i) {  // warm-up: both sides running
      if (me == 0) { st_gpu(flags, i); while (ld_gpu(flags + 32) != (unsigned)i) {} }
      else { while (ld_gpu(flags) != (unsigned)i) {} st_gpu(flags + 32, i); }
    }
    long long t0 = clock64();
    for (int i = 201; i <= 200 + iters; ++i) {
      if (me == 0) { st_gpu(flags, i); while (ld_gpu(flags + 32) != (unsigned)i) {} }
      else { while (ld_gpu(flags) != (unsigned)i) {} st_gpu(flags + 32, i); }
    }
    if (me == 0) { out[0] = clock64() - t0; st_gpu(const_cast<unsigned*>(stop), 1u); }
  }
}
'''


def main() -> None:
    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    sms, khz = props["multiProcessorCount"], props["clockRate"]
    print(f"GPU {props['name'].decode()} SMs {sms} clock {khz / 1e3:.0f} MHz")
    kernel = cp.RawModule(code=SRC, options=("-std=c++17",)).get_function("loaded_pingpong")
    smem = 5 * 32768 + 5 * 8
    kernel.max_dynamic_shared_size_bytes = smem
    pages = (2 << 30) // 32768
    buf = cp.zeros(pages * 32768, dtype=cp.uint8)
    iters = 4000
    cases = [(0, 0), (1, 0), (2, 0), (5, 0), (0, 1), (0, 2), (0, 5), (1, 1), (2, 2), (5, 5)]
    print("depth: pages of 32 KB in flight per SM (others = the 130 non-pinging SMs, pingers = the two pinging SMs)")
    for partner in (1, 131):
        for others, pingers in cases:
            rows = []
            for _ in range(3):
                flags = cp.zeros(128, dtype=cp.uint32)
                out = cp.zeros(2, dtype=cp.int64)
                streamed = cp.zeros(1, dtype=cp.uint64)
                start, end = cp.cuda.Event(), cp.cuda.Event()
                start.record()
                kernel((sms,), (512,), (flags, np.int32(iters), out, np.int32(partner), np.int32(others),
                                        np.int32(pingers), buf, np.int64(pages), streamed), shared_mem=smem)
                end.record()
                end.synchronize()
                cycles = int(out.get()[0])
                seconds = cp.cuda.get_elapsed_time(start, end) / 1e3  # the whole launch: streaming ran throughout
                rows.append((cycles / iters, float(streamed.get()[0]) / seconds / 1e12))
            rt = sorted(r[0] for r in rows)[1]
            bw = sorted(r[1] for r in rows)[1]
            print(f"partner {partner:3d} others {others} pingers {pingers}: {rt:7.0f} cycles per round trip "
                  f"({rt / khz * 1e3:5.2f} us), streaming {bw:5.2f} TB/s (median of 3)")


if __name__ == "__main__":
    main()
