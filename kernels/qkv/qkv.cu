// QKV projection, fp32: h_qkv[i_ws][i_qkv] = sum_m w_qkv[i_qkv][m] * h_in[i_ws][m]
//
//   w_qkv  d_qkv x d_model, row-major (the weights as stored)
//   w2     d_model x ld_w2, row-major, ld_w2 = d_qkv rounded up to a multiple of 4: the
//          transpose of w_qkv written once by qkv_w_rearrange (zeros in the padding)
//   h_in   d_ws x d_model, row-major
//   h_qkv  d_ws x d_qkv, row-major
//
// The four variants are those of the LSU course homework hw01 (see README.md). Every kernel
// is a grid-stride loop, so any grid and block size computes the whole output; the launcher
// passes blocks = number of SMs by default. Names stay stable so that ncu --kernel-name can
// select them (templates: use "regex:qkv_strip_w2").

__device__ __forceinline__ int global_thread_index() { return blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int grid_threads() { return gridDim.x * blockDim.x; }

// ---------------------------------------------------------------------------------------
// qkv_base: one thread per output, consecutive threads take consecutive i_qkv. In the inner
// loop the h_in load is the same address for the whole warp (1 sector), while the w_qkv load
// strides by d_model between threads (32 sectors): 16 sectors per request on average.
extern "C" __global__ void qkv_base(const float* __restrict__ w_qkv, const float* __restrict__ h_in,
                                    float* __restrict__ h_qkv, int d_model, int d_qkv, int d_ws)
{
    const int n_wq = d_ws * d_qkv;
    for (int i = global_thread_index(); i < n_wq; i += grid_threads()) {
        const int i_qkv = i % d_qkv;
        const int i_word = i / d_qkv;
        float q = 0.0f;
        for (int i_model = 0; i_model < d_model; i_model++)
            q += w_qkv[i_qkv * d_model + i_model] * h_in[i_word * d_model + i_model];
        h_qkv[i_word * d_qkv + i_qkv] = q;
    }
}

// ---------------------------------------------------------------------------------------
// qkv_w_rearrange: w2[m][q] = w_qkv[q][m], padding columns q >= d_qkv set to zero. Run once
// when the weights are loaded, not per projection.
extern "C" __global__ void qkv_w_rearrange(const float* __restrict__ w_qkv, float* __restrict__ w2,
                                           int d_model, int d_qkv, int ld_w2)
{
    const int n = d_model * ld_w2;
    for (int i = global_thread_index(); i < n; i += grid_threads()) {
        const int i_qkv = i % ld_w2;
        const int i_model = i / ld_w2;
        w2[i] = i_qkv < d_qkv ? w_qkv[i_qkv * d_model + i_model] : 0.0f;
    }
}

// ---------------------------------------------------------------------------------------
// qkv_base_w2: qkv_base reading the transposed weights. Consecutive threads now read
// consecutive addresses of w2 (one 128-byte line per warp); h_in stays a broadcast.
extern "C" __global__ void qkv_base_w2(const float* __restrict__ w2, const float* __restrict__ h_in,
                                       float* __restrict__ h_qkv, int d_model, int d_qkv, int d_ws,
                                       int ld_w2)
{
    const int n_wq = d_ws * d_qkv;
    for (int i = global_thread_index(); i < n_wq; i += grid_threads()) {
        const int i_qkv = i % d_qkv;
        const int i_word = i / d_qkv;
        float q = 0.0f;
        for (int i_model = 0; i_model < d_model; i_model++)
            q += w2[i_model * ld_w2 + i_qkv] * h_in[i_word * d_model + i_model];
        h_qkv[i_word * d_qkv + i_qkv] = q;
    }
}

// ---------------------------------------------------------------------------------------
// Strip kernels. A thread computes a strip of STRIP_QKV x WPT outputs: 4 consecutive i_qkv
// (one 16-byte vector of w2) for WPT consecutive words, so every weight it loads feeds WPT
// FMAs and every h_in value feeds 4. A warp covers 128 consecutive i_qkv for one word group
// ("unit"); consecutive warps take consecutive word groups of the same 128 i_qkv, so the
// warps of a block read the same weights at about the same time and all but the first find
// them in L1. d_model is consumed 4 values at a time: with VEC_M (d_model % 4 == 0 and
// 16-byte aligned rows) as float4 loads, otherwise as scalars plus a tail loop.

// Enumerators rather than constexpr ints: nvcc warns about unused constants when the file
// is compiled without instantiating the templates.
enum StripLayout : int {
    STRIP_QKV = 4,               // i_qkv per thread
    WARP_QKV = 32 * STRIP_QKV,   // i_qkv per warp unit
    // Block-size caps. They bound registers per thread (65536 / threads): WPT <= 8 fits in
    // 128 registers (blocks up to 16 warps); WPT = 16 needs about 200 (blocks up to 8 warps).
    STRIP_MAX_THREADS = 512,
    STRIP16_MAX_THREADS = 256,
};

struct StripUnit {
    int q0;      // first i_qkv of this thread (multiple of 4, < d_qkv)
    int word0;   // first word of this thread's group
};

// Maps warp unit u to this lane's strip; returns false for lanes past the last i_qkv.
template <int WPT>
__device__ __forceinline__ bool strip_unit(int u, int n_groups, int d_qkv, StripUnit& s)
{
    const int lane = threadIdx.x & 31;
    const int group = u % n_groups;
    s.q0 = (u / n_groups) * WARP_QKV + lane * STRIP_QKV;
    s.word0 = group * WPT;
    return s.q0 < d_qkv;
}

// Pointers to the strip's WPT rows of h_in (or 4 rows of w_qkv). Rows past `last` are
// clamped to it (valid memory; those results are never stored), so the inner loop has no
// bounds checks. The loops advance these pointers instead of indexing with m: indexing
// made the compiler rebuild every 64-bit address each step (4 integer ops per load).
template <int N>
__device__ __forceinline__ void strip_row_ptrs(const float* (&ptr)[N], const float* base, int row0,
                                               int last, int row_len)
{
#pragma unroll
    for (int k = 0; k < N; k++) ptr[k] = base + min(row0 + k, last) * row_len;
}

// v[k][i] = ptr[k][i] for i < 4, then ptr[k] += 4: one 4-wide step along d_model per row.
template <int N, bool VEC_M>
__device__ __forceinline__ void load_rows_step4(float (&v)[N][4], const float* (&ptr)[N])
{
#pragma unroll
    for (int k = 0; k < N; k++) {
        if constexpr (VEC_M) {
            const float4 x = *reinterpret_cast<const float4*>(ptr[k]);
            v[k][0] = x.x; v[k][1] = x.y; v[k][2] = x.z; v[k][3] = x.w;
        } else {
#pragma unroll
            for (int i = 0; i < 4; i++) v[k][i] = ptr[k][i];
        }
        ptr[k] += 4;
    }
}

// v[k][0] = *ptr[k]++: the scalar tail when d_model % 4 != 0.
template <int N>
__device__ __forceinline__ void load_rows_step1(float (&v)[N][4], const float* (&ptr)[N])
{
#pragma unroll
    for (int k = 0; k < N; k++) v[k][0] = *ptr[k]++;
}

// acc[k][j] += sum_i w[j][i] * h[k][i], i in increasing m order (same order as qkv_base).
template <int WPT, int NM>
__device__ __forceinline__ void strip_fma(float (&acc)[WPT][STRIP_QKV], const float (&w)[STRIP_QKV][4],
                                          const float (&h)[WPT][4])
{
#pragma unroll
    for (int i = 0; i < NM; i++)
#pragma unroll
        for (int k = 0; k < WPT; k++)
#pragma unroll
            for (int j = 0; j < STRIP_QKV; j++)
                acc[k][j] = fmaf(w[j][i], h[k][i], acc[k][j]);
}

template <int WPT>
__device__ __forceinline__ void strip_store(float* __restrict__ h_qkv, const float (&acc)[WPT][STRIP_QKV],
                                            const StripUnit& s, int d_qkv, int d_ws, bool vec_out)
{
#pragma unroll
    for (int k = 0; k < WPT; k++) {
        const int word = s.word0 + k;
        if (word >= d_ws) break;
        float* out = h_qkv + word * d_qkv + s.q0;
        if (vec_out) {  // d_qkv % 4 == 0 and aligned: q0 + 3 < d_qkv
            *reinterpret_cast<float4*>(out) = make_float4(acc[k][0], acc[k][1], acc[k][2], acc[k][3]);
        } else {
#pragma unroll
            for (int j = 0; j < STRIP_QKV; j++)
                if (s.q0 + j < d_qkv) out[j] = acc[k][j];
        }
    }
}

// qkv_strip: strip assignment on the original weight layout. Each thread reads 4 weight rows
// along d_model (float4 per row with VEC_M): a warp request touches 32 different rows, but
// each 32-byte sector it fetches serves two consecutive 4-wide steps, and the block's warps
// share the rows through L1.
template <int WPT, bool VEC_M>
__global__ void __launch_bounds__(WPT >= 16 ? STRIP16_MAX_THREADS : STRIP_MAX_THREADS)
qkv_strip(const float* __restrict__ w_qkv, const float* __restrict__ h_in, float* __restrict__ h_qkv,
          int d_model, int d_qkv, int d_ws, int vec_out)
{
    const int n_groups = (d_ws + WPT - 1) / WPT;
    const int n_units = ((d_qkv + WARP_QKV - 1) / WARP_QKV) * n_groups;
    const int n_warps = grid_threads() >> 5;
    for (int u = global_thread_index() >> 5; u < n_units; u += n_warps) {
        StripUnit s;
        if (!strip_unit<WPT>(u, n_groups, d_qkv, s)) continue;
        const float* h_ptr[WPT];
        strip_row_ptrs<WPT>(h_ptr, h_in, s.word0, d_ws - 1, d_model);
        const float* w_ptr[STRIP_QKV];
        strip_row_ptrs<STRIP_QKV>(w_ptr, w_qkv, s.q0, d_qkv - 1, d_model);

        float acc[WPT][STRIP_QKV] = {};
        float w[STRIP_QKV][4], h[WPT][4];
        const int m_vec_end = d_model & ~3;
        for (int m = 0; m < m_vec_end; m += 4) {
            load_rows_step4<STRIP_QKV, VEC_M>(w, w_ptr);
            load_rows_step4<WPT, VEC_M>(h, h_ptr);
            strip_fma<WPT, 4>(acc, w, h);
        }
        if constexpr (!VEC_M) {
            for (int m = m_vec_end; m < d_model; m++) {
                load_rows_step1<STRIP_QKV>(w, w_ptr);
                load_rows_step1<WPT>(h, h_ptr);
                strip_fma<WPT, 1>(acc, w, h);
            }
        }
        strip_store<WPT>(h_qkv, acc, s, d_qkv, d_ws, vec_out != 0);
    }
}

// qkv_strip_w2: strip assignment on the transposed, padded weights. The 4 i_qkv of a thread
// are one float4 of a w2 row, so a warp reads 512 contiguous bytes per d_model step.
template <int WPT, bool VEC_M>
__global__ void __launch_bounds__(WPT >= 16 ? STRIP16_MAX_THREADS : STRIP_MAX_THREADS)
qkv_strip_w2(const float* __restrict__ w2, const float* __restrict__ h_in, float* __restrict__ h_qkv,
             int d_model, int d_qkv, int d_ws, int ld_w2, int vec_out)
{
    const int n_groups = (d_ws + WPT - 1) / WPT;
    const int n_units = ((d_qkv + WARP_QKV - 1) / WARP_QKV) * n_groups;
    const int n_warps = grid_threads() >> 5;
    for (int u = global_thread_index() >> 5; u < n_units; u += n_warps) {
        StripUnit s;
        if (!strip_unit<WPT>(u, n_groups, d_qkv, s)) continue;
        const float* h_ptr[WPT];
        strip_row_ptrs<WPT>(h_ptr, h_in, s.word0, d_ws - 1, d_model);
        const float* w_ptr = w2 + s.q0;  // q0 + 3 < ld_w2: the padding keeps the float4 in bounds

        float acc[WPT][STRIP_QKV] = {};
        float w[STRIP_QKV][4], h[WPT][4];
        const int m_vec_end = d_model & ~3;
        for (int m = 0; m < m_vec_end; m += 4) {
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const float4 x = *reinterpret_cast<const float4*>(w_ptr);
                w[0][i] = x.x; w[1][i] = x.y; w[2][i] = x.z; w[3][i] = x.w;
                w_ptr += ld_w2;
            }
            load_rows_step4<WPT, VEC_M>(h, h_ptr);
            strip_fma<WPT, 4>(acc, w, h);
        }
        if constexpr (!VEC_M) {
            for (int m = m_vec_end; m < d_model; m++) {
                const float4 x = *reinterpret_cast<const float4*>(w_ptr);
                w[0][0] = x.x; w[1][0] = x.y; w[2][0] = x.z; w[3][0] = x.w;
                w_ptr += ld_w2;
                load_rows_step1<WPT>(h, h_ptr);
                strip_fma<WPT, 1>(acc, w, h);
            }
        }
        strip_store<WPT>(h_qkv, acc, s, d_qkv, d_ws, vec_out != 0);
    }
}
