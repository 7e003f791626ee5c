// The weight stream (stream variant): each block's GEMV slices of a step (stream_slice, also the
// ring's), carried by registers across phases and grid barriers, and stream_gemv.
#pragma once

#include "mk_device.cuh"
#include "mk_config.cuh"
#include "mk_variants.cuh"
#include "mk_shared.cuh"
#include "mk_gemv.cuh"

namespace mk {

// ---- the weight stream (stream variant) ------------------------------------------------------
// Weights do not depend on activations, so a block can fetch the next phase's weights before the
// grid barrier that starts it. stream_gemv keeps kStreamDepth 16-byte loads per thread in flight
// at all times, in registers: consuming slot u issues the load of the next chunk that slot
// carries, which near the end of a slice is a chunk of the block's next slice (the next phase,
// or the one after when a thread has no chunk u in the next). The loads then fly during the
// epilogue, the grid barrier, the RMSNorm or the attention that separate the phases, and each
// GEMV starts with its data in registers instead of paying a DRAM round trip after the barrier.
//
// Warp 0 carries no weight loads: the grid barrier's arrival (thread 0: MEMBAR.ALL.GPU, ERRBAR,
// then the atomic) waits for the warp's outstanding memory operations, which would put a DRAM
// round trip back in front of every barrier. For the same reason the stream variant executes no
// fence in warps 1-15 (its combine and KV-row code fence in thread 0 only).
constexpr int kStreamThreads = kThreads - 32;                 // warps 1 .. kWarps - 1
constexpr int kStreamDepth = 8;  // loads in flight per streaming thread (10 already spills registers)
constexpr int kStreamRound = kStreamThreads * kStreamDepth;   // chunks per round of a block
static_assert(kStreamThreads % 32 == 0, "the stream is made of whole warps");

// Chunk k of a thread in a slice is flat chunk lane + kStreamThreads * k (lane = threadIdx.x - 32).
// A slice has a multiple of 32 chunks per row, so a warp's 32 chunks always lie in one row, and
// the number of chunks a thread owns is the same for the 32 lanes of a warp.
__device__ __forceinline__ int stream_lane() { return static_cast<int>(threadIdx.x) - 32; }

__device__ __forceinline__ int stream_count(int nchunks, int lane) {
    return lane >= 0 && lane < nchunks ? (nchunks - 1 - lane) / kStreamThreads + 1 : 0;
}

struct StreamSlice {
    const bf16_t* base;  // first element of the block's rows
    int row0, nrows;     // the rows, as the epilogue numbers them
    int nchunks;         // 16-byte chunks
};

// dataflow_splitk_o: the attention outputs (rows of W_o^T) block b computes and projects. The blocks
// form kKVHeads groups of nb / kKVHeads (launch.py ensures nb >= kKVHeads), group g splitting kv head
// g's kGqa * 128 outputs; blocks past the last group have none. (Half slices for the unit blocks,
// their other halves on those spare blocks, measured 0.992-0.993x at p <= 50 on the H200.)
__device__ __forceinline__ void o_split_rows(int b, int nb, int* row0, int* nrows) {
    const int per_group = nb / kKVHeads, g = b / per_group;
    if (g >= kKVHeads) {
        *row0 = 0;
        *nrows = 0;
        return;
    }
    split_range(kGqa * kHeadDim, b - g * per_group, per_group, row0, nrows);
    *row0 += g * kGqa * kHeadDim;
}

// Segment `seg` of this block's weight stream: per layer QKV, O, gate/up (interleaved rows), down;
// then the LM head. Row splits are those of the other variants.
// kSplit >= kSplitDown (dataflow_splitk): the down slice is the rows of W_down^T of the block's own
// SwiGLU outputs; kSplit == kSplitDownO (dataflow_splitk_o): the O slice is the rows of W_o^T of the
// attention outputs the block computes (o_split_rows).
// dataflow_splitk_o, while its attention units run on under a quarter of the grid (blocks [0, light),
// `light` the units): those blocks take fewer QKV and gate/up (so down) rows where that saves each
// of them a whole ring page and costs no other block one. The others take their uniform share
// rounded up to whole pages and the unit blocks share the rest. A straggler there holds up every
// consumer of the exchange after the GEMV. H200 (A/B at p = 1 / 100 / 200): 1.011x /
// 0.995x / 0.997x with the rest shared at every unit count; at p >= 64 (2 units per kv head and
// more) it saves the unit blocks no page, and this rule leaves the uniform split there.
#ifndef MK_UNIT_LIGHT
#define MK_UNIT_LIGHT 1
#endif

// split_range of `total` units (rows, or gate/up pairs; `page_units` to a ring page) with blocks
// [0, light) lighter, as above.
__device__ __forceinline__ void light_split(int total, int part, int parts, int light, int page_units, int* begin,
                                            int* count) {
    const int heavy = parts - light;
    const int cap = ceil_div(ceil_div(total, parts), page_units) * page_units;
    const int rest = light > 0 && heavy > 0 ? max(total - cap * heavy, 0) : total;
    if (!MK_UNIT_LIGHT || light <= 0 || heavy <= 0 ||
        ceil_div(ceil_div(rest, light), page_units) >= cap / page_units) {
        split_range(total, part, parts, begin, count);
    } else if (part < light) {
        split_range(rest, part, light, begin, count);
    } else {
        split_range(total - rest, part - light, heavy, begin, count);
        *begin += rest;
    }
}

template <int kSplit = 0>
__device__ __forceinline__ StreamSlice stream_slice(const MegakernelParams& P, int seg, int light = 0) {
    const int nb = gridDim.x, b = blockIdx.x;
    StreamSlice x;
    if (seg >= 4 * kLayers) {
        split_range(static_cast<int>(P.vocab), b, nb, &x.row0, &x.nrows);
        x.base = P.embed + static_cast<size_t>(x.row0) * kHidden;
        x.nchunks = x.nrows * (kHidden / 8);
        return x;
    }
    const size_t layer = static_cast<size_t>(seg / 4);
    switch (seg % 4) {
        case 0:
            light_split(kQkvRows, b, nb, light, kPageBytes / (2 * kHidden), &x.row0, &x.nrows);
            x.base = P.w_qkv + (layer * kQkvRows + x.row0) * kHidden;
            x.nchunks = x.nrows * (kHidden / 8);
            break;
        case 1:
            if constexpr (kSplit >= kSplitDownO) {
                o_split_rows(b, nb, &x.row0, &x.nrows);
                x.base = P.w_o_t + (layer * kQDim + x.row0) * kHidden;
                x.nchunks = x.nrows * (kHidden / 8);
            } else {
                split_range(kHidden, b, nb, &x.row0, &x.nrows);
                x.base = P.w_o + (layer * kHidden + x.row0) * kQDim;
                x.nchunks = x.nrows * (kQDim / 8);
            }
            break;
        case 2:
            light_split(kInter, b, nb, light, kPageBytes / (4 * kHidden), &x.row0, &x.nrows);
            x.row0 *= 2;
            x.nrows *= 2;
            x.base = P.w_gate_up + (layer * 2 * kInter + x.row0) * kHidden;
            x.nchunks = x.nrows * (kHidden / 8);
            break;
        default:
            if constexpr (kSplit >= kSplitDown) {  // the block's own SwiGLU outputs: gate/up's split
                light_split(kInter, b, nb, light, kPageBytes / (4 * kHidden), &x.row0, &x.nrows);
                x.base = P.w_down_t + (layer * kInter + x.row0) * kHidden;
                x.nchunks = x.nrows * (kHidden / 8);
            } else {
                split_range(kHidden, b, nb, &x.row0, &x.nrows);
                x.base = P.w_down + (layer * kHidden + x.row0) * kInter;
                x.nchunks = x.nrows * (kInter / 8);
            }
            break;
    }
    return x;
}

// The chunk slot u carries after segment `seg`: chunk u of the first later segment in which this
// thread owns more than u chunks (slot u carries the chunks k = u mod kStreamDepth of every
// segment), or nullptr at the end of the stream.
__device__ __forceinline__ const bf16_t* stream_next(const Shared& s, int seg, int u, int lane) {
    for (int t = seg + 1; t < kStreamSegments; ++t) {
        if (u < stream_count(s.seg_chunks[t], lane))
            return reinterpret_cast<const bf16_t*>(s.seg_base[t]) + static_cast<size_t>(lane + kStreamThreads * u) * 8;
    }
    return nullptr;
}

// The block's segment table (shared memory), then the first chunk of every slot in flight.
__device__ __forceinline__ void stream_start(const MegakernelParams& P, const Shared& s, uint4 (&w)[kStreamDepth]) {
    for (int i = threadIdx.x; i < kStreamSegments; i += kThreads) {
        const StreamSlice x = stream_slice(P, i);
        s.seg_base[i] = reinterpret_cast<unsigned long long>(x.base);
        s.seg_chunks[i] = x.nchunks;
    }
    __syncthreads();
    const int lane = stream_lane();
#pragma unroll
    for (int u = 0; u < kStreamDepth; ++u) {
        w[u] = make_uint4(0u, 0u, 0u, 0u);
        const bf16_t* p = stream_next(s, -1, u, lane);
        if (p != nullptr) w[u] = load_weights_16B(p);
    }
}

// Sums of kStreamDepth values over the 32 lanes of a warp (a reduce-scatter): halving the set of
// values each lane keeps at every butterfly step, lane l ends with the total of value
// l / (32 / kStreamDepth). The same sums as kStreamDepth warp_sum calls, added in another order.
__device__ __forceinline__ float warp_sum_transposed(const float (&v)[kStreamDepth]) {
    static_assert(kStreamDepth == 8, "the butterfly below is written for 8 values");
    const int lane = threadIdx.x & 31;
    float a[4], b[2];
    const bool hi16 = lane & 16, hi8 = lane & 8, hi4 = lane & 4;
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // lanes 16-31 keep values 4-7, lanes 0-15 values 0-3
        const float send = hi16 ? v[i] : v[i + 4];
        a[i] = (hi16 ? v[i + 4] : v[i]) + __shfl_xor_sync(kFullMask, send, 16);
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const float send = hi8 ? a[i] : a[i + 2];
        b[i] = (hi8 ? a[i + 2] : a[i]) + __shfl_xor_sync(kFullMask, send, 8);
    }
    const float send = hi4 ? b[0] : b[1];
    float c = (hi4 ? b[1] : b[0]) + __shfl_xor_sync(kFullMask, send, 4);
    c += __shfl_xor_sync(kFullMask, c, 2);
    c += __shfl_xor_sync(kFullMask, c, 1);
    return c;  // value index: 4 * hi16 + 2 * hi8 + hi4 = lane / 4
}

