// CPU emulation of kernels/qkv/qkv.cu for tests/qkv/test_cpu_emulation.py.
//
// Each (block, thread) runs the kernel body in turn. The kernels use no shared memory,
// barriers or warp intrinsics, so serial execution computes what the GPU computes (up to
// FMA contraction). Built with AddressSanitizer and UBSan: a read or write past an exact
// size buffer, or a float4 access that is not 16-byte aligned (float4 is alignas(16) here,
// as on the GPU), stops the run. Inputs are random; shapes, misalignment, warps per block
// and grid size are drawn per case. Usage: cpu_emulation [cases] [seed]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

struct Dim { unsigned x = 0, y = 1, z = 1; };
static Dim threadIdx, blockIdx, blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__
struct alignas(16) float4 { float x, y, z, w; };
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
using std::min;

#include "qkv.cu"

static void run(int blocks, int threads, const std::function<void()>& kernel)
{
    gridDim.x = blocks;
    blockDim.x = threads;
    for (int b = 0; b < blocks; b++)
        for (int t = 0; t < threads; t++) {
            blockIdx.x = b;
            threadIdx.x = t;
            kernel();
        }
}

// An exact-size buffer starting `offset` floats past a 16-byte boundary.
struct Buffer {
    char* raw;
    float* p;
    Buffer(size_t n, int offset)
    {
        raw = static_cast<char*>(aligned_alloc(16, ((n + offset) * sizeof(float) + 15) / 16 * 16));
        p = reinterpret_cast<float*>(raw) + offset;
    }
    ~Buffer() { free(raw); }
};

int main(int argc, char** argv)
{
    const int cases = argc > 1 ? atoi(argv[1]) : 100;
    std::mt19937 rng(argc > 2 ? atoi(argv[2]) : 1);
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    std::normal_distribution<float> normal;
    int failures = 0;
    for (int c = 0; c < cases; c++) {
        const int d_model = pick(0, 3) == 0 ? pick(1, 8) : pick(1, 70);
        const int d_qkv = pick(0, 3) == 0 ? pick(1, 8) : pick(1, 300);
        const int d_ws = pick(0, 3) == 0 ? pick(1, 20) : pick(1, 90);
        const int ld_w2 = (d_qkv + 3) / 4 * 4;
        const int offset = pick(0, 2) == 0 ? 1 : 0;  // misaligned arrays in a third of the cases
        const int warps = std::vector<int>{1, 2, 3, 4, 8, 16}[pick(0, 5)];
        const int blocks = pick(1, 9);
        const int threads = 32 * warps;
        Buffer w(size_t(d_qkv) * d_model, offset), h(size_t(d_ws) * d_model, offset);
        Buffer out(size_t(d_ws) * d_qkv, offset), w2(size_t(d_model) * ld_w2, 0);
        for (int i = 0; i < d_qkv * d_model; i++) w.p[i] = normal(rng);
        for (int i = 0; i < d_ws * d_model; i++) h.p[i] = normal(rng);
        std::vector<double> ref(size_t(d_ws) * d_qkv);
        for (int i = 0; i < d_ws; i++)
            for (int q = 0; q < d_qkv; q++) {
                double s = 0;
                for (int m = 0; m < d_model; m++) s += double(w.p[q * d_model + m]) * h.p[i * d_model + m];
                ref[i * d_qkv + q] = s;
            }

        for (int i = 0; i < d_model * ld_w2; i++) w2.p[i] = NAN;
        run(std::min(blocks, 4), 64, [&] { qkv_w_rearrange(w.p, w2.p, d_model, d_qkv, ld_w2); });
        for (int m = 0; m < d_model; m++)
            for (int q = 0; q < ld_w2; q++)
                if (w2.p[m * ld_w2 + q] != (q < d_qkv ? w.p[q * d_model + m] : 0.0f)) {
                    printf("FAIL qkv_w_rearrange d_model=%d d_qkv=%d at [%d][%d]\n", d_model, d_qkv, m, q);
                    failures++;
                    m = d_model;
                    break;
                }

        // The same path choice as kernels/qkv/launch.py.
        const bool vec_m = d_model % 4 == 0 && offset == 0;
        const int vec_out = d_qkv % 4 == 0 && offset == 0;
        struct Variant { const char* name; int max_warps; std::function<void()> body; };
        const std::vector<Variant> variants = {
            {"qkv_base", 32, [&] { qkv_base(w.p, h.p, out.p, d_model, d_qkv, d_ws); }},
            {"qkv_base_w2", 32, [&] { qkv_base_w2(w2.p, h.p, out.p, d_model, d_qkv, d_ws, ld_w2); }},
#define STRIP(W, MAXW)                                                                                   \
    {"qkv_strip<" #W ">", MAXW, [&] {                                                                   \
         if (vec_m) qkv_strip<W, true>(w.p, h.p, out.p, d_model, d_qkv, d_ws, vec_out);                  \
         else qkv_strip<W, false>(w.p, h.p, out.p, d_model, d_qkv, d_ws, vec_out);                       \
     }},                                                                                                 \
    {"qkv_strip_w2<" #W ">", MAXW, [&] {                                                                \
         if (vec_m) qkv_strip_w2<W, true>(w2.p, h.p, out.p, d_model, d_qkv, d_ws, ld_w2, vec_out);       \
         else qkv_strip_w2<W, false>(w2.p, h.p, out.p, d_model, d_qkv, d_ws, ld_w2, vec_out);            \
     }}
            STRIP(4, 16), STRIP(8, 16), STRIP(16, 8),
#undef STRIP
        };
        for (const Variant& v : variants) {
            if (warps > v.max_warps) continue;
            for (int i = 0; i < d_ws * d_qkv; i++) out.p[i] = NAN;
            run(blocks, threads, v.body);
            double num = 0, den = 0;
            int unwritten = 0;
            for (int i = 0; i < d_ws * d_qkv; i++) {
                if (std::isnan(out.p[i])) { unwritten++; continue; }
                num += (out.p[i] - ref[i]) * (out.p[i] - ref[i]);
                den += ref[i] * ref[i];
            }
            const double err = std::sqrt(num / den);
            if (unwritten || !(err <= 1e-5)) {
                printf("FAIL %s d_model=%d d_qkv=%d d_ws=%d offset=%d warps=%d blocks=%d: unwritten=%d rel_l2=%.3g\n",
                       v.name, d_model, d_qkv, d_ws, offset, warps, blocks, unwritten, err);
                failures++;
            }
        }
    }
    printf("%d cases, %d failures\n", cases, failures);
    return failures != 0;
}
