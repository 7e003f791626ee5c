"""Probe: the L2 hit latency from every SM to each of 512 consecutive 128-byte lines, idle.

If the L2's two partitions show as two latency classes (lines homed near an SM answer faster than
lines homed in the other partition), an exchange word could be placed near its readers. Each
block's thread 0 reads its %smid and times 64 dependent relaxed gpu-scope loads (served by L2) of
each line, one line after another; blocks run concurrently (light traffic). Prints the latency
histogram, how well two classes of SMs explain the matrix, and how the near/far pattern runs along
the addresses. Not part of the package: `python3 run5-l2-distance-probe.py` on the GPU machine.
"""
import cupy as cp
import numpy as np

SRC = r'''
extern "C" __global__ void line_latency(const unsigned* base, int n_lines, int iters, float* out, int* smids) {
  if (threadIdx.x != 0) return;
  unsigned smid; asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
  smids[blockIdx.x] = (int)smid;
  for (int j = 0; j < n_lines; ++j) {
    const unsigned* p = base + j * 32;
    unsigned v = 0;
    for (int w = 0; w < 4; ++w) { asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory"); p += v; }
    long long t0 = clock64();
    for (int i = 0; i < iters; ++i) {
      asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
      p += v;  // v is 0: the next load depends on this one
    }
    long long t1 = clock64();
    out[smid * n_lines + j] = (float)(t1 - t0) / iters + (float)(v & 1u);
  }
}
'''


def main() -> None:
    props = cp.cuda.runtime.getDeviceProperties(0)
    sms = props["multiProcessorCount"]
    print(f"GPU {props['name'].decode()} SMs {sms}")
    kernel = cp.RawModule(code=SRC).get_function("line_latency")
    n_lines, iters = 512, 64
    base = cp.zeros(n_lines * 32, dtype=cp.uint32)
    out = cp.zeros(sms * n_lines, dtype=cp.float32)
    smids = cp.zeros(sms, dtype=cp.int32)
    kernel((sms,), (32,), (base, np.int32(n_lines), np.int32(iters), out, smids))
    cp.cuda.Device().synchronize()
    m = out.get().reshape(sms, n_lines)
    print("smid of block 0..15:", smids.get()[:16].tolist())
    print(f"latency cycles: min {m.min():.0f}, p10 {np.percentile(m, 10):.0f}, median {np.median(m):.0f}, "
          f"p90 {np.percentile(m, 90):.0f}, max {m.max():.0f}")
    hist, edges = np.histogram(m, bins=16)
    for h, lo, hi in zip(hist, edges[:-1], edges[1:]):
        print(f"  {lo:6.0f}-{hi:6.0f}: {h}")
    # Two classes of SMs: split on the sign of each SM's deviation pattern (first principal component).
    centered = m - m.mean(axis=0, keepdims=True)
    u, s, vt = np.linalg.svd(centered, full_matrices=False)
    print("singular values (share of variance):", np.round((s[:5] ** 2) / (s ** 2).sum(), 3).tolist())
    sm_class = u[:, 0] > 0
    line_sign = vt[0] > 0
    near = np.where(sm_class[:, None] == line_sign[None, :], m, np.nan)
    far = np.where(sm_class[:, None] != line_sign[None, :], m, np.nan)
    print(f"SM classes: {int(sm_class.sum())} / {int((~sm_class).sum())}; lines: {int(line_sign.sum())} / "
          f"{int((~line_sign).sum())}")
    print(f"mean latency where SM class matches line class {np.nanmean(near):.0f} cycles, "
          f"where it does not {np.nanmean(far):.0f}")
    lo, hi = (near, far) if np.nanmean(near) < np.nanmean(far) else (far, near)
    per_line_gap = np.nanmean(hi, axis=0) - np.nanmean(lo, axis=0)
    print(f"per-line gap between the classes: median {np.median(per_line_gap):.0f}, min {per_line_gap.min():.0f}")
    print("line class along the addresses (128-byte lines, 64 per row):")
    for r in range(0, n_lines, 64):
        print("  " + "".join("A" if x else "b" for x in line_sign[r:r + 64]))
    print("SM class by smid (0..):", "".join("A" if sm_class[i] else "b" for i in range(sms)))


if __name__ == "__main__":
    main()
