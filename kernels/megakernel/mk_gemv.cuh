// The GEMV input vector in shared memory (vec_slot order), the RMSNorm of the hidden vector into
// it, and block_gemv, the GEMV of every variant without a weight stream or ring.
#pragma once

#include "mk_device.cuh"
#include "mk_config.cuh"
#include "mk_shared.cuh"

namespace mk {

// ---- vectors ----------------------------------------------------------------------------------
// The GEMV input vector lives in shared memory as two float4 arrays: elements 8c..8c+3 at
// float4 c of the low half, 8c+4..8c+7 at float4 c of the high half. A lane reading its 8 inputs
// then makes two conflict-free 16-byte accesses (plain order would be 32-byte strided: 2-way
// bank conflicts).
constexpr int kVecHalf = kMaxK / 2;

__device__ __forceinline__ int vec_slot(int i) { return ((i & 7) < 4 ? 0 : kVecHalf) + (i >> 3) * 4 + (i & 3); }

// fp32 vector of n elements (n % 8 == 0) written by other blocks -> shared memory, then a barrier.
__device__ __forceinline__ void load_vector_to_shared(const float* src, int n, float* vec) {
    for (int c = threadIdx.x; c < n / 8; c += kThreads) {
        const uint4 lo = load_l2_16B(src + c * 8);
        const uint4 hi = load_l2_16B(src + c * 8 + 4);
        reinterpret_cast<uint4*>(vec)[c] = lo;
        reinterpret_cast<uint4*>(vec + kVecHalf)[c] = hi;
    }
    __syncthreads();
}

// x[i] / sqrt(mean(x^2) + eps) * weight[i] over the hidden vector, into shared memory (vec_slot
// order) when `to_shared`, else into the global vector dst. x is the embedding row of `token`
// (layer 0's input) or the residual stream. With `from_partials` the sum of squares is the sum of
// the per-block partials the previous GEMV epilogue published. All threads of the block call this.
__device__ __forceinline__ void rmsnorm_hidden(const MegakernelParams& P, bool from_embedding, bool from_partials,
                                               int token, const bf16_t* weight, bool to_shared, float* dst,
                                               float* misc) {
    constexpr int kPer = (kHidden + kThreads - 1) / kThreads;
    float x[kPer];
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
        const int i = threadIdx.x + j * kThreads;
        x[j] = 0.f;
        if (i < kHidden) {
            x[j] = from_embedding ? bf16_to_float(P.embed[static_cast<size_t>(token) * kHidden + i])
                                  : load_l2_f32(P.residual + i);
            ss = fmaf(x[j], x[j], ss);
        }
    }
    float total;
    if (from_partials) {
        if (threadIdx.x < 32) {
            float s = 0.f;
            for (int i = threadIdx.x; i < static_cast<int>(gridDim.x); i += 32) s += load_l2_f32(P.sumsq_partial + i);
            s = warp_sum(s);
            if (threadIdx.x == 0) misc[0] = s;
        }
        __syncthreads();
        total = misc[0];
    } else {
        total = block_sum<kThreads>(ss, misc);
    }
    const float inv_rms = 1.0f / sqrtf(total / static_cast<float>(kHidden) + kRmsEps);
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
        const int i = threadIdx.x + j * kThreads;
        if (i < kHidden) dst[to_shared ? vec_slot(i) : i] = x[j] * inv_rms * bf16_to_float(weight[i]);
    }
}

// Leaves the RMSNorm of the hidden vector in s.vec, by the variant's method.
template <class T>
__device__ __forceinline__ void rmsnorm_into_vec(const MegakernelParams& P, bool from_embedding, int token,
                                                 const bf16_t* weight, const Shared& s) {
    if (T::redundant_norm) {
        rmsnorm_hidden(P, from_embedding, T::norm_partials && !from_embedding, token, weight, true, s.vec, s.misc);
        __syncthreads();
    } else {
        if (blockIdx.x == 0) rmsnorm_hidden(P, from_embedding, false, token, weight, false, P.normed, s.misc);
        grid_sync(P.counters + kGridWordSlot);
        load_vector_to_shared(P.normed, kHidden, s.vec);
    }
}

