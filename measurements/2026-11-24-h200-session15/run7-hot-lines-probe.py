"""Probe (run 6's, extended): is the accumulator-sized read bound by its bytes or by its hot lines?
132 blocks read `words` 64-bit words from contiguous lines, `16 / spread` words per 128-byte line
(spread 2 and 4: the same bytes over twice and four times the lines). Run 6's layouts are kept.

First every SM times loads of each line of a 512 KB pool (as run 5) and the two partitions are
found from that matrix (first singular vector: SM classes and line classes). Then 132 blocks of
512 threads read 2048 words each (4 loads per thread in flight), block barrier to block barrier,
200 times, while warp 1 of every block streams 32 KB bulk copies at `depth` pages in flight
(0: idle). Reports the median cycles per read per layout. Not part of the package:
`python3 run6-near-read-probe.py` on the GPU machine.
"""
import cupy as cp
import numpy as np

SRC = r'''
__device__ __forceinline__ unsigned saddr(const void* p){return (unsigned)__cvta_generic_to_shared(p);}
__device__ __forceinline__ bool landed(unsigned long long* bar, unsigned use){
  unsigned d; asm volatile("{\n\t.reg .pred p;\n\tmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n\tselp.u32 %0, 1, 0, p;\n}"
                          :"=r"(d):"r"(saddr(bar)),"r"(use & 1u):"memory"); return d != 0u; }
__device__ __forceinline__ void copy(void* dst, const void* src, unsigned bytes, unsigned long long* bar){
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"::"r"(saddr(bar)),"r"(bytes):"memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               ::"r"(saddr(dst)),"l"(src),"r"(bytes),"r"(saddr(bar)):"memory");
}
__device__ __forceinline__ unsigned long long ld64(const unsigned long long* p){
  unsigned long long v; asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];":"=l"(v):"l"(p):"memory"); return v; }
constexpr int kSlots = 5, kPage = 32768;
__device__ __forceinline__ long long clock_now(){long long t; asm volatile("mov.u64 %0, %%clock64;" : "=l"(t) :: "memory"); return t;}

extern "C" __global__ void line_latency(const unsigned* base, int n_lines, int iters, float* out) {
  if (threadIdx.x != 0) return;
  unsigned smid; asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
  for (int j = 0; j < n_lines; ++j) {
    const unsigned* p = base + j * 32;
    unsigned v = 0;
    for (int w = 0; w < 2; ++w) { asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory"); p += v; }
    long long t0 = clock64();
    for (int i = 0; i < iters; ++i) { asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory"); p += v; }
    out[smid * n_lines + j] = (float)(clock64() - t0) / iters + (float)(v & 1u);
  }
}

// layout 0: lines 0..127 of the pool; 1: the 128 lines of table[class of this SM]; 2: of the other class.
extern "C" __global__ void __launch_bounds__(512) wide_read(
    const unsigned long long* pool, const int* table, const int* sm_class, int layout, int reps, int depth, int words, int spread,
    const char* buf, long long buf_pages, float* out, unsigned* stop_count /* a sink */) {
  extern __shared__ __align__(128) char smem[];
  unsigned long long* bars = reinterpret_cast<unsigned long long*>(smem + kSlots * kPage);
  __shared__ int done_flag;
  unsigned smid; asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
  const int cls = sm_class[smid];
  const int* lines = layout == 1 ? table + cls * 128 : (layout == 2 ? table + (1 - cls) * 128 : nullptr);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (threadIdx.x == 0) {
    for (int i = 0; i < kSlots; ++i) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;"::"r"(saddr(bars + i)):"memory");
    asm volatile("fence.mbarrier_init.release.cluster;":::"memory");
    done_flag = 0;
  }
  __syncthreads();
  if (warp == 1) {  // the streaming warp (lane 0), until every reader of the block is done
    if (lane == 0 && depth > 0) {
      long long issued = 0, done = 0, page = (long long)blockIdx.x * 977;
      while (*(volatile int*)&done_flag == 0) {
        while (done < issued && landed(bars + done % kSlots, (unsigned)(done / kSlots))) ++done;
        if (issued - done < depth) {
          copy(smem + (issued % kSlots) * kPage, buf + (page % buf_pages) * kPage, kPage, bars + issued % kSlots);
          ++issued; page += 131;
        }
      }
      while (done < issued) { if (landed(bars + done % kSlots, (unsigned)(done / kSlots))) ++done; }
    }
    return;
  }
  // readers: warps 0 and 2..15 take the 2048 words, 4+ per thread
  const int r = warp == 0 ? lane : threadIdx.x - 32;  // 0 .. 479
  unsigned long long acc = 0;
  for (int rep = 0; rep < reps; ++rep) {
    asm volatile("bar.sync 1, 480;" ::: "memory");
    const long long t0 = clock_now();
    unsigned long long v[5];
    if (lines == nullptr) {  // contiguous: 16 >> shift words per line
      const int shift = spread == 1 ? 4 : (spread == 2 ? 3 : 2);
#pragma unroll
      for (int k = 0; k < 5; ++k) {
        const int w = r + 480 * k;
        v[k] = w < words ? ld64(pool + (w >> shift) * 16 + (w & ((1 << shift) - 1))) : 0ull;
      }
    } else {
#pragma unroll
      for (int k = 0; k < 5; ++k) {
        const int w = r + 480 * k;
        v[k] = w < words ? ld64(pool + lines[w >> 4] * 16 + (w & 15)) : 0ull;
      }
    }
#pragma unroll
    for (int k = 0; k < 5; ++k) acc += v[k];
    if (acc == 12345ull) stop_count[0] = 1u;  // a use (never taken): the loads return before the barrier
    asm volatile("bar.sync 1, 480;" ::: "memory");
    const long long t1 = clock_now();
    if (r == 0 && rep >= 20) atomicAdd(out + blockIdx.x, (float)(t1 - t0));
  }
  asm volatile("bar.sync 1, 480;" ::: "memory");
  if (r == 0) done_flag = 1;
}
'''


