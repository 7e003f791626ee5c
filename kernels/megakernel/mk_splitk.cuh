// The projections split over K (dataflow_splitk: down; dataflow_splitk_o: also O): ring_splitk
// computes the block's partial output, which goes into a fixed-point accumulator in L2.
#pragma once

#include "mk_device.cuh"
#include "mk_config.cuh"
#include "mk_shared.cuh"
#include "mk_ring.cuh"
#include "mk_attention.cuh"

namespace mk {

// ---- a projection split over K (dataflow_splitk: down; dataflow_splitk_o: also O) ---------------
// The block's down slice is the rows of W_down^T for its own SwiGLU outputs a_i (act_s, computed by
// its gate/up epilogue), so its share of out = W_down a is the full-length partial
// sum_i a_i W_down^T[i], and no block waits for another's activations (O: the rows of W_o^T for the
// attention outputs it merged). Thread t takes 16-byte column
// chunk t % kDownChunks of rows t / kDownChunks, + kDownRowLanes, ... (a warp reads 512 contiguous
// bytes of a row; a_i is a broadcast), through the same ring pages as every other GEMV. Leaves the
// block's partial sums, per row lane, in s.partial[lane * kHidden + j]; ends with a block barrier.
constexpr int kDownChunks = kHidden / 8;
constexpr int kDownRowLanes = kThreads / kDownChunks;
static_assert(kDownChunks <= kThreads, "dataflow_splitk: a row of W_down^T must fit one chunk per thread");
static_assert(kDownRowLanes * kHidden <= kPartialFloats, "dataflow_splitk: the row lanes' partials must fit s.partial");
static_assert(ceil_div_constexpr(kInter, kKVHeads) <= kGqa * kAttnMaxChunk,
              "dataflow_splitk: a block's SwiGLU outputs must fit s.scores");

template <bool kPaced, int kSplit>
__device__ __forceinline__ void ring_splitk(Ring& ring, int seg, const float* act_s, const Shared& s) {
    constexpr int kPageRows = ring_page_rows(kHidden, 1);
    const int tid = threadIdx.x;
    const int chunk = tid % kDownChunks, row_lane = tid / kDownChunks;
    const bool active = row_lane < kDownRowLanes;  // kHidden / 8 need not divide kThreads
    const int rows_total = s.ring_rows[seg].y;
    float acc[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[i] = 0.f;
    __syncthreads();  // act_s, written by the gate/up epilogue
#ifdef MK_TRACE
    long long waited = 0;
#endif
    for (int r0 = 0; r0 < rows_total; r0 += kRingGroup * kPageRows) {
        const int rows = min(kRingGroup * kPageRows, rows_total - r0);
        const int pages = ceil_div(rows, kPageRows);
#ifdef MK_TRACE
        const long long wait_start = clock64();
#endif
        ring_group_acquire<kPaced, kSplit>(s, ring, pages);
#ifdef MK_TRACE
        waited += clock64() - wait_start;
#endif
        if (active) {
            const uint4* ring_chunks = reinterpret_cast<const uint4*>(s.ring);
#pragma unroll 4
            for (int r = row_lane; r < rows; r += kDownRowLanes) {
                const int page = r / kPageRows;
                const uint4 w = ring_chunks[((ring.consumed + page) % kRingSlots) * (kPageBytes / 16) +
                                            (r - page * kPageRows) * kDownChunks + chunk];
                axpy8_bf16(acc, act_s[r0 + r], w);
            }
        }
        __syncthreads();  // the group's slots are free
        ring_group_release<kPaced, kSplit>(s, ring, pages, false);
    }
    if (active) {
#pragma unroll
        for (int i = 0; i < 8; ++i) s.partial[row_lane * kHidden + chunk * 8 + i] = acc[i];
    }
    MK_MARK_VALUE((seg / 4) * MK_TRACE_EVENTS_PER_LAYER + 15 + seg % 4, waited);  // "ring wait o / down"
    __syncthreads();
}


// The accumulators' layout (tuning macros; MegakernelParams::down_acc holds kAccWordsPerOutput
// words per output and accumulator slot: a layer's down sums, slot `layer` in dataflow_splitk, and
// in dataflow_splitk_o its O sums in slot 2 layer and its down sums in slot 2 layer + 1):
// kAccCopies copies of each slot's vector (block b adds into copy
// b % kAccCopies, a reader adds the copies up), consecutive outputs kAccStride words apart; with
// MK_ACC_BULK (sm_90) a block stages its words in shared memory (s.scores) and adds them all with
// one bulk reduction (cp.reduce.async.bulk) instead of one atomic per output.
#ifndef MK_ACC_STRIDE
#define MK_ACC_STRIDE 1
#endif
// Measured on the H200 (dataflow_splitk vs dataflow at p=1 / 200): one copy, stride 1,
// one atomic per output 1.005x / 1.034x; stride 4 0.968x / 0.986x; stride 16 0.930x / 0.957x; 4
// copies 0.979x / 1.006x; bulk 1.021x / 1.039x. Spreading the words over more L2 lines or copies
// only adds requests: what costs is the number of requests, which the bulk reduction cuts to a
// few per block.
#ifndef MK_ACC_BULK
#define MK_ACC_BULK 1
#endif
constexpr int kAccStride = MK_ACC_STRIDE;
#if !defined(MK_EMULATE) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
constexpr bool kAccBulk = false;  // no bulk reduction before sm_90: one atomic per output
#else
// The staging buffer is s.scores: shapes whose accumulator vector does not fit (hidden > 1024 with
// 2 q heads per kv head) add with one atomic per output instead.
constexpr bool kAccBulk = MK_ACC_BULK != 0 && kHidden * 8 <= kGqa * kAttnMaxChunk * 4;
#endif
// With the bulk reduction, what costs is then the L2 lines' serialised adds, 132 blocks' into the
// same 64 lines: two copies halve them for twice the reader's loads. H200
// (dataflow_splitk_o at p = 1 / 200 / 1000 against one copy): 2 copies 1.038x / 1.020x / 1.021x,
// 3 copies 1.034x / 1.016x / 1.016x, 4 copies 1.022x / 1.002x / 1.003x. With one atomic per output
// one copy measured best (above).
#ifndef MK_ACC_COPIES
#define MK_ACC_COPIES (kAccBulk ? 2 : 1)
#endif
constexpr int kAccCopies = MK_ACC_COPIES;
constexpr int kAccWordsPerOutput = 16;
static_assert(kAccCopies >= 1 && kAccCopies <= 4 && kAccStride >= 1 && kAccCopies * kAccStride <= kAccWordsPerOutput,
              "MK_ACC_COPIES (1-4) x MK_ACC_STRIDE must fit the 16 words per output of down_acc");
static_assert(!kAccBulk || kAccStride == 1, "MK_ACC_BULK: contiguous words");

__device__ __forceinline__ unsigned long long* acc_word(const MegakernelParams& P, int slot, int copy, int j) {
    return P.down_acc + static_cast<size_t>(slot) * kHidden * kAccWordsPerOutput +
           (static_cast<size_t>(copy) * kHidden + j) * kAccStride;
}

// Blocks that add into copy c of an accumulator (blocks c, c + kAccCopies, ...).
__device__ __forceinline__ unsigned acc_blocks(int copy) {
    const int nb = gridDim.x;
    return copy < nb ? static_cast<unsigned>((nb - 1 - copy) / kAccCopies + 1) : 0u;
}

// The block's partial output (ring_splitk's row lanes, summed) into accumulator `slot`.
__device__ __forceinline__ void acc_publish(const MegakernelParams& P, int slot, const Shared& s) {
    const int copy = static_cast<int>(blockIdx.x) % kAccCopies;
    unsigned long long* staged = reinterpret_cast<unsigned long long*>(s.scores);
    for (int j = threadIdx.x; j < kHidden; j += kThreads) {
        float total = 0.f;
#pragma unroll
        for (int lane = 0; lane < kDownRowLanes; ++lane) total += s.partial[lane * kHidden + j];
        if constexpr (kAccBulk) {
            staged[j] = acc_contribution(total);
        } else {
            acc_add(acc_word(P, slot, copy, j), total);
        }
    }
    if constexpr (kAccBulk) {
        bulk_source_fence();
        __syncthreads();
        if (threadIdx.x == 0) bulk_add_u64(acc_word(P, slot, copy, 0), staged, kHidden);
    }
}

// Zeroes this block's share (split_range of the outputs) of every copy of accumulator `slot`, or all
// of it.
__device__ __forceinline__ void acc_clear(const MegakernelParams& P, int slot, bool all) {
    int r0 = 0, nr = kHidden;
    if (!all) split_range(kHidden, blockIdx.x, gridDim.x, &r0, &nr);
    for (int i = r0 + threadIdx.x; i < r0 + nr; i += kThreads) {
#pragma unroll
        for (int c = 0; c < kAccCopies; ++c) acc_zero(acc_word(P, slot, c, i));
    }
}

}  // namespace mk
