// Phase inputs written by other blocks: plain fp32 buffers read after a grid barrier (PlainIO), or
// LL words (value + flag) in the dataflow variants (LLIO, LLBuffers, ll_flag), and the probes a
// warp gathers before a block reads such words (ll_gather_probes).
#pragma once

#include "mk_device.cuh"
#include "mk_config.cuh"

namespace mk {

// ---- phase inputs written by other blocks: plain after a grid barrier, or LL words (dataflow) ---
// Every variant but `dataflow` exchanges q/k/v and the attention output through fp32 buffers that
// other blocks read after a grid barrier (PlainIO). `dataflow` has no grid barriers: each value
// travels as one 64-bit word (value, flag) whose flag names the launch, layer and phase that wrote
// it, and a reader spins until the flag it expects appears (NCCL's LL protocol). A naturally
// aligned 64-bit store or load is single-copy atomic, so a reader that sees the flag sees the value
// written with it; no fence, counter or barrier sits between producer and consumer.
struct PlainIO {
    static constexpr bool kLL = false;
    __device__ __forceinline__ float load(const float* p) const { return load_l2_f32(p); }
    __device__ __forceinline__ void store(float* p, float v) const { *p = v; }
    // A warp's head of 128 floats: x[j] = head[lane + 32 j].
    __device__ __forceinline__ void load_head(const float* head, float (&x)[4]) const {
        const int lane = threadIdx.x & 31;
#pragma unroll
        for (int j = 0; j < 4; ++j) x[j] = load(head + lane + 32 * j);
    }
};

// The LL twin of an fp32 buffer: element i of `base` travels as words[i] with `flag`. The word of
// float p is at 2 * p + delta (8-byte words for 4-byte floats), one 64-bit value instead of two
// pointers (registers are scarce in the attention unit).
struct LLIO {
    static constexpr bool kLL = true;
    long long delta;
    unsigned flag;
    __device__ __forceinline__ LLIO(const float* base, unsigned long long* words, unsigned flag_)
        : delta(reinterpret_cast<long long>(words) - 2 * reinterpret_cast<long long>(base)), flag(flag_) {}
    __device__ __forceinline__ unsigned long long* word(const float* p) const {
        return reinterpret_cast<unsigned long long*>(2 * reinterpret_cast<long long>(p) + delta);
    }
    __device__ __forceinline__ float load(const float* p) const { return ll_load(word(p), flag); }
    __device__ __forceinline__ void store(float* p, float v) const { ll_store(word(p), v, flag); }
    // PlainIO::load_head with the four words in flight together. Loading and polling each in turn
    // put up to four L2 round trips in front of the attention: on the H200, dataflow_splitk_o
    // 0.992x / 0.980x / 0.988x at p = 1 / 200 / 1000 that way.
    __device__ __forceinline__ void load_head(const float* head, float (&x)[4]) const {
        const int lane = threadIdx.x & 31;
        unsigned long long w[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) w[j] = ll_load_word(word(head + lane + 32 * j));
        ll_wait_words(w, flag, [&](int j) { return word(head + lane + 32 * j); });
#pragma unroll
        for (int j = 0; j < 4; ++j) x[j] = ll_word_value(w[j]);
    }
};

// The dataflow variant's LL buffer (MegakernelParams::ll): the residual stream, q/k/v, the
// attention output, the SwiGLU activations, the per-block sums of squares, then the attention
// units' records (dataflow_splitk_o; the twin of attn_partial).
struct LLBuffers {
    unsigned long long *residual, *qkv, *attn_out, *act, *sumsq, *partial;
};
__device__ __forceinline__ LLBuffers ll_buffers(const MegakernelParams& P) {
    LLBuffers b;
    b.residual = P.ll;
    b.qkv = b.residual + kHidden;
    b.attn_out = b.qkv + kQkvRows;
    b.act = b.attn_out + kQDim;
    b.sumsq = b.act + kInter;
    b.partial = b.sumsq + gridDim.x;
    return b;
}

// Flags: unique per launch (counters[kLaunchSlot], advanced once per launch), layer and exchange.
enum LLPhase { kLLQkv = 0, kLLAttnOut = 1, kLLResidualO = 2, kLLAct = 3, kLLResidualDown = 4 };
__device__ __forceinline__ unsigned ll_flag(unsigned launch, int layer, int phase) {
    return ((launch + 1u) << 10) + static_cast<unsigned>(layer * 5 + phase);
}
static_assert(kLayers * 5 <= 1024, "LL flags hold layer * 5 + phase in 10 bits");

// Polling LL words from every thread of every block would flood L2 with reloads while the producers
// are still at work (measured: the GEMVs beside such polls slowed by up to 70%). So one warp per
// block, the ring's issuing warp, first gathers a few probe words, at most one per producer,
// written last or nearly last, and keeps the weight ring paced while it waits (`pump`); then every
// thread loads its words once, and only a word still stale is polled on its own. Returns the sum
// of the probes' values in lane 0 .. 31 (each lane its share). `index(i)`: the word of probe i.
constexpr int kMaxProbesPerLane = 5;  // probes: at most one per block, so grids of up to 160 blocks

template <class Index, class Pump>
__device__ __forceinline__ float ll_gather_probes(const unsigned long long* words, int count, unsigned flag,
                                                  Index index, Pump pump) {
    const int lane = threadIdx.x & 31;
    unsigned long long w[kMaxProbesPerLane];
#pragma unroll
    for (int k = 0; k < kMaxProbesPerLane; ++k) {
        const int i = lane + 32 * k;
        w[k] = i < count ? ll_load_word(words + index(i)) : 0ull;
    }
    for (;;) {
        bool ready = true;
#pragma unroll
        for (int k = 0; k < kMaxProbesPerLane; ++k) {
            const int i = lane + 32 * k;
            if (i < count && !ll_carries(w[k], flag)) {
                w[k] = ll_load_word(words + index(i));
                ready = ready && ll_carries(w[k], flag);
            }
        }
        if (warp_all(ready)) break;
        pump();  // uniform over the warp: every lane keeps the same ring state
        ll_backoff();
    }
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < kMaxProbesPerLane; ++k) {
        if (lane + 32 * k < count) sum += ll_word_value(w[k]);
    }
    return sum;
}

}  // namespace mk