def main() -> None:
    props = cp.cuda.runtime.getDeviceProperties(0)
    sms = props["multiProcessorCount"]
    print(f"GPU {props['name'].decode()} SMs {sms}")
    mod = cp.RawModule(code=SRC, options=("-std=c++17",))
    n_lines = 4096
    pool = cp.zeros(n_lines * 16, dtype=cp.uint64)
    lat = cp.zeros(sms * n_lines, dtype=cp.float32)
    mod.get_function("line_latency")((sms,), (32,), (pool, np.int32(n_lines), np.int32(16), lat))
    cp.cuda.Device().synchronize()
    m = lat.get().reshape(sms, n_lines)
    centered = m - m.mean(axis=0, keepdims=True)
    u, s, vt = np.linalg.svd(centered, full_matrices=False)
    sm_class = (u[:, 0] > 0).astype(np.int32)
    line_class = (vt[0] > 0).astype(np.int32)
    # which line class is near which SM class: lower mean latency
    near_of = []
    for c in (0, 1):
        rows = m[sm_class == c]
        near_of.append(0 if rows[:, line_class == 0].mean() < rows[:, line_class == 1].mean() else 1)
    print(f"variance share of the first component {s[0] ** 2 / (s ** 2).sum():.2f}; SM classes "
          f"{int((sm_class == 0).sum())} / {int((sm_class == 1).sum())}; line classes "
          f"{int((line_class == 0).sum())} / {int((line_class == 1).sum())}; near line class of SM class 0, 1: {near_of}")
    table = np.zeros((2, 128), dtype=np.int32)
    for c in (0, 1):
        table[c] = np.flatnonzero(line_class == near_of[c])[:128]
    kernel = mod.get_function("wide_read")
    smem = 5 * 32768 + 5 * 8
    kernel.max_dynamic_shared_size_bytes = smem
    pages = (2 << 30) // 32768
    buf = cp.zeros(pages * 32768, dtype=cp.uint8)
    table_d, class_d = cp.asarray(table.ravel()), cp.asarray(sm_class)
    reps = 220
    print("cycles per read, median over blocks of the mean over 200 reads")
    for depth in (0, 1):
        for words, spread in ((2048, 1), (1024, 1), (2048, 2), (2048, 4)):
            out = cp.zeros(sms, dtype=cp.float32)
            stop = cp.zeros(1, dtype=cp.uint32)
            kernel((sms,), (512,), (pool, table_d, class_d, np.int32(0), np.int32(reps), np.int32(depth),
                                    np.int32(words), np.int32(spread), buf, np.int64(pages), out, stop), shared_mem=smem)
            cp.cuda.Device().synchronize()
            per_block = out.get() / (reps - 20)
            print(f"depth {depth}: {words} words ({words * 8 // 1024} KB) over {words * spread // 16} lines: "
                  f"{np.median(per_block):6.0f} (max {per_block.max():6.0f})")

if __name__ == "__main__":
    main()