// Rows per GEMV tile of the stream: the segment sums fit kPartialFloats, a tile holds whole
// outputs, and a full tile is a whole number of rounds (so tiles end at the same k for every thread).
__host__ __device__ constexpr int stream_tile_rows(int chunks_per_row, int segs, int rows_per_out) {
    int rows = kPartialFloats / segs / rows_per_out * rows_per_out;
    while (rows > 0 && (rows * chunks_per_row) % kStreamRound != 0) rows -= rows_per_out;
    return rows;
}

// block_gemv's computation on segment `seg` of the stream: the slot registers w[] hold this
// segment's first chunks on entry and the following segments' on return.
template <int kK, int kRowsPerOut, typename Epilogue>
__device__ __forceinline__ float stream_gemv(uint4 (&w)[kStreamDepth], int seg, const StreamSlice& slice,
                                             const float* x_s, const Shared& s, Epilogue epilogue) {
    constexpr int kChunksPerRow = kK / 8;
    constexpr int kSegs = kK / 256;
    constexpr int kTileRows = stream_tile_rows(kChunksPerRow, kSegs, kRowsPerOut);
    constexpr int kTileK = kTileRows * kChunksPerRow / kStreamThreads;  // a thread's chunks per full tile
    static_assert(kTileRows >= kRowsPerOut, "stream GEMV tile holds no output");
    static_assert(kTileK % kStreamDepth == 0, "stream tiles must end on a round");
    const int tid = threadIdx.x;
    const int wlane = tid & 31;
    const int lane = stream_lane();
    const int n = stream_count(slice.nchunks, lane);
    const bf16_t* lane_base = slice.base + 8 * max(lane, 0);  // chunk k: lane_base + k * kStreamThreads * 8
    float* part_s = s.partial;
    float epilogue_sum = 0.f;

    for (int tile0 = 0, k_begin = 0; tile0 < slice.nrows; tile0 += kTileRows, k_begin += kTileK) {
        const int rows = min(kTileRows, slice.nrows - tile0);
        const int k_end = min(k_begin + kTileK, n);
        const int tile_chunk0 = tile0 * kChunksPerRow;
        for (int k0 = k_begin; k0 < k_end; k0 += kStreamDepth) {
            float dot[kStreamDepth];
#pragma unroll
            for (int u = 0; u < kStreamDepth; ++u) {
                const int k = k0 + u;
                dot[u] = 0.f;
                if (k < k_end) {  // uniform per warp (stream_count is)
                    const unsigned col8 = static_cast<unsigned>(lane + kStreamThreads * k - tile_chunk0) % kChunksPerRow;
                    const float4 xlo = reinterpret_cast<const float4*>(x_s)[col8];
                    const float4 xhi = reinterpret_cast<const float4*>(x_s + kVecHalf)[col8];
                    dot[u] = dot8_bf16_f32(w[u], xlo, xhi);
                    if (k + kStreamDepth < n) {
                        w[u] = load_weights_16B(lane_base + static_cast<size_t>(k + kStreamDepth) * (kStreamThreads * 8));
                    } else {  // the slot moves on to a later segment (or the stream ends)
                        const bf16_t* next = stream_next(s, seg, u, lane);
                        if (next != nullptr) w[u] = load_weights_16B(next);
                    }
                }
            }
            // The warp's kStreamDepth segment sums at once: lane l ends with the sum of slot
            // (l / (32 / kStreamDepth)), in 9 shuffles instead of 8 x 5.
            const float sum = warp_sum_transposed(dot);
            constexpr int kLanesPerSum = 32 / kStreamDepth;
            const int u = wlane / kLanesPerSum;
            const int k = k0 + u;
            if (wlane % kLanesPerSum == 0 && k < k_end) {
                // Any lane's chunk lies in the warp's row and 256-column segment.
                const unsigned c = static_cast<unsigned>(lane + kStreamThreads * k - tile_chunk0);
                const unsigned r = c / kChunksPerRow;
                const unsigned col8 = c - r * kChunksPerRow;
                part_s[(col8 >> 5) * kTileRows + r] = sum;
            }
        }
        __syncthreads();
        const int outputs = rows / kRowsPerOut;
        for (int o = tid; o < outputs; o += kThreads) {
            float v[kRowsPerOut];
#pragma unroll
            for (int q = 0; q < kRowsPerOut; ++q) {
                float acc = 0.f;
#pragma unroll
                for (int sg = 0; sg < kSegs; ++sg) acc += part_s[sg * kTileRows + o * kRowsPerOut + q];
                v[q] = acc;
            }
            epilogue_sum += epilogue(slice.row0 + tile0 + o * kRowsPerOut, v);
        }
        __syncthreads();  // part_s is rewritten by the next tile
    }
    return epilogue_sum;
}

}  // namespace mk
