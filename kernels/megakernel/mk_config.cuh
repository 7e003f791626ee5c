// The decode megakernel's compile-time configuration: the model shape (macros, defaults:
// Qwen3-0.6B; launch.py passes them with -D), the constants derived from it, the block size and
// tiling constants, the slots of counters[], and MegakernelParams, the kernel's parameters.
#pragma once

#include "mk_device.cuh"

#ifndef MK_LAYERS
#define MK_LAYERS 28
#endif
#ifndef MK_HIDDEN
#define MK_HIDDEN 1024
#endif
#ifndef MK_Q_HEADS
#define MK_Q_HEADS 16
#endif
#ifndef MK_KV_HEADS
#define MK_KV_HEADS 8
#endif
#ifndef MK_INTERMEDIATE
#define MK_INTERMEDIATE 3072
#endif
#ifndef MK_RMS_EPS
#define MK_RMS_EPS 1e-6f
#endif

namespace mk {

constexpr int kLayers = MK_LAYERS;
constexpr int kHidden = MK_HIDDEN;
constexpr int kQHeads = MK_Q_HEADS;
constexpr int kKVHeads = MK_KV_HEADS;
constexpr int kInter = MK_INTERMEDIATE;
constexpr float kRmsEps = MK_RMS_EPS;
constexpr int kHeadDim = 128;
constexpr int kGqa = kQHeads / kKVHeads;        // query heads per kv head
constexpr int kQDim = kQHeads * kHeadDim;
constexpr int kGroupRows = (kGqa + 2) * kHeadDim;  // packed QKV rows of one kv head: its q heads, k, v
constexpr int kQkvRows = kKVHeads * kGroupRows;
constexpr float kAttnScale = 0.08838834764831845f;  // 1 / sqrt(128)

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kGemvUnroll = 8;          // 16-byte weight loads in flight per thread
constexpr int kAttnTile = kThreads / 16;  // keys per tile: 16 threads x 8 dims cover one key row
constexpr int kAttnUnroll = 4;          // key/value tiles loaded before first use (2 in the stream variant)
constexpr int kAttnMaxChunk = 1024;     // most keys one attention unit takes
constexpr int kPartialStride = kHeadDim + 2;  // split-attention record: o[128], max, sum
constexpr int kGridWordSlot = 2 * kKVHeads;   // counters[]: the own grid barrier's word
constexpr int kLaunchSlot = 2 * kKVHeads + 1; // counters[]: launches of the dataflow variants so far
constexpr int kAccReadSlot = 2 * kKVHeads + 2; // counters[]: blocks done reading the last layer's accumulator
constexpr int kLmClaimSlot = 2 * kKVHeads + 3; // counters[]: LM-head chunks claimed (MK_LM_DYNAMIC)
constexpr int kLmDoneSlot = 2 * kKVHeads + 4;  // counters[]: blocks done with the LM head (MK_LM_DYNAMIC)
// Fewest keys per split-attention unit in the dataflow variants (a whole number of tiles): every
// further unit costs the combine a record, and the combine itself a round trip to L2. 64 keys (the
// most attention_unit_preloaded takes) measured best on the H200 (at p=50 0.709 vs
// 0.739 ms/token with 32; 128 slower at every position from 10 to 1000, its units no longer preload).
#ifndef MK_ATTN_MIN_CHUNK
#define MK_ATTN_MIN_CHUNK 64
#endif
constexpr int kAttnMinChunk = MK_ATTN_MIN_CHUNK;
// dataflow_splitk_o aims at blocks / 8 / MK_SPLITK_O_UNITS_DIVISOR units per kv head (the others at
// blocks / 8): every O block of the head merges every unit's record, so long sequences may want
// fewer, longer units. On the H200 (ms at p = 100 / 200 / 1000): 64-key units at most
// 16 per head 0.678 / 0.694 / 0.766, at least 128 keys 0.706 / 0.709 / 0.748, so a divisor of 2
// (8 units per head) was kept; once a unit's q/k/v loads flew together (LLIO::load_head),
// 16 per head measured 1.004x / 1.003x / 1.008x faster than 8 at p = 1 / 200 / 1000: 1 again.
#ifndef MK_SPLITK_O_UNITS_DIVISOR
#define MK_SPLITK_O_UNITS_DIVISOR 1
#endif
constexpr int kSplitOUnitsDivisor = MK_SPLITK_O_UNITS_DIVISOR;
static_assert(kSplitOUnitsDivisor >= 1, "MK_SPLITK_O_UNITS_DIVISOR: at least 1");

__host__ __device__ constexpr int imax(int a, int b) { return a > b ? a : b; }
template <int N> struct IntTag { static constexpr int value = N; };  // an int as a type (template lambdas)
constexpr int kMaxK = imax(kHidden, imax(kQDim, kInter));
constexpr int kPartialFloats = imax(4096, kWarps * kGqa * kHeadDim);

static_assert(kQHeads % kKVHeads == 0, "query heads must be a multiple of kv heads");
static_assert(kHidden % 256 == 0 && kQDim % 256 == 0 && kInter % 256 == 0,
              "GEMV inner dimensions must be multiples of 256 (32 lanes x 8 bf16)");
static_assert(kHidden % 8 == 0, "hidden size must be a multiple of 8");
static_assert(kGqa + 2 <= kWarps, "the fused attention prologue needs one warp per q head plus two");
static_assert(kGqa * kHeadDim <= kThreads, "attention output: one thread per (q head, dim)");
static_assert(kAttnMaxChunk % kAttnTile == 0, "attention chunks are whole tiles");
static_assert(kAttnMinChunk % kAttnTile == 0 && kAttnMinChunk >= kAttnTile && kAttnMinChunk <= kAttnMaxChunk,
              "MK_ATTN_MIN_CHUNK: a whole number of 32-key tiles, at most 1024");

// ---- kernel parameters: passed by value; launch.py PARAM_FIELDS lists the same fields in order.
struct MegakernelParams {
    const bf16_t* embed;       // [vocab][hidden], also the (tied) LM head
    const bf16_t* w_qkv;       // [layers][kv_heads][(gqa + 2) * 128][hidden]: per kv head its q heads, k, v
    const bf16_t* w_o;         // [layers][hidden][q_heads * 128]
    const bf16_t* w_gate_up;   // [layers][2 * inter][hidden]: row 2i = gate_i, row 2i + 1 = up_i
    const bf16_t* w_down;      // [layers][hidden][inter]
    const bf16_t* norm_in;     // [layers][hidden]
    const bf16_t* norm_post;   // [layers][hidden]
    const bf16_t* norm_q;      // [layers][128]
    const bf16_t* norm_k;      // [layers][128]
    const bf16_t* norm_final;  // [hidden]
    const float* rope;         // [max_seq][128]: cos(p * f_i) at [i], sin(p * f_i) at [64 + i], i < 64
    bf16_t* k_cache;           // [layers][kv_heads][max_seq][128]
    bf16_t* v_cache;           // [layers][kv_heads][max_seq][128]
    float* logits;             // [vocab]
    float* residual;           // [hidden]
    float* normed;             // [hidden]: RMSNorm output when block 0 computes it (baseline)
    float* qkv;                // [kv_heads][(gqa + 2) * 128]: raw projections, same order as w_qkv rows
    float* q_rot;              // [q_heads][128]: normalised, rotated q (variants without fused QK)
    float* attn_partial;       // [kv_heads][units][gqa][130]: split-attention records
    float* attn_out;           // [q_heads * 128]
    float* act;                // [inter]: silu(gate) * up
    float* sumsq_partial;      // [blocks]: per-block sum of squares of the residual rows it wrote
    unsigned* counters;        // [2 * kv_heads + 5]: split-attention arrivals, head-group barrier words,
                               // the grid barrier word (MK_OWN_GRID_BARRIER), the launch count (dataflow),
                               // the last accumulator's readers (dataflow_splitk)
                               // and the LM head's claimed chunks and finished blocks (MK_LM_DYNAMIC)
    unsigned long long* ll;    // [hidden + qkv rows + q_heads * 128 + inter + blocks + kv_heads * units * gqa * 130]:
                               // LL words (dataflow; the last part: dataflow_splitk_o's unit records)
    const bf16_t* w_down_t;    // [layers][inter][hidden]: w_down transposed (dataflow_splitk)
    unsigned long long* down_acc;  // [2 * layers][hidden][16]: fixed-point accumulators, zero between launches
    const bf16_t* w_o_t;       // [layers][q_heads * 128][hidden]: w_o transposed (dataflow_splitk_o)
    long long vocab;
    long long max_seq;
};

}  // namespace mk