// ---- GEMV -------------------------------------------------------------------------------------
// Rows [row0, row0 + nrows) of the row-major bf16 matrix W (kK columns) times the fp32 vector x_s
// (shared memory, vec_slot order). The block streams its rows as one flat run of 16-byte chunks: thread t takes
// chunks t, t + 512, ... with kGemvUnroll loads in flight, whatever the row count. kK is a multiple
// of 256, so a warp's 32 consecutive chunks lie in one row: the warp reduces them and lane 0
// stores the sum of that 256-column segment. Each output then adds its segments in a fixed order
// (no atomics: results do not depend on timing) and goes to the epilogue, which returns a value
// summed per thread (the residual epilogues return x^2 for the fused RMSNorm).
// `stream_ahead` (sm_90) keeps an L2 bulk prefetch two rounds ahead of the loads.
template <int kK, int kRowsPerOut, typename Epilogue>
__device__ __forceinline__ float block_gemv(const bf16_t* W, int row0, int nrows, const float* x_s, float* part_s,
                                            bool stream_ahead, Epilogue epilogue) {
    constexpr int kChunksPerRow = kK / 8;
    constexpr int kSegs = kK / 256;
    constexpr int kTileRows = kPartialFloats / kSegs / kRowsPerOut * kRowsPerOut;
    constexpr int kRound = kThreads * kGemvUnroll;  // chunks per round
    static_assert(kTileRows >= kRowsPerOut, "GEMV tile holds no output");
    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int total_chunks = nrows * kChunksPerRow;
    const bf16_t* Wb = W + static_cast<size_t>(row0) * kK;
    float epilogue_sum = 0.f;

    for (int tile0 = 0; tile0 < nrows; tile0 += kTileRows) {
        const int rows = min(kTileRows, nrows - tile0);
        const int nchunks = rows * kChunksPerRow;
        const bf16_t* Wt = Wb + static_cast<size_t>(tile0) * kK;
        for (int base = 0; base < nchunks; base += kRound) {
            if (stream_ahead && tid == 0) {
                const int ahead = tile0 * kChunksPerRow + base + 2 * kRound;
                const int count = min(kRound, total_chunks - ahead);
                if (count > 0) prefetch_l2_async(Wb + static_cast<size_t>(ahead) * 8, static_cast<unsigned>(count) * 16u);
            }
            uint4 w[kGemvUnroll];
#pragma unroll
            for (int u = 0; u < kGemvUnroll; ++u) {
                const int c = base + u * kThreads + tid;
                if (c < nchunks) w[u] = load_weights_16B(Wt + static_cast<size_t>(c) * 8);
            }
#pragma unroll
            for (int u = 0; u < kGemvUnroll; ++u) {
                const int c = base + u * kThreads + tid;
                if (c < nchunks) {  // uniform per warp: nchunks is a multiple of 32
                    const int r = c / kChunksPerRow;
                    const int col8 = c - r * kChunksPerRow;
                    const float4 xlo = reinterpret_cast<const float4*>(x_s)[col8];
                    const float4 xhi = reinterpret_cast<const float4*>(x_s + kVecHalf)[col8];
                    const float s = warp_sum(dot8_bf16_f32(w[u], xlo, xhi));
                    if (lane == 0) part_s[(col8 >> 5) * kTileRows + r] = s;
                }
            }
        }
        __syncthreads();
        const int outputs = rows / kRowsPerOut;
        for (int o = tid; o < outputs; o += kThreads) {
            float v[kRowsPerOut];
#pragma unroll
            for (int k = 0; k < kRowsPerOut; ++k) {
                float acc = 0.f;
#pragma unroll
                for (int seg = 0; seg < kSegs; ++seg) acc += part_s[seg * kTileRows + o * kRowsPerOut + k];
                v[k] = acc;
            }
            epilogue_sum += epilogue(row0 + tile0 + o * kRowsPerOut, v);
        }
        __syncthreads();  // part_s is rewritten by the next tile
    }
    return epilogue_sum;
}

// Per-block sum of the residual epilogue's x^2, for the next RMSNorm (norm_partials variants).
// Threads that wrote no output hold 0. With at most 32 outputs, all of them sit in warp 0.
__device__ __forceinline__ void publish_sumsq(const MegakernelParams& P, float sq, int outputs, float* misc) {
    if (outputs <= 32) {
        if (threadIdx.x < 32) {
            const float s = warp_sum(sq);
            if (threadIdx.x == 0) P.sumsq_partial[blockIdx.x] = s;
        }
    } else {
        const float s = block_sum<kThreads>(sq, misc);
        if (threadIdx.x == 0) P.sumsq_partial[blockIdx.x] = s;
    }
}

// One thread asks for this block's slice [row0, row0 + nrows) of W in L2, at most max_bytes.
template <int kK>
__device__ __forceinline__ void prefetch_rows(const bf16_t* W, int row0, int nrows, unsigned max_bytes) {
    if (threadIdx.x != 0 || nrows <= 0) return;
    const char* p = reinterpret_cast<const char*>(W + static_cast<size_t>(row0) * kK);
    unsigned bytes = static_cast<unsigned>(nrows) * kK * 2u;
    if (bytes > max_bytes) bytes = max_bytes;
    constexpr unsigned kPiece = 32768u;
    for (unsigned off = 0; off < bytes; off += kPiece) prefetch_l2_async(p + off, min(kPiece, bytes - off));
}

}  // namespace mk
