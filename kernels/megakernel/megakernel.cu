// One persistent cooperative launch per decode token for a Qwen3-shaped model (batch 1).
//
// Every block of the grid walks the same phase list; grid_sync() (cooperative_groups) separates
// phases whose inputs another block writes, except in the dataflow variants (7-9), where each value
// another block needs travels as an LL word (value + flag) or is summed in an L2 accumulator, and
// the consumer waits for exactly those words. The ten variants share this source and one launch
// harness; they differ in the Variant<V> switches below (README.md: syncs per layer). Variants 0-4
// run decode_step; the stream (5), ring (6) and dataflow (7: dataflow, 8: dataflow_splitk, 9:
// dataflow_splitk_o) variants run decode_step_stream, with their own GEMVs (stream_gemv: a
// register pipeline; ring_gemv: a shared-memory ring filled by bulk copies) and attention units.
//
// Precision contract (reference.py follows it):
//   weights, embedding, KV cache: bf16. Everything else is fp32: the residual stream, every
//   activation (GEMV inputs included), every sum. The only rounding to bf16 is K and V on their
//   way into the cache. Logits are written in fp32.
//
// Model shape: compile-time macros (defaults: Qwen3-0.6B); launch.py passes them with -D.
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
// most attention_unit_preloaded takes) measured best on the H200 (2026-11-22: at p=50 0.709 vs
// 0.739 ms/token with 32; 128 slower at every position from 10 to 1000, its units no longer preload).
#ifndef MK_ATTN_MIN_CHUNK
#define MK_ATTN_MIN_CHUNK 64
#endif
constexpr int kAttnMinChunk = MK_ATTN_MIN_CHUNK;
// dataflow_splitk_o aims at blocks / 8 / MK_SPLITK_O_UNITS_DIVISOR units per kv head (the others at
// blocks / 8): every O block of the head merges every unit's record, so long sequences may want
// fewer, longer units. On the H200, 2026-11-22 (ms at p = 100 / 200 / 1000): 64-key units at most
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

// ---- variants ------------------------------------------------------------------------------
// redundant_norm: every block computes the RMSNorm it needs (else block 0 does, then a grid sync).
// head_groups:    a fixed group of blocks per kv head runs its QKV rows, QK-norm/RoPE and attention,
//                 with group barriers in between instead of grid syncs.
// fused_qk:       QK-norm + RoPE + KV-cache write run in the attention prologue, not in a phase.
// norm_partials:  O/down epilogues publish per-block sums of squares; the next RMSNorm adds them
//                 instead of reducing the whole vector again.
// prefetch:       L2 prefetch of each block's next weight slice and KV range, and ahead in the LM head.
// stream:         one register pipeline carries every weight load of the step, across phases and
//                 grid barriers (stream_gemv); attention issues its K/V loads before the queries
//                 are ready; the block keeps its residual rows in shared memory.
// ring:           the stream variant's step, but every weight byte goes through a ring of pages in
//                 shared memory, filled by asynchronous copies (bulk copies on sm_90) that run up to
//                 kRingSlots pages ahead of the GEMVs, across phases and grid barriers.
// dataflow:       the ring variant with no grid barrier: every value another block needs travels
//                 as an LL word (value + flag), and each consumer waits for exactly the values it
//                 reads (q/k/v of its head, the whole attention output, residual, activations).
// splitk:         the down projection split over K: each block multiplies its own SwiGLU outputs
//                 by its rows of W_down^T and adds the partial vector into an L2 accumulator with
//                 integer atomics, so the activations are never exchanged (4 exchanges per layer).
// splitk_o:       splitk, and the O projection split over K too: the attention units leave records
//                 (o, max, sum) as LL words, each block merges those of the attention outputs its
//                 rows of W_o^T need (no combine) and adds its partial into a second accumulator.
template <int V> struct Variant;
template <> struct Variant<0> {  // baseline: 8 grid syncs per layer
    static constexpr bool redundant_norm = false, head_groups = false, fused_qk = false,
                          norm_partials = false, prefetch = false, stream = false, ring = false, dataflow = false,
                          splitk = false, splitk_o = false;
};
template <> struct Variant<1> {  // redundant RMSNorm: 6
    static constexpr bool redundant_norm = true, head_groups = false, fused_qk = false,
                          norm_partials = false, prefetch = false, stream = false, ring = false, dataflow = false,
                          splitk = false, splitk_o = false;
};
template <> struct Variant<2> {  // head-based: 4 grid syncs + 2 group barriers
    static constexpr bool redundant_norm = true, head_groups = true, fused_qk = false,
                          norm_partials = false, prefetch = false, stream = false, ring = false, dataflow = false,
                          splitk = false, splitk_o = false;
};
template <> struct Variant<3> {  // fused phases: 5
    static constexpr bool redundant_norm = true, head_groups = false, fused_qk = true,
                          norm_partials = true, prefetch = false, stream = false, ring = false, dataflow = false,
                          splitk = false, splitk_o = false;
};
template <> struct Variant<4> {  // fused phases + L2 prefetch: 5
    static constexpr bool redundant_norm = true, head_groups = false, fused_qk = true,
                          norm_partials = true, prefetch = true, stream = false, ring = false, dataflow = false,
                          splitk = false, splitk_o = false;
};
template <> struct Variant<5> {  // fused phases + weight stream across the barriers: 5
    static constexpr bool redundant_norm = true, head_groups = false, fused_qk = true,
                          norm_partials = true, prefetch = false, stream = true, ring = false, dataflow = false,
                          splitk = false, splitk_o = false;
};
template <> struct Variant<6> {  // fused phases + weight pages in a shared-memory ring, copied ahead: 5
    static constexpr bool redundant_norm = true, head_groups = false, fused_qk = true,
                          norm_partials = true, prefetch = false, stream = false, ring = true, dataflow = false,
                          splitk = false, splitk_o = false;
};
template <> struct Variant<7> {  // the ring's phases, exchanging LL words instead of grid barriers: 0
    static constexpr bool redundant_norm = true, head_groups = false, fused_qk = true,
                          norm_partials = true, prefetch = false, stream = false, ring = true, dataflow = true,
                          splitk = false, splitk_o = false;
};
template <> struct Variant<8> {  // dataflow, the down projection split over K and summed in L2: 0
    static constexpr bool redundant_norm = true, head_groups = false, fused_qk = true,
                          norm_partials = true, prefetch = false, stream = false, ring = true, dataflow = true,
                          splitk = true, splitk_o = false;
};
template <> struct Variant<9> {  // dataflow_splitk, the O projection split over K too: 0
    static constexpr bool redundant_norm = true, head_groups = false, fused_qk = true,
                          norm_partials = true, prefetch = false, stream = false, ring = true, dataflow = true,
                          splitk = true, splitk_o = true;
};

// Which projections a ring variant splits over K (the template argument kSplit of the ring code).
constexpr int kSplitNone = 0, kSplitDown = 1, kSplitDownO = 2;
template <class T>
constexpr int kSplitOf = T::splitk_o ? kSplitDownO : (T::splitk ? kSplitDown : kSplitNone);

// ---- shared memory (dynamic; launch.py reads mk_shared_bytes for the launch) ------------------
constexpr int kMiscFloats = 64;
constexpr int kStatsSlot = 32;  // misc[32 ..): softmax (max, sum) per q head
constexpr int kLmSlotRowSlot = 48;  // misc[48 ..): the first LM-head row of the page in each ring slot, -1: the end
constexpr int kLmVocabSlot = 53;    // misc[53]: the vocabulary size (MK_LM_DYNAMIC's issuing warp)
constexpr int kLmClaimPtrSlot = 54; // misc[54..55]: &counters[kLmClaimSlot] (MK_LM_DYNAMIC's issuing warp)
constexpr int kUnitTasksSlot = 61;  // misc[61]: an attention unit's q/k/v tasks done (MK_UNIT_PUMP), a count
constexpr int kPumpSlot = 62;   // misc[62]: the last wait the probing warp saw end (MK_PUMP_WARP)
constexpr int kFlagSlot = 63;   // misc[63]: "this block combines" flag
static_assert(kStatsSlot + 2 * kGqa <= kLmSlotRowSlot, "softmax statistics overlap the LM head's slots");

// The weight stream (stream variant): every GEMV slice a block reads in one step, in order: per
// layer QKV, O, gate/up, down, then the LM head.
constexpr int kStreamSegments = 4 * kLayers + 1;

__host__ __device__ constexpr int round16(int bytes) { return (bytes + 15) / 16 * 16; }
constexpr int kVecBytes = round16(kMaxK * 4);
constexpr int kPartialBytes = kPartialFloats * 4;
constexpr int kScoresBytes = kGqa * kAttnMaxChunk * 4;
constexpr int kQBytes = kGqa * kHeadDim * 4;
// Regions below are used by the stream variant only (the other variants' regions keep their offsets).
constexpr int kKvRowBytes = 2 * kHeadDim * 2;                        // the K and V rows written this step (bf16)
constexpr int kOwnBytes = round16(kHidden * 4);                       // the block's residual rows
constexpr int kSegBaseBytes = round16(kStreamSegments * 8);           // stream segment addresses
constexpr int kSegChunksBytes = round16(kStreamSegments * 4);         // stream segment sizes (16-byte chunks)
constexpr int kSharedBytes = kVecBytes + kPartialBytes + kScoresBytes + kQBytes + kMiscFloats * 4 + kKvRowBytes +
                             kOwnBytes + kSegBaseBytes + kSegChunksBytes;
// The ring variant adds the weight ring after the regions above (128-byte aligned) and one mbarrier
// per slot: 5 x 32 KB keeps 160 KB per SM in flight, and the largest GEMV slice of a layer (gate/up,
// 96 KB per SM on 132 blocks) fits whole.
constexpr int kRingSlots = 5;
static_assert(kLmSlotRowSlot + kRingSlots <= kLmVocabSlot && kLmClaimPtrSlot % 2 == 0,
              "the LM head's slot rows overlap misc's other slots");
#ifndef MK_PAGE_BYTES
#define MK_PAGE_BYTES 32768
#endif
constexpr int kPageBytes = MK_PAGE_BYTES;
constexpr int kRingOffset = (kSharedBytes + 127) / 128 * 128;
constexpr int kRingTableBytes = round16(kStreamSegments * 8);  // per segment: first row, rows (int2)
// Then (128-byte aligned) the keys of the block's attention unit, copied in at the start of their layer
// (MK_UNIT_KEYS_SHARED: at most 2 tiles of 32 keys), and their mbarrier.
constexpr int kUnitKeysOffset = (kRingOffset + kRingSlots * kPageBytes + kRingSlots * 8 + kRingTableBytes + 127) / 128 * 128;
constexpr int kUnitKeysBytes = 2 * (kThreads / 16) * kHeadDim * 2;
constexpr int kSharedBytesRing = kUnitKeysOffset + kUnitKeysBytes + 16;

template <int kVariant>
__host__ __device__ constexpr int shared_bytes_of() { return Variant<kVariant>::ring ? kSharedBytesRing : kSharedBytes; }

struct Shared {
    float* vec;      // GEMV input vector, permuted by vec_slot
    float* partial;  // GEMV segment sums; attention's cross-warp reduction
    float* scores;   // [gqa][kAttnMaxChunk]
    float* q;        // [gqa][128]
    float* misc;     // reduction scratch, softmax statistics, flag
    bf16_t* kv_row;  // [2][128]: K and V of the current position, as written to the cache (stream)
    float* own;      // [hidden]: the residual rows this block updates, by row index (stream)
    unsigned long long* seg_base;  // [kStreamSegments]: first byte of the block's slice (stream)
    int* seg_chunks;               // [kStreamSegments]: 16-byte chunks in the block's slice (stream)
    unsigned char* ring;           // [kRingSlots][kPageBytes]: weight pages (ring variant only)
    unsigned long long* ring_full; // [kRingSlots]: mbarrier per slot, "the page has landed" (ring)
    int2* ring_rows;               // [kStreamSegments]: the block's first row and row count (ring)
    bf16_t* unit_keys;             // [2 tiles][128]: the keys of the block's attention unit (ring)
    unsigned long long* unit_keys_full;  // their mbarrier, "the keys have landed" (ring)
};

__device__ __forceinline__ Shared carve_shared() {
    unsigned char* base = mk_shared_memory();
    Shared s;
    s.vec = reinterpret_cast<float*>(base);
    s.partial = reinterpret_cast<float*>(base + kVecBytes);
    s.scores = reinterpret_cast<float*>(base + kVecBytes + kPartialBytes);
    s.q = reinterpret_cast<float*>(base + kVecBytes + kPartialBytes + kScoresBytes);
    s.misc = reinterpret_cast<float*>(base + kVecBytes + kPartialBytes + kScoresBytes + kQBytes);
    unsigned char* extra = base + kVecBytes + kPartialBytes + kScoresBytes + kQBytes + kMiscFloats * 4;
    s.kv_row = reinterpret_cast<bf16_t*>(extra);
    s.own = reinterpret_cast<float*>(extra + kKvRowBytes);
    s.seg_base = reinterpret_cast<unsigned long long*>(extra + kKvRowBytes + kOwnBytes);
    s.seg_chunks = reinterpret_cast<int*>(extra + kKvRowBytes + kOwnBytes + kSegBaseBytes);
    s.ring = base + kRingOffset;  // only inside the allocation for the ring variant
    s.ring_full = reinterpret_cast<unsigned long long*>(base + kRingOffset + kRingSlots * kPageBytes);
    s.ring_rows = reinterpret_cast<int2*>(base + kRingOffset + kRingSlots * kPageBytes + kRingSlots * 8);
    s.unit_keys = reinterpret_cast<bf16_t*>(base + kUnitKeysOffset);
    s.unit_keys_full = reinterpret_cast<unsigned long long*>(base + kUnitKeysOffset + kUnitKeysBytes);
    return s;
}

__device__ __forceinline__ size_t kv_offset(const MegakernelParams& P, int layer, int kv_head, int pos) {
    return (static_cast<size_t>(layer * kKVHeads + kv_head) * static_cast<size_t>(P.max_seq) + pos) * kHeadDim;
}

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
// their other halves on those spare blocks, measured 0.992-0.993x at p <= 50 on the H200, 2026-11-24.)
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
// consumer of the exchange after the GEMV. H200 (2026-11-24, A/B at p = 1 / 100 / 200): 1.011x /
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

// ---- the weight ring (ring variant) ----------------------------------------------------------
// The block's weight stream (the stream variant's segments: per layer QKV, O, gate/up, down, then
// the LM head) cut into pages of whole rows, each copied into a slot of a shared-memory ring by the
// asynchronous copies of mk_device.cuh. The copy of page n + kRingSlots is issued as soon as page n
// has been consumed, so while the block waits at a grid barrier, normalises or runs attention, the
// next kRingSlots pages (160 KB) are landing; a GEMV then reads its weights from shared memory.
// Copies are issued by warp 1: warp 0's thread 0 arrives at the grid barriers.
constexpr int kRingIssueWarp = 1;

// Rows of a K-column matrix per page: as many as fit, in whole outputs.
__host__ __device__ constexpr int ring_page_rows(int k, int rows_per_out) {
    return kPageBytes / (2 * k) / rows_per_out * rows_per_out;
}

// Warps per row when a page has fewer rows than the block has warps: each takes an equal share of
// the row's 256-column segments.
__host__ __device__ constexpr int ring_parts(int k, int rows_per_out) {
    int parts = kWarps / ring_page_rows(k, rows_per_out);
    parts = parts < 1 ? 1 : (parts > k / 256 ? k / 256 : parts);
    while ((k / 256) % parts != 0) --parts;
    return parts;
}

__host__ __device__ constexpr int ring_page_items(int k, int rows_per_out) {
    return ring_page_rows(k, rows_per_out) * ring_parts(k, rows_per_out);
}
// Pages a GEMV waits for and consumes together: gate/up's 3 pages per block (Qwen3-0.6B on 132
// blocks) in one group; the LM head's in groups of kLmGroup (2, leaving 3 slots in flight).
constexpr int kRingGroup = 3;
static_assert(kRingGroup < kRingSlots && kRingSlots <= 5, "a group must leave slots to prefetch into; "
              "page_group_wait handles up to 4 pending pages");
__host__ __device__ constexpr int ceil_div_constexpr(int a, int b) { return (a + b - 1) / b; }
// Every page shape a GEMV uses: QKV and the LM head (kHidden, 1), gate/up (kHidden, 2), O, down.
constexpr int kRingItemsMax =
    kRingGroup * imax(imax(ring_page_items(kHidden, 1), ring_page_items(kHidden, 2)),
                      imax(ring_page_items(kQDim, 1), ring_page_items(kInter, 1)));
static_assert(ring_page_rows(kInter, 1) >= 1 && ring_page_rows(kQDim, 1) >= 1 && ring_page_rows(kHidden, 2) >= 2,
              "a page must hold at least one output");
static_assert(2 * kRingItemsMax <= kPartialFloats, "the groups' row sums (double-buffered) must fit s.partial");
static_assert(kRingGroup * ring_page_items(kHidden, 1) <= kRingItemsMax &&
                  kRingGroup * ring_page_items(kHidden, 2) <= kRingItemsMax &&
                  kRingGroup * ring_page_items(kQDim, 1) <= kRingItemsMax &&
                  kRingGroup * ring_page_items(kInter, 1) <= kRingItemsMax,
              "a group's row sums overflow their half of the double buffer (the next group's half)");

// Columns, and rows per output, of segment `seg` of the stream (split-K: down pages are W_down^T's,
// and with kSplitDownO O pages W_o^T's).
template <int kSplit = 0>
__device__ __forceinline__ int ring_segment_k(int seg) {
    if (seg >= 4 * kLayers) return kHidden;
    return seg % 4 == 1 ? (kSplit >= kSplitDownO ? kHidden : kQDim)
                        : (seg % 4 == 3 ? (kSplit >= kSplitDown ? kHidden : kInter) : kHidden);
}
__device__ __forceinline__ int ring_segment_rows_per_out(int seg) { return seg < 4 * kLayers && seg % 4 == 2 ? 2 : 1; }

// Ring state. `consumed` is the same in every thread; the issue cursor is kept by the issuing warp.
struct Ring {
    int consumed;  // pages consumed (the next one to consume sits in slot consumed % kRingSlots)
    int groups;    // page groups consumed (their sums alternate between two buffers)
    int landed;    // pages known to have landed (issuing warp; paced rings only)
    int issued;    // pages issued (issuing warp)
    int next_seg;  // the next page to issue: rows from next_row of segment next_seg (issuing warp)
    int next_row;
    int pace;      // paced rings: most pages landing at once (issuing warp)
};

__device__ __forceinline__ bool ring_issuer() { return (threadIdx.x >> 5) == kRingIssueWarp; }

// The issuing warp: the block's next page into slot issued % kRingSlots (which must be free), or
// a placeholder once the stream has ended. Segment bounds come from the table ring_start built
// (computing them here costs 64-bit divisions per page).
// MK_LM_DYNAMIC (paced rings): the block's stream ends with its static LM-head rows; the LM head
// then issues its claimed chunks itself (LmIssue), and no placeholder may take their slots.
// Against the static split (2026-11-24, dataflow_splitk_o, A/B at p = 1 / 100 / 200 / 1000): H100
// 1.004x / 1.005x / 1.005x / 1.002x; H200 (the issuing then inlined at every ring issue) 1.007x /
// 1.007x / 1.008x / 0.996x.
#ifndef MK_LM_DYNAMIC
#define MK_LM_DYNAMIC 1
#endif
constexpr bool kLmDynamic = MK_LM_DYNAMIC != 0;
constexpr int kLmSeg = 4 * kLayers;
constexpr int kLmPageRows = ring_page_rows(kHidden, 1);
// Pages per group in the paced rings' LM head (MK_LM_GROUP), and per claimed chunk. With groups of
// 3 of the 5 slots, the next group's third page was issued only once the group before it had been
// computed, and every group waited for it: the traced LM head (2026-11-25, dataflow_splitk_o at p=1)
// waited 33.8 us for pages on the H200 and took 67.2 us; in groups of 2 it waits 12.3 us and takes
// 65.0 (H100: 95.6 -> 93.9 us). A/B at p = 1 / 200 / 1000: H200 1.001x / 1.003x / 1.004x, H100
// 1.001x / 1.000x / 1.0015x; groups of 1 page 0.96x and 0.995x (a block barrier per page).
#ifndef MK_LM_GROUP
#define MK_LM_GROUP 2
#endif
constexpr int kLmGroup = MK_LM_GROUP;
static_assert(kLmGroup >= 1 && kLmGroup <= kRingGroup, "MK_LM_GROUP: 1 .. kRingGroup pages");
constexpr int kLmChunkRows = kLmGroup * kLmPageRows;
// The claimed LM-head chunks' lines first out of L2 (MK_LM_EVICT_FIRST; sm_90).
#ifndef MK_LM_EVICT_FIRST
#define MK_LM_EVICT_FIRST 1
#endif
constexpr bool kLmEvictFirst = MK_LM_EVICT_FIRST != 0;
#ifndef MK_LM_STATIC_CHUNKS
#define MK_LM_STATIC_CHUNKS 2
#endif
constexpr int kLmStaticRows = MK_LM_STATIC_CHUNKS * kLmChunkRows;
static_assert(MK_LM_STATIC_CHUNKS >= 1, "MK_LM_STATIC_CHUNKS: at least one chunk per block");

template <int kSplit = 0, bool kPaced = false>
__device__ __forceinline__ void ring_issue_next(const Shared& s, Ring& ring) {
    while (ring.next_seg < kStreamSegments) {
        const int nrows = s.ring_rows[ring.next_seg].y;
        if (ring.next_row < nrows) {
            const int k = ring_segment_k<kSplit>(ring.next_seg);
            const int rows = min(ring_page_rows(k, ring_segment_rows_per_out(ring.next_seg)), nrows - ring.next_row);
            const int slot = ring.issued % kRingSlots;
            const bf16_t* base = reinterpret_cast<const bf16_t*>(s.seg_base[ring.next_seg]);
            page_copy_async(s.ring + slot * kPageBytes, base + static_cast<size_t>(ring.next_row) * k,
                            static_cast<unsigned>(rows * k * 2), s.ring_full + slot);
            ++ring.issued;
            ring.next_row += rows;
            return;
        }
        // The stream ends here, issuing nothing: the loops that issue until a page exists (a paced
        // ring's group acquire, the refill_all release) are never run on the LM head in this mode.
        if (kPaced && kLmDynamic && ring.next_seg == kLmSeg) return;
        ++ring.next_seg;
        ring.next_row = 0;
    }
    page_copy_none();
    ++ring.issued;
}

// Paced rings (dataflow): at most kRingPacedInFlight pages in flight per block while layers run.
// Weight copies and the exchanges between blocks share the memory system's queues: with up to
// 160 KB per SM requested at once (all free slots refilled after a GEMV), every exchange that
// followed waited for that burst to drain (the trace: grid barriers 1 us idle, 2.5-4 us after a
// burst; LL exchanges alike). So a paced ring issues one page at a time, whenever fewer than
// kRingPacedInFlight are still landing, from the places where a block waits for other blocks
// (ring_pump); in the LM head, after the last exchange, it refills every free slot.
#ifndef MK_RING_PACED_IN_FLIGHT
#define MK_RING_PACED_IN_FLIGHT 2
#endif
constexpr int kRingPacedInFlight = MK_RING_PACED_IN_FLIGHT;
// dataflow_splitk's pace: with the bulk reductions sharing the memory system, one page at a time
// measured best on the H200 (2026-11-22, p=1 / 200: 1 page 0.678 / 0.733 ms, 2 pages 0.697 / 0.751,
// 3 pages 0.700 / 0.752).
#ifndef MK_SPLITK_PACED_IN_FLIGHT
#define MK_SPLITK_PACED_IN_FLIGHT 1
#endif
template <int kSplit>
constexpr int kPacedInFlight = kSplit ? MK_SPLITK_PACED_IN_FLIGHT : MK_RING_PACED_IN_FLIGHT;
static_assert(kRingPacedInFlight >= 1 && kRingPacedInFlight <= kRingSlots, "pages in flight: 1 .. kRingSlots");
// The pace of the blocks that run attention units: they issue no page while they compute, and
// fall behind in their ring. H200 (2026-11-22, dataflow_splitk_o at p = 1 / 200 / 1000 against
// their pace of 1): 2 pages 1.002x / 1.014x / 1.025x, 3 pages 1.001x / 1.014x / 1.023x (at p=1000
// nearly every block runs a unit; every block at pace 2 measured 0.962x / 0.983x / 1.001x).
// Pumping the ring while a unit waits for its q/k/v instead: 0.989x / 0.996x / 0.990x.
#ifndef MK_ATTN_BLOCK_PACE
#define MK_ATTN_BLOCK_PACE 2
#endif
template <int kSplit>  // never below the other blocks' pace
constexpr int kAttnBlockPace = imax(MK_ATTN_BLOCK_PACE, kPacedInFlight<kSplit>);
static_assert(MK_ATTN_BLOCK_PACE <= kRingSlots, "MK_ATTN_BLOCK_PACE: at most kRingSlots pages");
static_assert(kPacedInFlight<1> >= 1 && kPacedInFlight<1> <= kRingSlots,
              "MK_SPLITK_PACED_IN_FLIGHT: 1 .. kRingSlots");

// The issuing warp, in a paced ring: issue the next page if a slot is free and fewer than
// `max_in_flight` issued pages are still landing. Every lane keeps the ring state, so the lanes
// agree on whether a page has landed (warp_all) instead of each trusting its own test: lanes that
// ever ran apart could otherwise see a page land one poll apart and drift.
template <int kSplit = 0>
__device__ __forceinline__ void ring_pump(const Shared& s, Ring& ring, int max_in_flight) {
    while (ring.landed < ring.issued &&
           warp_all(page_landed(s.ring_full + ring.landed % kRingSlots, static_cast<unsigned>(ring.landed / kRingSlots))))
        ++ring.landed;
    if (ring.issued - ring.landed < max_in_flight && ring.issued < ring.consumed + kRingSlots &&
        ring.next_seg < kStreamSegments)
        ring_issue_next<kSplit, true>(s, ring);
}

// Decoupled pumping (MK_PUMP_WARP): while a block waits for other blocks, one warp polls the probe
// words and the issuing warp spins on its slots' mbarriers, issuing the next page (at the same
// pace) as soon as one lands, until the probing warp posts the wait's id. Otherwise the issuing
// warp polls and pumps in turn, so it sees a page land only once per poll's L2 round trip. H200
// (2026-11-22, dataflow_splitk_o at p = 1 / 200 / 1000): 1.034x / 1.035x / 0.994x; with the units'
// pumping (MK_UNIT_PUMP) 1.040x / 1.037x / 1.036x; dataflow_splitk 1.011x / 1.019x / 1.020x.
#ifndef MK_PUMP_WARP
#define MK_PUMP_WARP 1
#endif
constexpr bool kPumpWarp = MK_PUMP_WARP != 0;
constexpr int kProbeWarp = 0;                // polls the accumulator probes (rmsnorm_acc)
constexpr int kRecordProbeWarp = kWarps - 1; // polls the record probes (merge_unit_records)
static_assert(kProbeWarp != kRingIssueWarp && kRecordProbeWarp != kRingIssueWarp,
              "the probing warps cannot be the ring's issuing warp");

// A wait for other blocks: `poll(probe_pump)` polls the probe words in one warp, calling probe_pump
// between polls. With MK_PUMP_WARP warp `probe_warp` polls and then posts `wait_id` (ids increase
// within a launch; decode_step_stream zeroes the slot), while the issuing warp pumps until every
// lane has seen the post (a lane that sees it late only pumps once more); otherwise the issuing
// warp polls and pumps in turn.
template <class Poll, class Pump>
__device__ __forceinline__ void poll_while_pumping(const Shared& s, int probe_warp, int wait_id, Poll poll, Pump pump) {
    volatile int* posted = reinterpret_cast<volatile int*>(s.misc + kPumpSlot);
    if constexpr (kPumpWarp) {
        if ((threadIdx.x >> 5) == probe_warp) {
            poll([] {});
            if ((threadIdx.x & 31) == 0) *posted = wait_id;
        } else if (ring_issuer()) {
            while (!warp_all(*posted >= wait_id)) {
                pump();
                ll_backoff();
            }
        }
    } else if (ring_issuer()) {
        poll(pump);
    }
}

// The block's segment table and the slots' barriers, then the first pages in flight: kRingSlots,
// or in a paced ring kRingPacedInFlight.
template <bool kPaced = false, int kSplit = 0>
__device__ __forceinline__ Ring ring_start(const MegakernelParams& P, const Shared& s, int light = 0) {
    for (int i = threadIdx.x; i < kStreamSegments; i += kThreads) {
        StreamSlice x = stream_slice<kSplit>(P, i, light);
        if (kPaced && kLmDynamic && i == kLmSeg) {  // the block's static LM rows (LmIssue)
            x.row0 = min(static_cast<int>(blockIdx.x) * kLmStaticRows, static_cast<int>(P.vocab));
            x.nrows = min(kLmStaticRows, static_cast<int>(P.vocab) - x.row0);
            x.base = P.embed + static_cast<size_t>(x.row0) * kHidden;
        }
        s.seg_base[i] = reinterpret_cast<unsigned long long>(x.base);
        s.ring_rows[i] = make_int2(x.row0, x.nrows);
    }
    if (threadIdx.x == 0) {
        for (int i = 0; i < kRingSlots; ++i) page_barrier_init(s.ring_full + i);
        page_barrier_init(s.unit_keys_full);
        page_barrier_init_fence();
        if (kPaced && kLmDynamic) {
            reinterpret_cast<int*>(s.misc)[kLmVocabSlot] = static_cast<int>(P.vocab);
            *reinterpret_cast<unsigned**>(s.misc + kLmClaimPtrSlot) = P.counters + kLmClaimSlot;
        }
    }
    __syncthreads();
    Ring ring{0, 0, 0, 0, 0, 0, kPacedInFlight<kSplit>};
    if (ring_issuer()) {
        for (int i = 0; i < (kPaced ? kPacedInFlight<kSplit> : kRingSlots); ++i) ring_issue_next<kSplit, kPaced>(s, ring);
    }
    return ring;
}

// Every thread: until the next `pages` pages of the ring have landed.
template <bool kPaced>
__device__ __forceinline__ void ring_group_wait(const Shared& s, const Ring& ring, int pages) {
    for (int p = 0; p < pages; ++p) {
        const int n = ring.consumed + p;
        page_wait(s.ring_full + n % kRingSlots, static_cast<unsigned>(n / kRingSlots));
    }
    page_group_wait(kPaced ? 0 : kRingSlots - pages, ring_issuer());  // paced: no placeholder groups
}

// A page group of `pages` pages, the next to consume: a paced ring first issues those not yet
// issued; then every thread waits until all of them have landed.
template <bool kPaced, int kSplit>
__device__ __forceinline__ void ring_group_acquire(const Shared& s, Ring& ring, int pages) {
    if (kPaced && ring_issuer()) {
        while (ring.issued < ring.consumed + pages) ring_issue_next<kSplit, kPaced>(s, ring);
    }
    ring_group_wait<kPaced>(s, ring, pages);
}

// After the block barrier that ends a group's reads: its slots are free. The issuing warp refills
// them (unpaced), every free slot (`refill_all`: the LM head, no exchange follows), or one page
// at the pace.
template <bool kPaced, int kSplit>
__device__ __forceinline__ void ring_group_release(const Shared& s, Ring& ring, int pages, bool refill_all) {
    ring.consumed += pages;
    ++ring.groups;
    if (ring_issuer()) {
        if (!kPaced) {
            for (int p = 0; p < pages; ++p) ring_issue_next<kSplit, kPaced>(s, ring);
        } else if (refill_all) {
            while (ring.issued < ring.consumed + kRingSlots && ring.next_seg < kStreamSegments)
                ring_issue_next<kSplit, kPaced>(s, ring);
        } else {
            ring_pump<kSplit>(s, ring, ring.pace);
        }
    }
}

// The LM head shared out at run time (MK_LM_DYNAMIC, paced rings). Block b's stream ends with
// static rows [b, b + 1) x kLmStaticRows, which the last layer's pumps prefetch as any other page;
// the rest goes in chunks of one page group (kLmChunkRows), each block taking the next unclaimed
// one (an atomic counter) until none is left. In the LM head the issuing warp issues every page
// (LmIssue, from one place: code inlined at every ring issue cost 1 us per layer, H200 2026-11-24):
// the rest of the static rows, then the claimed chunks, asking for the next chunk a chunk
// ahead so the atomic's round trip overlaps the pages; it leaves each page's first row in
// s.misc[kLmSlotRowSlot + slot] for the consumer, and after the last chunk an end marker (-1, a
// slot completed without a copy). With a static split the step ended with the slowest block's
// slice: blocks' LM heads took 68-80 us (H200, 2026-11-24), some SMs persistently slower.
__device__ __forceinline__ int* lm_slot_rows(const Shared& s) { return reinterpret_cast<int*>(s.misc + kLmSlotRowSlot); }
__device__ __forceinline__ int lm_vocab(const Shared& s) { return reinterpret_cast<const int*>(s.misc)[kLmVocabSlot]; }

struct LmIssue {
    const Shared& s;
    Ring& ring;
    int claim;   // lane 0 of the issuing warp: the next chunk's claim, asked for a chunk ahead
    int row;     // the next row to issue (the static rows first), and the end of its chunk
    int end;
    bool ended;  // the end marker is issued

    // At the LM head's start (every thread): the issuing warp goes on with whatever of the static
    // rows the stream has not issued yet, and asks for its first chunk.
    __device__ __forceinline__ void begin() {
        const int2 slice = s.ring_rows[kLmSeg];
        row = slice.x + (ring.next_seg == kLmSeg ? ring.next_row : 0);
        end = slice.x + slice.y;
        ring.next_seg = kStreamSegments;
        if (ring_issuer() && (threadIdx.x & 31) == 0) claim_ahead();
    }
    __device__ __forceinline__ void claim_ahead() {
        unsigned* counter = *reinterpret_cast<unsigned* const*>(s.misc + kLmClaimPtrSlot);
        claim = static_cast<int>(atomicAdd(counter, 1u));
    }
    // All lanes of the issuing warp: every free slot.
    __device__ __forceinline__ void refill() {
        const bool lead = (threadIdx.x & 31) == 0;
        while (!ended && ring.issued < ring.consumed + kRingSlots) {
            const int slot = ring.issued % kRingSlots;
            if (row >= end) {
                const int chunk = static_cast<int>(gridDim.x) * (kLmStaticRows / kLmChunkRows) +
                                  __shfl_sync(0xffffffffu, claim, 0);
                if (chunk * kLmChunkRows >= lm_vocab(s)) {
                    if (lead) lm_slot_rows(s)[slot] = -1;
                    page_arrive_empty(s.ring_full + slot);
                    ++ring.issued;
                    ended = true;
                    return;
                }
                if (lead) claim_ahead();
                row = chunk * kLmChunkRows;
                end = min(row + kLmChunkRows, lm_vocab(s));
            }
            const int rows = min(kLmPageRows, end - row);
            if (lead) lm_slot_rows(s)[slot] = row;
            const bf16_t* lm_rows = reinterpret_cast<const bf16_t*>(s.seg_base[kLmSeg]);
            page_copy_async<kLmEvictFirst>(s.ring + slot * kPageBytes,
                                           lm_rows + static_cast<long long>(row - s.ring_rows[kLmSeg].x) * kHidden,
                                           static_cast<unsigned>(rows * kHidden * 2), s.ring_full + slot);
            ++ring.issued;
            row += rows;
        }
    }
};

// block_gemv's computation on segment `seg` of the stream, reading the weights from the ring. Pages
// are taken in groups of up to kRingGroup (a whole QKV, O, gate/up or down slice on 132 blocks):
// wait for the group's pages, then warp w takes the (row, part) items w, w + 16, ... of the whole
// group (a part is an equal share of the row's 256-column segments; up to kRingItemsPerWarp
// independent items per warp, unrolled so their loads and reductions overlap), one block barrier,
// then the freed slots are refilled while the epilogue runs on the group's outputs. The items'
// sums alternate between two halves of s.partial, so that one barrier per group suffices.
// Paced (dataflow): a group's pages not yet issued are issued before waiting for them, and each
// group issues at most one more page (ring_pump); in the LM head (no exchange follows) every free
// slot is refilled as in the unpaced ring.
// Iterations of ring_gemv's dot-product loop unrolled (their shared-memory loads in flight together):
// the loop is latency-bound (4 iterations for K = 1024). H200 (2026-11-22, dataflow_splitk_o at
// p = 1 / 200 / 1000 against 2): 4 1.014x / 1.017x / 1.015x, 1 0.997x / 1.004x / 1.006x.
#ifndef MK_RING_DOT_UNROLL
#define MK_RING_DOT_UNROLL 4
#endif
constexpr int kRingDotUnroll = MK_RING_DOT_UNROLL;
// A warp's row sums in ring_gemv by reduce_scatter4 (1) or one warp_sum per row (0).
#ifndef MK_RING_GEMV_SCATTER
#define MK_RING_GEMV_SCATTER 1
#endif
constexpr bool kRingGemvScatter = MK_RING_GEMV_SCATTER != 0;
// kRowsPerOut 0: `rows_per_out` (1 or 2) chosen at run time, for a call site that runs both the QKV
// and the gate/up GEMV (MK_HALF_GEMV); their pages have the same shape there.
template <int kK, int kRowsPerOut, bool kPaced = false, int kSplit = 0, bool kLm = false, typename Epilogue>
__device__ __forceinline__ float ring_gemv(Ring& ring, int seg, const float* x_s,
                                           const Shared& s, Epilogue epilogue, int rows_per_out = kRowsPerOut) {
    static_assert(kRowsPerOut > 0 || (ring_page_rows(kK, 1) == ring_page_rows(kK, 2) &&
                                      ring_parts(kK, 1) == ring_parts(kK, 2)),
                  "one GEMV for one and two rows per output needs one page shape");
    constexpr int kPageRows = ring_page_rows(kK, kRowsPerOut > 0 ? kRowsPerOut : 2);
    constexpr int kParts = ring_parts(kK, kRowsPerOut > 0 ? kRowsPerOut : 2);
    constexpr int kPartChunks = kK / 8 / kParts;  // 16-byte chunks per item, a multiple of 32
    constexpr int kRowChunks = kK / 8;
    constexpr int kWarpsPerPart = kWarps / kParts;
    constexpr int kGroup = kLm && kPaced ? kLmGroup : kRingGroup;  // pages per group
    constexpr int kRowsPerWarp = ceil_div_constexpr(kGroup * kPageRows, kWarpsPerPart);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int2 slice = s.ring_rows[seg];  // first row, rows
    float epilogue_sum = 0.f;
#ifdef MK_TRACE
    long long waited = 0;
#endif

    // MK_LM_DYNAMIC: after the block's static rows, the LM head's groups are the chunks its issuing
    // warp claimed (LmIssue); a group's first page tells the chunk.
    constexpr bool kDynamic = kLm && kPaced && kLmDynamic && kK == kHidden && kRowsPerOut == 1;
    LmIssue lm{s, ring, -1, 0, 0, false};
    if constexpr (kDynamic) lm.begin();
    for (int r0 = 0;; r0 += kGroup * kPageRows) {
        int first_row, rows;
#ifdef MK_TRACE
        const long long wait_start = clock64();
#endif
        if constexpr (kDynamic) {
            if (ring_issuer()) lm.refill();
        }
        if (kDynamic && r0 >= slice.y) {  // the static rows first, as LmIssue issues them
            ring_group_wait<kPaced>(s, ring, 1);  // the group's first page, or the end marker
            first_row = lm_slot_rows(s)[ring.consumed % kRingSlots];
            if (first_row < 0) {
                ++ring.consumed;
                break;
            }
            rows = min(kGroup * kPageRows, lm_vocab(s) - first_row);
        } else {
            if (r0 >= slice.y) break;
            first_row = slice.x + r0;
            rows = min(kGroup * kPageRows, slice.y - r0);
        }
        const int pages = ceil_div(rows, kPageRows);
        if constexpr (kDynamic)
            ring_group_wait<kPaced>(s, ring, pages);  // issued by the refill above
        else
            ring_group_acquire<kPaced, kSplit>(s, ring, pages);
#ifdef MK_TRACE
        waited += clock64() - wait_start;
        // Sub-phases of the first gate/up group: after its page waits, its dot products, the block
        // barrier and the epilogue.
        const bool trace_group = seg < 4 * kLayers && seg % 4 == MK_TRACE_SUBPHASE_SEGMENT && r0 == 0;
        const int trace_ev = (seg / 4) * MK_TRACE_EVENTS_PER_LAYER + 19;
        if (trace_group) MK_MARK(trace_ev);
#endif
        float* sums = s.partial + (ring.groups & 1) * kRingItemsMax;
        // Warp w takes part w / kWarpsPerPart of rows w % kWarpsPerPart, + kWarpsPerPart, ...: all
        // rows of a warp share their input chunks, so each chunk of x is read from shared memory
        // once per warp and row batch, not once per row (x is fp32, twice the weights' bytes).
        const int part = warp / kWarpsPerPart, slot_row = warp - part * kWarpsPerPart;
        float acc[kRowsPerWarp];
        int wk[kRowsPerWarp];  // the row's first chunk of this warp's part for this lane, in ring_chunks
#pragma unroll
        for (int j = 0; j < kRowsPerWarp; ++j) {
            acc[j] = 0.f;
            const int r = min(slot_row + j * kWarpsPerPart, rows - 1);
            const int page = r / kPageRows;
            wk[j] = ((ring.consumed + page) % kRingSlots) * (kPageBytes / 16) + (r - page * kPageRows) * kRowChunks +
                    part * kPartChunks + lane;
        }
        if (part < kParts) {  // uniform per warp
            const uint4* ring_chunks = reinterpret_cast<const uint4*>(s.ring);
            const int col0 = part * kPartChunks + lane;
#pragma unroll kRingDotUnroll
            for (int i = 0; i < kPartChunks / 32; ++i) {
                const float4 xlo = reinterpret_cast<const float4*>(x_s)[col0 + i * 32];
                const float4 xhi = reinterpret_cast<const float4*>(x_s + kVecHalf)[col0 + i * 32];
#pragma unroll
                for (int j = 0; j < kRowsPerWarp; ++j) {
                    if (slot_row + j * kWarpsPerPart < rows) acc[j] += dot8_bf16_f32(ring_chunks[wk[j] + i * 32], xlo, xhi);
                }
            }
            if constexpr (kRingGemvScatter) {
                // Four rows' sums at a time in 6 shuffles (20 as four warp_sums), bitwise the same.
#pragma unroll
                for (int j0 = 0; j0 < kRowsPerWarp; j0 += 4) {
                    float v[4];
#pragma unroll
                    for (int k = 0; k < 4; ++k) v[k] = j0 + k < kRowsPerWarp ? acc[j0 + k] : 0.f;
                    const int j = j0 + reduce_scatter4<32>(v, lane);
                    const int r = slot_row + j * kWarpsPerPart;
                    if ((lane & 7) == 0 && j < kRowsPerWarp && r < rows) sums[r * kParts + part] = v[0];
                }
            } else {
#pragma unroll
                for (int j = 0; j < kRowsPerWarp; ++j) {
                    const int r = slot_row + j * kWarpsPerPart;
                    if (r < rows) {  // uniform per warp
                        const float total = warp_sum(acc[j]);
                        if (lane == 0) sums[r * kParts + part] = total;
                    }
                }
            }
        }
#ifdef MK_TRACE
        if (trace_group) MK_MARK(trace_ev + 1);
#endif
        __syncthreads();  // the group's slots are free and the sums complete
#ifdef MK_TRACE
        if (trace_group) MK_MARK(trace_ev + 2);
#endif
        if constexpr (kDynamic) {
            ring.consumed += pages;  // the next iteration's refill issues into the freed slots
            ++ring.groups;
        } else {
            ring_group_release<kPaced, kSplit>(s, ring, pages, seg == 4 * kLayers);
        }
        if constexpr (kRowsPerOut > 0) {
            for (int o = tid; o < rows / kRowsPerOut; o += kThreads) {
                float v[kRowsPerOut];
#pragma unroll
                for (int q = 0; q < kRowsPerOut; ++q) {
                    float total = 0.f;
#pragma unroll
                    for (int part = 0; part < kParts; ++part) total += sums[(o * kRowsPerOut + q) * kParts + part];
                    v[q] = total;
                }
                epilogue_sum += epilogue(first_row + o * kRowsPerOut, v);
            }
        } else {
            const int shift = rows_per_out - 1;
            for (int o = tid; o < rows >> shift; o += kThreads) {
                float v[2] = {0.f, 0.f};
#pragma unroll
                for (int q = 0; q < 2; ++q) {
                    if (q <= shift) {
#pragma unroll
                        for (int part = 0; part < kParts; ++part) v[q] += sums[((o << shift) + q) * kParts + part];
                    }
                }
                epilogue_sum += epilogue(first_row + (o << shift), v);
            }
        }
#ifdef MK_TRACE
        if (trace_group) MK_MARK(trace_ev + 3);
#endif
    }
#ifdef MK_TRACE
    MK_MARK_VALUE(seg < 4 * kLayers ? (seg / 4) * MK_TRACE_EVENTS_PER_LAYER + 15 + seg % 4
                                    : kLayers * MK_TRACE_EVENTS_PER_LAYER + 3, waited);
#endif
    return epilogue_sum;
}

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
    // put up to four L2 round trips in front of the attention: H200 (2026-11-22), dataflow_splitk_o
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

// ---- QK-norm + RoPE + KV-cache write ----------------------------------------------------------
// One warp handles one 128-element head; lane l holds elements l, l + 32, l + 64, l + 96, so both
// RoPE pairs (i, i + 64) of a lane are its own: out[i] = x[i] c_i - x[i+64] s_i and
// out[i+64] = x[i+64] c_i + x[i] s_i (the rotate_half convention).
// RoPE on a lane's four elements l, l + 32, l + 64, l + 96 (pairs (l, l + 64), (l + 32, l + 96)).
__device__ __forceinline__ void rope_rotate(const float (&x)[4], float c0, float s0, float c1, float s1, float out[4]) {
    out[0] = x[0] * c0 - x[2] * s0;
    out[2] = x[2] * c0 + x[0] * s0;
    out[1] = x[1] * c1 - x[3] * s1;
    out[3] = x[3] * c1 + x[1] * s1;
}

template <class IO = PlainIO>
__device__ __forceinline__ void norm_rope_head(const float* raw, const bf16_t* weight, const float* rope_row,
                                               float out[4], IO io = IO{}) {
    const int lane = threadIdx.x & 31;
    float x[4];
    float ss = 0.f;
    if constexpr (IO::kLL) {
        // LL inputs: the norm weights and the rotation in registers before the wait for x (words
        // from other blocks); loaded after it, their round trip followed the wait on the attention's
        // path (H200, 2026-11-22, with the same in rmsnorm_acc and rmsnorm_ll: 1.009x / 1.013x /
        // 1.003x at p = 1 / 200 / 1000). Plain inputs (after a grid barrier) keep the old order:
        // the stream variant has no registers to spare for them (it spilled, and ran 4.5% slower).
        float gain[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) gain[j] = bf16_to_float(weight[lane + 32 * j]);
        const float c0 = rope_row[lane], s0 = rope_row[64 + lane];
        const float c1 = rope_row[lane + 32], s1 = rope_row[64 + lane + 32];
        io.load_head(raw, x);
#pragma unroll
        for (int j = 0; j < 4; ++j) ss = fmaf(x[j], x[j], ss);
        ss = warp_sum(ss);
        const float inv_rms = 1.0f / sqrtf(ss / static_cast<float>(kHeadDim) + kRmsEps);
#pragma unroll
        for (int j = 0; j < 4; ++j) x[j] = x[j] * inv_rms * gain[j];
        rope_rotate(x, c0, s0, c1, s1, out);
    } else {
        io.load_head(raw, x);
#pragma unroll
        for (int j = 0; j < 4; ++j) ss = fmaf(x[j], x[j], ss);
        ss = warp_sum(ss);
        const float inv_rms = 1.0f / sqrtf(ss / static_cast<float>(kHeadDim) + kRmsEps);
#pragma unroll
        for (int j = 0; j < 4; ++j) x[j] = x[j] * inv_rms * bf16_to_float(weight[lane + 32 * j]);
        const float c0 = rope_row[lane], s0 = rope_row[64 + lane];
        const float c1 = rope_row[lane + 32], s1 = rope_row[64 + lane + 32];
        rope_rotate(x, c0, s0, c1, s1, out);
    }
}

// Task r of kv head g, run by one warp: r < gqa is q head g * gqa + r (normalised and rotated into
// q_dst, 128 floats); r == gqa is k, r == gqa + 1 is v (both stored as bf16 in the cache row of
// `position`; with kToShared also into row_s, 128 bf16, for the stream variant's attention).
template <bool kToShared = false, class IO = PlainIO>
__device__ __forceinline__ void qk_task(const MegakernelParams& P, int layer, int position, int g, int r, float* q_dst,
                                        bf16_t* row_s = nullptr, IO io = IO{}) {
    const int lane = threadIdx.x & 31;
    const float* raw = P.qkv + g * kGroupRows + r * kHeadDim;
    if (r == kGqa + 1) {
        bf16_t* dst = P.v_cache + kv_offset(P, layer, g, position);
        float x[4];
        io.load_head(raw, x);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const bf16_t v = float_to_bf16(x[j]);
            dst[lane + 32 * j] = v;
            if (kToShared) row_s[lane + 32 * j] = v;
        }
        return;
    }
    const bool is_q = r < kGqa;
    const bf16_t* weight = (is_q ? P.norm_q : P.norm_k) + layer * kHeadDim;
    float out[4];
    norm_rope_head(raw, weight, P.rope + static_cast<size_t>(position) * kHeadDim, out, io);
    if (is_q) {
#pragma unroll
        for (int j = 0; j < 4; ++j) q_dst[lane + 32 * j] = out[j];
    } else {
        bf16_t* dst = P.k_cache + kv_offset(P, layer, g, position);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const bf16_t k = float_to_bf16(out[j]);
            dst[lane + 32 * j] = k;
            if (kToShared) row_s[lane + 32 * j] = k;
        }
    }
}

// ---- attention --------------------------------------------------------------------------------
struct AttentionSplit {
    int chunk;  // keys per unit, a multiple of kAttnTile
    int units;  // units per kv head
};

// Keys 0..n_keys-1 of each kv head are cut into `units` chunks, about `target_units` of them, each
// of at least `min_chunk` keys (a multiple of kAttnTile).
__device__ __forceinline__ AttentionSplit attention_split(int n_keys, int target_units, int min_chunk = kAttnTile) {
    int chunk = ceil_div(n_keys, target_units > 0 ? target_units : 1);
    chunk = ceil_div(chunk, kAttnTile) * kAttnTile;
    chunk = min(max(chunk, min_chunk), kAttnMaxChunk);
    AttentionSplit split;
    split.chunk = chunk;
    split.units = ceil_div(n_keys, chunk);
    return split;
}

__device__ __forceinline__ float dot8_f32_bf16(const float (&q)[8], const uint4 k) {
    float s = q[0] * bf16_low(k.x);
    s = fmaf(q[1], bf16_high(k.x), s);
    s = fmaf(q[2], bf16_low(k.y), s);
    s = fmaf(q[3], bf16_high(k.y), s);
    s = fmaf(q[4], bf16_low(k.z), s);
    s = fmaf(q[5], bf16_high(k.z), s);
    s = fmaf(q[6], bf16_low(k.w), s);
    s = fmaf(q[7], bf16_high(k.w), s);
    return s;
}

__device__ __forceinline__ void axpy8_bf16(float (&acc)[8], float p, const uint4 v) {
    acc[0] = fmaf(p, bf16_low(v.x), acc[0]);
    acc[1] = fmaf(p, bf16_high(v.x), acc[1]);
    acc[2] = fmaf(p, bf16_low(v.y), acc[2]);
    acc[3] = fmaf(p, bf16_high(v.y), acc[3]);
    acc[4] = fmaf(p, bf16_low(v.z), acc[4]);
    acc[5] = fmaf(p, bf16_high(v.z), acc[5]);
    acc[6] = fmaf(p, bf16_low(v.w), acc[6]);
    acc[7] = fmaf(p, bf16_high(v.w), acc[7]);
}

// The last of a kv head's units to finish merges the units' records (flash-decoding combine):
// out = sum_u e^(m_u - M) o_u / sum_u e^(m_u - M) l_u. The arrival counter is reset for the next
// layer, which starts after a grid barrier.
__device__ __forceinline__ void combine_if_last(const MegakernelParams& P, int g, int units, const Shared& s) {
    fence_gpu();
    __syncthreads();
    int* flag = reinterpret_cast<int*>(s.misc + kFlagSlot);
    if (threadIdx.x == 0) *flag = atomicAdd(P.counters + g, 1u) == static_cast<unsigned>(units - 1);
    __syncthreads();
    if (!*flag) return;
    fence_gpu();
    constexpr int kUnitStride = kGqa * kPartialStride;
    for (int o = threadIdx.x; o < kGqa * kHeadDim; o += kThreads) {
        const int h = o / kHeadDim, d = o % kHeadDim;
        const float* rec = P.attn_partial + static_cast<size_t>(g) * units * kUnitStride + h * kPartialStride;
        float m_max = load_l2_f32(rec + kHeadDim);
        for (int v = 1; v < units; ++v) m_max = fmaxf(m_max, load_l2_f32(rec + v * kUnitStride + kHeadDim));
        float num = 0.f, den = 0.f;
        for (int v = 0; v < units; ++v) {
            const float* r = rec + v * kUnitStride;
            const float scale = expf(load_l2_f32(r + kHeadDim) - m_max);
            num = fmaf(scale, load_l2_f32(r + d), num);
            den = fmaf(scale, load_l2_f32(r + kHeadDim + 1), den);
        }
        P.attn_out[(g * kGqa + h) * kHeadDim + d] = num / den;
    }
    if (threadIdx.x == 0) P.counters[g] = 0u;
}

// One step of the flash-decoding merge: fold a unit's record (max mv, sum lv, output ov) into the
// running (m, l, acc).
__device__ __forceinline__ void merge_record(float& m, float& l, float& acc, float mv, float lv, float ov) {
    const float m_new = fmaxf(m, mv);
    const float keep = expf(m - m_new), add = expf(mv - m_new);
    acc = fmaf(acc, keep, add * ov);
    l = fmaf(l, keep, add * lv);
    m = m_new;
}

// combine_if_last for the stream variant. Only thread 0 fences (warps 1-15 may have weight loads
// in flight, which a fence would wait for), as in cooperative_groups' barrier: the block's record
// writes are ordered before thread 0's release by __syncthreads. The last unit merges online with
// two threads per output (each takes every other unit, then they merge by a shuffle), loading
// kCombineBatch units' records per round trip instead of one unit after another.
// Units loaded per round trip. 8 spills registers on sm_90 with the weight stream live, 4 on sm_80.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
constexpr int kCombineBatch = 2;
#else
constexpr int kCombineBatch = 4;
#endif
static_assert((2 * kGqa * kHeadDim) % 32 == 0, "the combine's thread pairs fill whole warps");

// With LL output (dataflow) no grid barrier follows, so the last unit resets the arrival counter
// at once, by an atomic ordered before its acquire fence and so before anything it writes next.
template <class Out = PlainIO>
__device__ __forceinline__ void combine_if_last_stream(const MegakernelParams& P, int g, int units, const Shared& s,
                                                       Out out = Out{}) {
    __syncthreads();
    int* flag = reinterpret_cast<int*>(s.misc + kFlagSlot);
    if (threadIdx.x == 0) {
        fence_gpu();  // release: this unit's record
        const bool last = atomicAdd(P.counters + g, 1u) == static_cast<unsigned>(units - 1);
        if (last && Out::kLL) atomicExch(P.counters + g, 0u);
        if (last) fence_gpu();  // acquire: the other units' records
        *flag = last;
    }
    __syncthreads();
    if (!*flag) return;
    constexpr int kUnitStride = kGqa * kPartialStride;
    for (int t = threadIdx.x; t < 2 * kGqa * kHeadDim; t += kThreads) {  // uniform per warp
        const int o = t >> 1, half = t & 1;
        const int h = o / kHeadDim, d = o % kHeadDim;
        const float* rec = P.attn_partial + static_cast<size_t>(g) * units * kUnitStride + h * kPartialStride;
        float m = -3.402823466e38f, l = 0.f, acc = 0.f;
        for (int v0 = half; v0 < units; v0 += 2 * kCombineBatch) {
            float mv[kCombineBatch], lv[kCombineBatch], ov[kCombineBatch];
#pragma unroll
            for (int i = 0; i < kCombineBatch; ++i) {
                const int v = v0 + 2 * i;
                if (v < units) {
                    const float* r = rec + v * kUnitStride;
                    mv[i] = load_l2_f32(r + kHeadDim);
                    lv[i] = load_l2_f32(r + kHeadDim + 1);
                    ov[i] = load_l2_f32(r + d);
                }
            }
#pragma unroll
            for (int i = 0; i < kCombineBatch; ++i) {
                if (v0 + 2 * i < units) merge_record(m, l, acc, mv[i], lv[i], ov[i]);
            }
        }
        const float m2 = __shfl_xor_sync(kFullMask, m, 1);
        const float l2 = __shfl_xor_sync(kFullMask, l, 1);
        const float acc2 = __shfl_xor_sync(kFullMask, acc, 1);
        const float m_all = fmaxf(m, m2);
        const float keep = expf(m - m_all), keep2 = expf(m2 - m_all);
        if (half == 0) {
            out.store(P.attn_out + (g * kGqa + h) * kHeadDim + d, fmaf(acc, keep, acc2 * keep2) / fmaf(l, keep, l2 * keep2));
        }
    }
    if (!Out::kLL && threadIdx.x == 0) P.counters[g] = 0u;
}

// Steps shared by attention_unit and attention_unit_preloaded.
// Softmax statistics of the unit's n scores per q head (one warp per head, into s.misc); the
// scores become e^(s - max). Ends with a block barrier.
// kTwoPerLane (units of at most 64 keys, MK_UNIT_SMALL_SOFTMAX): each lane holds keys lane and
// lane + 32, with no loop (the same results).
template <bool kTwoPerLane = false>
__device__ __forceinline__ void unit_softmax(int n, const Shared& s, int lane, int warp) {
    if (warp < kGqa) {
        float* sc = s.scores + warp * kAttnMaxChunk;
        float m, l;
        if constexpr (kTwoPerLane) {
            const bool has0 = lane < n, has1 = lane + 32 < n;
            const float x0 = has0 ? sc[lane] : -3.402823466e38f, x1 = has1 ? sc[lane + 32] : -3.402823466e38f;
            m = warp_max(fmaxf(x0, x1));
            const float e0 = has0 ? expf(x0 - m) : 0.f, e1 = has1 ? expf(x1 - m) : 0.f;
            if (has0) sc[lane] = e0;
            if (has1) sc[lane + 32] = e1;
            l = warp_sum(e0 + e1);
        } else {
            m = -3.402823466e38f;
            for (int j = lane; j < n; j += 32) m = fmaxf(m, sc[j]);
            m = warp_max(m);
            l = 0.f;
            for (int j = lane; j < n; j += 32) {
                const float e = expf(sc[j] - m);
                sc[j] = e;
                l += e;
            }
            l = warp_sum(l);
        }
        if (lane == 0) {
            s.misc[kStatsSlot + 2 * warp] = m;
            s.misc[kStatsSlot + 2 * warp + 1] = l;
        }
    }
    __syncthreads();
}

// Where unit u of kv head g (of `units`) leaves q head h's record (o[128], max, sum).
__device__ __forceinline__ float* unit_record(const MegakernelParams& P, int g, int units, int u, int h) {
    return P.attn_partial + (static_cast<size_t>(g * units + u) * kGqa + h) * kPartialStride;
}

// The unit's output from the warps' partial sums in s.partial: attn_out when the head has one
// unit, else the unit's (o, max, sum) record for the combine. LL records (dataflow_splitk_o): always
// the record, which the blocks projecting the head's outputs merge themselves (merge_unit_records).
// `key_warps`: the warps that wrote partial sums (the first ones; the others held no key).
template <class Out, class Rec = PlainIO>
__device__ __forceinline__ void unit_output(const MegakernelParams& P, int g, int u, AttentionSplit split,
                                            const Shared& s, Out out, int tid, Rec rec_io = Rec{},
                                            int key_warps = kWarps) {
    for (int o = tid; o < kGqa * kHeadDim; o += kThreads) {
        const int h = o / kHeadDim, d = o % kHeadDim;
        float sum = 0.f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w)
            if (w < key_warps) sum += s.partial[(w * kGqa + h) * kHeadDim + d];
        const float m = s.misc[kStatsSlot + 2 * h], l = s.misc[kStatsSlot + 2 * h + 1];
        if (split.units == 1 && !Rec::kLL) {
            out.store(P.attn_out + (g * kGqa + h) * kHeadDim + d, sum / l);
        } else {
            float* rec = unit_record(P, g, split.units, u, h);
            rec_io.store(rec + d, sum);
            if (d == 0) {
                rec_io.store(rec + kHeadDim, m);
                rec_io.store(rec + kHeadDim + 1, l);
            }
        }
    }
}

// Attention of kv head g's kGqa query heads over keys [u * chunk, min((u + 1) * chunk, position + 1)).
// Thread t covers key slot t / 16 of each 32-key tile and dims 8 * (t % 16) .. + 8, so one tile
// of K (or V) is one coalesced 16-byte load per thread. Scores go to shared memory; the softmax
// is exact within the unit; several units per head are merged by combine_if_last.
// kStream (stream variant, units too long for attention_unit_preloaded): no fence in warps 1-15
// (the K/V rows written here are read back by this block only, after __syncthreads), and the
// stream combine.
template <bool kFusedQk, bool kStream = false, class In = PlainIO, class Out = PlainIO, class Rec = PlainIO>
__device__ __forceinline__ void attention_unit(const MegakernelParams& P, int layer, int position, int g, int u,
                                               AttentionSplit split, const Shared& s, In in = In{}, Out out = Out{},
                                               Rec rec = Rec{}) {
    constexpr int kAttnUnroll = kStream ? 2 : mk::kAttnUnroll;  // registers are scarce with the weight stream live
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int start = u * split.chunk;
    const int n = min(split.chunk, position + 1 - start);
    const size_t head = kv_offset(P, layer, g, 0);
    const bf16_t* keys = P.k_cache + head + static_cast<size_t>(start) * kHeadDim;
    const bf16_t* values = P.v_cache + head + static_cast<size_t>(start) * kHeadDim;

    // 1. The queries, in shared memory. Fused: computed here from the raw projections, and the unit
    //    holding the current position also writes its K and V cache rows (read back below).
    if (kFusedQk) {
        if (warp < kGqa) {
            qk_task<false>(P, layer, position, g, warp, s.q + warp * kHeadDim, nullptr, in);
        } else if (warp < kGqa + 2 && u == split.units - 1) {
            qk_task<false>(P, layer, position, g, warp, nullptr, nullptr, in);
            if (!kStream) fence_gpu();
        }
    } else {
        for (int i = tid; i < kGqa * kHeadDim; i += kThreads) s.q[i] = load_l2_f32(P.q_rot + g * kGqa * kHeadDim + i);
    }
    __syncthreads();

    // 2. Scores q.k / sqrt(128).
    const int slot = tid >> 4, dc = tid & 15;
    float qf[kGqa][8];
#pragma unroll
    for (int h = 0; h < kGqa; ++h)
#pragma unroll
        for (int i = 0; i < 8; ++i) qf[h][i] = s.q[h * kHeadDim + dc * 8 + i];
    const int tiles = ceil_div(n, kAttnTile);
    for (int t0 = 0; t0 < tiles; t0 += kAttnUnroll) {
        uint4 kr[kAttnUnroll];
#pragma unroll
        for (int a = 0; a < kAttnUnroll; ++a) {
            const int j = (t0 + a) * kAttnTile + slot;
            kr[a] = make_uint4(0u, 0u, 0u, 0u);
            if (j < n) kr[a] = load_l2_16B(keys + static_cast<size_t>(j) * kHeadDim + dc * 8);
        }
#pragma unroll
        for (int a = 0; a < kAttnUnroll; ++a) {
            const int j = (t0 + a) * kAttnTile + slot;
#pragma unroll
            for (int h = 0; h < kGqa; ++h) {
                const float d = half_warp_sum(dot8_f32_bf16(qf[h], kr[a]));
                if (dc == 0 && j < n) s.scores[h * kAttnMaxChunk + j] = d * kAttnScale;
            }
        }
    }
    __syncthreads();

    // 3. Softmax statistics per q head; scores become e^(s - max).
    unit_softmax(n, s, lane, warp);

    // 4. Sum of e^(s - max) * v over the unit's keys.
    float acc[kGqa][8];
#pragma unroll
    for (int h = 0; h < kGqa; ++h)
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[h][i] = 0.f;
    for (int t0 = 0; t0 < tiles; t0 += kAttnUnroll) {
        uint4 vr[kAttnUnroll];
#pragma unroll
        for (int a = 0; a < kAttnUnroll; ++a) {
            const int j = (t0 + a) * kAttnTile + slot;
            vr[a] = make_uint4(0u, 0u, 0u, 0u);
            if (j < n) vr[a] = load_l2_16B(values + static_cast<size_t>(j) * kHeadDim + dc * 8);
        }
#pragma unroll
        for (int a = 0; a < kAttnUnroll; ++a) {
            const int j = (t0 + a) * kAttnTile + slot;
            if (j < n) {
#pragma unroll
                for (int h = 0; h < kGqa; ++h) axpy8_bf16(acc[h], s.scores[h * kAttnMaxChunk + j], vr[a]);
            }
        }
    }
    // Lanes l and l + 16 hold the same dims for two key slots; then the warps' sums meet in smem.
#pragma unroll
    for (int h = 0; h < kGqa; ++h)
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[h][i] += __shfl_xor_sync(kFullMask, acc[h][i], 16);
    if (lane < 16) {
#pragma unroll
        for (int h = 0; h < kGqa; ++h)
#pragma unroll
            for (int i = 0; i < 8; ++i) s.partial[(warp * kGqa + h) * kHeadDim + dc * 8 + i] = acc[h][i];
    }
    __syncthreads();

    // 5. The unit's output (one unit per head) or its record for the combine.
    unit_output(P, g, u, split, s, out, tid, rec);
    if (split.units > 1 && !Rec::kLL) {
        if (kStream) {
            combine_if_last_stream(P, g, split.units, s, out);
        } else {
            combine_if_last(P, g, split.units, s);
        }
    }
    __syncthreads();  // shared buffers are reused by the next unit
}

// The stream variant's attention unit when it has at most kAttnPreloadTiles tiles of keys (every
// unit up to 1024 keys on a 132-block grid): all of its K and V loads are issued first, so they
// fly while the queries are normalised and rotated. The row of the current position, written by
// this unit in the prologue, comes from shared memory (the copy loaded beforehand is stale). Same
// arithmetic as attention_unit; q is read from shared memory per tile, as registers are scarce
// with the weight stream live.
constexpr int kAttnPreloadTiles = 2;
// MK_UNIT_KV_PREFETCH (dataflow_splitk_o): each block asks for its unit's keys and values in L2 at
// the start of their layer, before its input RMSNorm's wait. The unit loads them while it waits for
// its q/k/v; at p=1000 (every block runs a unit) those loads outlasted the wait, 3.0 us against 1.5
// when loaded after it (H100, 2026-11-25). A/B at p = 1 / 200 / 1000: H100 1.009x / 1.019x / 1.015x
// and 1.007x / 1.018x / 1.014x (two machines), H200 1.004x / 1.014x / 1.007x; asked for at the
// unit's start 0.99x / 1.007x / 0.99x (with the loads after the wait), half a layer earlier 1.000x /
// 1.015x / 1.007x (H100) and 0.998x / 1.008x / 0.993x (H200).
#ifndef MK_UNIT_KV_PREFETCH
#define MK_UNIT_KV_PREFETCH 1
#endif
// Keys [start, start + n) of kv head g in layer `layer`, and their values, asked for in L2 (one thread).
__device__ __forceinline__ void prefetch_unit_kv(const MegakernelParams& P, int layer, int g, int start, int n) {
    const size_t off = kv_offset(P, layer, g, start);
    const unsigned bytes = static_cast<unsigned>(n) * kHeadDim * 2u;
    prefetch_l2_async(P.k_cache + off, bytes);
    prefetch_l2_async(P.v_cache + off, bytes);
}
// MK_UNIT_KEYS_SHARED (dataflow_splitk_o, with MK_UNIT_KV_PREFETCH; sm_90 and the emulator): the keys
// of the block's first unit, when it preloads (at most kAttnPreloadTiles tiles), are copied into shared
// memory (s.unit_keys, one bulk copy) where prefetch_unit_kv would ask for them in L2; only the values
// are then loaded while the unit waits for its q/k/v. A/B at p = 1 / 200 / 1000 (2026-11-25): H200
// 0.996x / 0.998x / 1.008x and 0.998x / 1.001x / 1.007x (two runs), H100 1.000x / 1.002x / 1.002x;
// the traced q/k/v wait at p=1000 2.20 -> 1.69 us (H200) and 2.43 -> 1.91 us (H100). Copied only
// once units are busy (MK_UNIT_PUMP's share): the same at p=1. Values loaded after the wait: 0.991x /
// 0.998x / 1.003x (H200).
#ifndef MK_UNIT_KEYS_SHARED
#define MK_UNIT_KEYS_SHARED 1
#endif
static_assert(kUnitKeysBytes == kAttnPreloadTiles * kAttnTile * kHeadDim * 2, "s.unit_keys holds a preloading unit's keys");
__host__ __device__ constexpr bool unit_keys_shared_built() {
#if MK_UNIT_KEYS_SHARED && (defined(MK_EMULATE) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900))
    return true;
#else
    return false;
#endif
}
// MK_UNIT_WARP_KEYS (with MK_UNIT_KEYS_SHARED; 0: off): a unit of at most this many keys has its values
// copied into s.unit_keys too (after a tile of keys), and is computed by one warp per q head once its
// q/k/v are in (unit_by_warps: no block barrier between its scores, softmax and P.V). A/B (2026-11-25)
// against 0 at p = 1 / 10 / 200 / 1000 (units of 2, 11, 9 and 41 keys; an H100, then an H200):
// 8 keys 1.005x / 1.000x / 0.999x / 1.002x and 1.007x / 0.998x / 1.001x / 0.999x; 16 and 32 keys slower
// at p=10 (0.984x, H100: a warp's 11 keys one group after another); unrolled over 8 or 16 keys
// (10,648 / 11,720 SASS instructions against 9,952) 0.995-1.013x, no better at p=1 and slower at p=10.
// Traced (p=1): the unit's softmax, P.V and record out 0.80 -> 0.48 us; its scores stay at 0.4 us.
#ifndef MK_UNIT_WARP_KEYS
#define MK_UNIT_WARP_KEYS 8
#endif
constexpr int kUnitWarpKeys = MK_UNIT_WARP_KEYS;
static_assert(kUnitWarpKeys >= 0 && kUnitWarpKeys <= kAttnTile && kUnitWarpKeys % 4 == 0,
              "MK_UNIT_WARP_KEYS: a multiple of 4, at most a tile (its keys and values share s.unit_keys)");
// Whether a unit of n keys runs on one warp per q head (unit_by_warps): copy_unit_keys then copies its
// values too, and attention_unit_preloaded reads them there, so both ask this one question.
__host__ __device__ constexpr bool unit_on_warps(int n) { return kUnitWarpKeys > 0 && n <= kUnitWarpKeys; }
__device__ __forceinline__ const bf16_t* unit_values_shared(const Shared& s) { return s.unit_keys + kAttnTile * kHeadDim; }

// Thread 0: keys [start, start + n) of kv head g in layer `layer` into s.unit_keys (the copy's use
// number is the layer), their values too for a unit of at most kUnitWarpKeys keys, else asked for in L2.
__device__ __forceinline__ void copy_unit_keys(const MegakernelParams& P, int layer, int g, int start, int n,
                                               const Shared& s) {
    const size_t off = kv_offset(P, layer, g, start);
    const unsigned bytes = static_cast<unsigned>(n) * kHeadDim * 2u;
    if (unit_on_warps(n)) {
        page_copy_ranges_async({CopyRange{s.unit_keys, P.k_cache + off},
                                CopyRange{const_cast<bf16_t*>(unit_values_shared(s)), P.v_cache + off}},
                               bytes, s.unit_keys_full);
    } else {
        page_copy_async(s.unit_keys, P.k_cache + off, bytes, s.unit_keys_full);
        prefetch_l2_async(P.v_cache + off, bytes);
    }
}

// Warp h < kGqa: q head h of a unit of n <= kUnitWarpKeys keys, all in shared memory (q in s.q, keys and
// values in s.unit_keys, the row of `position` in s.kv_row when the unit writes it), into its LL record.
// Lane l holds dims l + 32 i, as qk_task writes them; the scores of 4 keys meet by one reduce-scatter
// and lane j then holds key j's.
template <class Rec>
__device__ __forceinline__ void unit_by_warps(const MegakernelParams& P, int layer, int g, int u, int n,
                                              bool writes_row, AttentionSplit split, const Shared& s, Rec rec_io) {
    const int lane = threadIdx.x & 31, h = threadIdx.x >> 5;
    (void)layer;
    if (h >= kGqa) return;
    float q[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) q[i] = s.q[h * kHeadDim + lane + 32 * i];
    auto key_row = [&](int j) { return writes_row && j == n - 1 ? s.kv_row : s.unit_keys + j * kHeadDim; };
    auto value_row = [&](int j) {
        return writes_row && j == n - 1 ? s.kv_row + kHeadDim : unit_values_shared(s) + j * kHeadDim;
    };
    float x = -3.402823466e38f;  // lane j: key j's score
#pragma unroll 1
    for (int j0 = 0; j0 < n; j0 += 4) {
        float d[4];
#pragma unroll
        for (int a = 0; a < 4; ++a) {
            d[a] = 0.f;
            if (j0 + a < n) {
                const bf16_t* k = key_row(j0 + a);
#pragma unroll
                for (int i = 0; i < 4; ++i) d[a] = fmaf(q[i], bf16_to_float(k[lane + 32 * i]), d[a]);
            }
        }
        reduce_scatter4<32>(d, lane);  // lanes 8a .. 8a + 7: key j0 + a
        const float y = __shfl_sync(kFullMask, d[0], (lane & 3) * 8);
        if ((lane & ~3) == j0 && lane < n) x = y * kAttnScale;  // lanes past the keys keep -inf's stand-in
    }
    MK_MARK(layer * MK_TRACE_EVENTS_PER_LAYER + 28);
    const float m = warp_max(x);
    const float e = lane < n ? expf(x - m) : 0.f;
    const float l = warp_sum(e);
    MK_MARK(layer * MK_TRACE_EVENTS_PER_LAYER + 29);
    float o[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll 1
    for (int j = 0; j < n; ++j) {
        const float p = __shfl_sync(kFullMask, e, j);
        const bf16_t* v = value_row(j);
#pragma unroll
        for (int i = 0; i < 4; ++i) o[i] = fmaf(p, bf16_to_float(v[lane + 32 * i]), o[i]);
    }
    MK_MARK(layer * MK_TRACE_EVENTS_PER_LAYER + 25);
    float* rec = unit_record(P, g, split.units, u, h);
#pragma unroll
    for (int i = 0; i < 4; ++i) rec_io.store(rec + lane + 32 * i, o[i]);
    if (lane == 0) {
        rec_io.store(rec + kHeadDim, m);
        rec_io.store(rec + kHeadDim + 1, l);
    }
    MK_MARK(layer * MK_TRACE_EVENTS_PER_LAYER + 26);
}
constexpr int kSlotsPerWarp = 32 / (kThreads / kAttnTile);  // key slots of a tile per warp (2)
// MK_UNIT_KEY_WARPS (1; the dataflow variants): only the warps holding some of the unit's keys
// compute scores and P.V (fused_stream would spill registers).
// A unit of n keys fills ceil(n / 2) warps of the first tile: at p=1 (2 keys) one warp of 16. With
// every warp working (0), the 15 idle warps' shuffles, shared-memory loads and partial sums kept
// the unit's scores, softmax and P.V at 1.6-1.7 us whatever its keys (traced on an H200, 2026-11-24:
// the same 1.63 us when that code ran a second time in a row, its K/V already in registers). Two A/B
// runs: 1.021-1.031x at p=1, 1.003-1.008x at p=50, 0.993-0.999x with full units (p >= 200).
#ifndef MK_UNIT_KEY_WARPS
#define MK_UNIT_KEY_WARPS 1
#endif
constexpr bool kUnitKeyWarps = MK_UNIT_KEY_WARPS != 0;
// With MK_UNIT_KEY_WARPS, two shorter steps of the unit (the unit is bound by its shuffles and
// shared-memory round trips, not by its K/V loads):
// MK_UNIT_SCORE_RS: a lane's four partial dot products (2 tiles x 2 q heads) summed over its 16
// lanes by one reduce-scatter, 5 shuffles instead of 4 x 4 (the same additions in the same order);
// MK_UNIT_SMALL_SOFTMAX: the softmax of at most 64 keys as two values per lane, without the general
// loop's unrolled remainder handling (same results). H200, 2026-11-24, at p = 1 / 50 / 200 /
// 1000 against neither: both 1.007x / 1.018x / 1.013x / 1.027x, the reduce-scatter alone 1.000x /
// 1.011x / 1.008x / 1.016x (the scores of a full unit 0.90 -> 0.44 us). The same exchange for P.V
// (both heads at once, 8 shuffles instead of 16) measured 1.000x / 0.998x / 0.999x / 0.998x.
#ifndef MK_UNIT_SCORE_RS
#define MK_UNIT_SCORE_RS 1
#endif
#ifndef MK_UNIT_SMALL_SOFTMAX
#define MK_UNIT_SMALL_SOFTMAX 1
#endif
constexpr bool kUnitScoreReduceScatter = MK_UNIT_SCORE_RS != 0 && kAttnPreloadTiles * kGqa == 4;
constexpr bool kUnitSmallSoftmax = MK_UNIT_SMALL_SOFTMAX != 0 && kAttnPreloadTiles * kAttnTile <= 64;

// MK_UNIT_PUMP (dataflow_splitk_o; a share of the grid in percent, 0: off): once at least that
// share of the blocks run attention units, their ring keeps the others' pace and, while a unit
// waits for its q/k/v, the issuing warp pumps the ring (the unit's tasks run on the other warps and
// count themselves done in s.misc[kUnitTasksSlot]). With fewer units, their blocks keep the pace
// MK_ATTN_BLOCK_PACE and the tasks stay on warps 0-3. H200 (2026-11-22, against no unit pumping,
// p = 1 / 200 / 400 / 600 / 1000): 25% 0.992x / 0.997x / 1.003x / 1.012x / 1.036x with the tasks moved
// at every unit count; below the share the move alone cost 0.4% at p=1, hence the two layouts.
#ifndef MK_UNIT_PUMP
#define MK_UNIT_PUMP 25
#endif
constexpr bool kUnitPump = MK_UNIT_PUMP != 0;
static_assert(MK_UNIT_PUMP >= 0 && MK_UNIT_PUMP <= 100, "MK_UNIT_PUMP: a share of the grid in percent");
static_assert(kGqa + 3 <= kWarps, "MK_UNIT_PUMP: the unit's tasks and the issuing warp need their own warps");
struct NoPump {
    __device__ __forceinline__ void operator()() const {}
};

template <bool kKeyWarps = false, class In = PlainIO, class Out = PlainIO, class Rec = PlainIO, class Pump = NoPump>
__device__ __forceinline__ void attention_unit_preloaded(const MegakernelParams& P, int layer, int position, int g,
                                                         int u, AttentionSplit split, const Shared& s, In in = In{},
                                                         Out out = Out{}, Rec rec = Rec{}, Pump pump = Pump{},
                                                         bool pumping = false, bool keys_shared = false) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int slot = tid >> 4, dc = tid & 15;
    const int start = u * split.chunk;
    const int n = min(split.chunk, position + 1 - start);
    const bool writes_row = u == split.units - 1;  // key n - 1 is `position`
    const bool by_warps = Rec::kLL && keys_shared && unit_on_warps(n);  // its values in s.unit_keys too
    const size_t head = kv_offset(P, layer, g, 0);
    const bf16_t* keys = P.k_cache + head + static_cast<size_t>(start) * kHeadDim;
    const bf16_t* values = P.v_cache + head + static_cast<size_t>(start) * kHeadDim;

    // Trace events 23-26, 28, 29 of the layer (the block's last unit): start, q/k/v in, P.V done, record
    // out, scores done, softmax done.
    MK_MARK(layer * MK_TRACE_EVENTS_PER_LAYER + 23);
    // 0. Keys and values in flight.
    uint4 kr[kAttnPreloadTiles], vr[kAttnPreloadTiles];
#pragma unroll
    for (int a = 0; a < kAttnPreloadTiles; ++a) {
        const int j = a * kAttnTile + slot;
        kr[a] = make_uint4(0u, 0u, 0u, 0u);
        vr[a] = make_uint4(0u, 0u, 0u, 0u);
        if (j < n) {
            if (!keys_shared) kr[a] = load_l2_16B(keys + static_cast<size_t>(j) * kHeadDim + dc * 8);
            if (!by_warps) vr[a] = load_l2_16B(values + static_cast<size_t>(j) * kHeadDim + dc * 8);
        }
    }

    // 1. Queries (shared memory); the last unit's tasks kGqa, kGqa + 1 write the K and V rows of
    //    `position` to the cache and to s.kv_row. Task t runs on warp t (`pumping`, MK_UNIT_PUMP:
    //    on the warps other than the issuing warp, which pumps the ring meanwhile).
    if (kUnitPump && pumping) {
        const int task = warp > kRingIssueWarp ? warp - 1 : warp;
        const int tasks = writes_row ? kGqa + 2 : kGqa;
        // Tasks done: only ends the pumping (the block barrier below orders their results).
        unsigned* done = reinterpret_cast<unsigned*>(s.misc + kUnitTasksSlot);
        if (warp == kRingIssueWarp) {
            while (!warp_all(*reinterpret_cast<volatile unsigned*>(done) >= static_cast<unsigned>(tasks))) {
                pump();
                ll_backoff();
            }
        } else if (task < tasks) {
            if (task < kGqa)
                qk_task<false>(P, layer, position, g, task, s.q + task * kHeadDim, nullptr, in);
            else
                qk_task<true>(P, layer, position, g, task, nullptr, s.kv_row + (task - kGqa) * kHeadDim, in);
            if (lane == 0) atomicAdd(done, 1u);
        }
        __syncthreads();
        if (tid == 0) *done = 0u;  // read again only after later barriers
    } else {
        if (warp < kGqa) {
            qk_task<false>(P, layer, position, g, warp, s.q + warp * kHeadDim, nullptr, in);
        } else if (warp < kGqa + 2 && writes_row) {
            qk_task<true>(P, layer, position, g, warp, nullptr, s.kv_row + (warp - kGqa) * kHeadDim, in);
        }
        __syncthreads();
    }
    MK_MARK(layer * MK_TRACE_EVENTS_PER_LAYER + 24);
    if (keys_shared) {  // copied in at the layer's start (copy_unit_keys)
        page_wait(s.unit_keys_full, static_cast<unsigned>(layer));
        if (by_warps) {
            if constexpr (Rec::kLL) unit_by_warps(P, layer, g, u, n, writes_row, split, s, rec);
            __syncthreads();  // shared buffers are reused by the next unit
            return;
        }
#pragma unroll
        for (int a = 0; a < kAttnPreloadTiles; ++a) {
            const int j = a * kAttnTile + slot;
            if (j < n) kr[a] = reinterpret_cast<const uint4*>(s.unit_keys + j * kHeadDim)[dc];
        }
    }
    if (writes_row) {
#pragma unroll
        for (int a = 0; a < kAttnPreloadTiles; ++a) {
            if (a * kAttnTile + slot == n - 1) {
                kr[a] = reinterpret_cast<const uint4*>(s.kv_row)[dc];
                vr[a] = reinterpret_cast<const uint4*>(s.kv_row + kHeadDim)[dc];
            }
        }
    }

    // 2. Scores q.k / sqrt(128). A warp whose key slots of a tile all lie past the unit's keys skips
    //    the tile (MK_UNIT_KEY_WARPS), and warps past the first `key_warps` skip steps 2 and 4.
    const int key_warps = kKeyWarps ? min(kWarps, ceil_div(n, kSlotsPerWarp)) : kWarps;
    if constexpr (kKeyWarps && kUnitScoreReduceScatter) {
        if (warp < key_warps) {  // warp-uniform
            float d[kAttnPreloadTiles * kGqa];  // index a * kGqa + h
#pragma unroll
            for (int h = 0; h < kGqa; ++h) {
                const float4 lo = reinterpret_cast<const float4*>(s.q + h * kHeadDim)[2 * dc];
                const float4 hi = reinterpret_cast<const float4*>(s.q + h * kHeadDim)[2 * dc + 1];
#pragma unroll
                for (int a = 0; a < kAttnPreloadTiles; ++a) d[a * kGqa + h] = dot8_bf16_f32(kr[a], lo, hi);
            }
            const int which = reduce_scatter4<16>(d, dc);  // d[0]: the sum of (a, h) = which
            const int a = which / kGqa, h = which % kGqa, j = a * kAttnTile + slot;
            if ((dc & 3) == 0 && j < n) s.scores[h * kAttnMaxChunk + j] = d[0] * kAttnScale;
        }
    } else {
#pragma unroll
        for (int a = 0; a < kAttnPreloadTiles; ++a) {
            const int j = a * kAttnTile + slot;
            if (kKeyWarps && a * kAttnTile + warp * kSlotsPerWarp >= n) continue;  // warp-uniform
#pragma unroll
            for (int h = 0; h < kGqa; ++h) {
                const float4 lo = reinterpret_cast<const float4*>(s.q + h * kHeadDim)[2 * dc];
                const float4 hi = reinterpret_cast<const float4*>(s.q + h * kHeadDim)[2 * dc + 1];
                const float d = half_warp_sum(dot8_bf16_f32(kr[a], lo, hi));
                if (dc == 0 && j < n) s.scores[h * kAttnMaxChunk + j] = d * kAttnScale;
            }
        }
    }
    __syncthreads();
    MK_MARK(layer * MK_TRACE_EVENTS_PER_LAYER + 28);

    // 3. Softmax statistics per q head; scores become e^(s - max).
    unit_softmax<kKeyWarps && kUnitSmallSoftmax>(n, s, lane, warp);
    MK_MARK(layer * MK_TRACE_EVENTS_PER_LAYER + 29);

    // 4. Sum of e^(s - max) * v over the unit's keys, one q head at a time (fewer live registers).
#pragma unroll
    for (int h = 0; h < kGqa; ++h) {
        if (warp >= key_warps) break;  // warp-uniform
        float acc[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[i] = 0.f;
#pragma unroll
        for (int a = 0; a < kAttnPreloadTiles; ++a) {
            const int j = a * kAttnTile + slot;
            if (j < n) axpy8_bf16(acc, s.scores[h * kAttnMaxChunk + j], vr[a]);
        }
        // Lanes l and l + 16 hold the same dims for two key slots; then the warps' sums meet in smem.
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[i] += __shfl_xor_sync(kFullMask, acc[i], 16);
        if (lane < 16) {
#pragma unroll
            for (int i = 0; i < 8; ++i) s.partial[(warp * kGqa + h) * kHeadDim + dc * 8 + i] = acc[i];
        }
    }
    __syncthreads();

    // 5. The unit's output (one unit per head) or its record for the combine.
    MK_MARK(layer * MK_TRACE_EVENTS_PER_LAYER + 25);
    unit_output(P, g, u, split, s, out, tid, rec, key_warps);
    MK_MARK(layer * MK_TRACE_EVENTS_PER_LAYER + 26);
    if (split.units > 1 && !Rec::kLL) combine_if_last_stream(P, g, split.units, s, out);
    __syncthreads();  // shared buffers are reused by the next unit
}

// dataflow_splitk_o: the block's attention outputs [o0, o0 + no) (all of kv head g's group) into
// out_s, merged from the head's `units` LL records (o, max, sum per q head) by every block for its
// own outputs: no arrival counter, fence or last unit, and no exchange of the merged outputs. One
// warp first waits for one word of each unit's record (the last warp while the issuing warp pumps
// the ring, MK_PUMP_WARP; else the issuing warp, pumping between polls); a group of
// lanes merges each output, lane j taking units j, j + lanes, ..., and the lanes meet by
// shuffles (max, then the rescaled sums). As few lanes as the units need, at most kMergeLanes:
// every busy lane polls L2 until its words land, and on the H200 (2026-11-22, ms at p = 1 / 200 /
// 1000, 1 / 4 / 16 units) one lane per output measured 0.655 / 0.708 / 0.868 (16 units one
// after another), 8 lanes 0.673 / 0.698 / 0.758, 32 lanes 0.688 / 0.714 / 0.788.
#ifndef MK_MERGE_LANES
#define MK_MERGE_LANES 8
#endif
constexpr int kMergeLanes = MK_MERGE_LANES;  // most lanes per output (tuning: a power of two, 1 .. 32)
static_assert(kMergeLanes >= 1 && kMergeLanes <= 32 && (kMergeLanes & (kMergeLanes - 1)) == 0,
              "MK_MERGE_LANES: a power of two, 1 .. 32");
// Units a merge lane loads before it waits (two cover 16 units per head on 8 lanes).
constexpr int kMergeBatch = 2;

// The merge's order of the block's threads: the issuing warp, which pumps the ring until the records'
// probes are seen, swapped with the warp before the probing (last) one, so that a merge of up to 14
// warps' outputs (4 lanes x 16 outputs at p=200) starts polling its words at once instead of
// waiting for the pump to stop (MK_MERGE_REMAP=0: thread order).
#ifndef MK_MERGE_REMAP
#define MK_MERGE_REMAP 1
#endif
static_assert(kRingIssueWarp < kWarps - 2 && kRecordProbeWarp == kWarps - 1, "merge_thread's warp order");
__device__ __forceinline__ int merge_thread() {
    const int warp = threadIdx.x >> 5;
    const int w = !MK_MERGE_REMAP ? warp
                  : warp == kRingIssueWarp ? kWarps - 2
                  : warp == kWarps - 2    ? kRingIssueWarp
                                          : warp;
    return w * 32 + (threadIdx.x & 31);
}

template <class Pump>
__device__ __forceinline__ void merge_unit_records(const MegakernelParams& P, const LLIO& rec, int g, int units,
                                                   int o0, int no, float* out_s, const Shared& s, int wait_id,
                                                   Pump pump) {
    const float* head = P.attn_partial + static_cast<size_t>(g) * units * kGqa * kPartialStride;
    auto gather = [&](auto probe_pump) {
        (void)ll_gather_probes(rec.word(head), units, rec.flag,
                               [](int u) { return (u * kGqa + kGqa - 1) * kPartialStride + kHeadDim + 1; },
                               probe_pump);
    };
    poll_while_pumping(s, kRecordProbeWarp, wait_id, gather, pump);
#ifdef MK_TRACE
    if (threadIdx.x == kRecordProbeWarp * 32)  // trace event 27: the records' probes seen
        mk_trace[blockIdx.x * MK_TRACE_STRIDE + (wait_id - 1) / 4 * MK_TRACE_EVENTS_PER_LAYER + 27] = clock64();
#endif
    // No block barrier: the other warps load and poll their few words at once (H200, 2026-11-22:
    // 0.654 vs 0.663 ms at p=1 when they waited for the probes; 1024 accumulator words per block
    // polled that way instead made every step 6-10% slower, so rmsnorm_acc keeps its barrier).
    int lanes = 1;  // per output: the units rounded up to a power of two, at most kMergeLanes
    while (lanes < units && lanes < kMergeLanes) lanes *= 2;
    for (int base = 0; base < no * lanes; base += kThreads) {  // uniform over the block
        const int t = base + merge_thread(), i = t / lanes, sub = t % lanes;
        const bool active = i < no;
        const int q = o0 - g * kGqa * kHeadDim + i, h = q / kHeadDim, d = q % kHeadDim;
        float m = -3.402823466e38f, l = 0.f, acc = 0.f;
        // kMergeBatch of the lane's units at a time: their words in flight and waited for together.
        for (int u0 = sub; active && u0 < units; u0 += kMergeBatch * lanes) {
            auto addr = [&](int j) {
                const float* r = head + ((u0 + j / 3 * lanes) * kGqa + h) * kPartialStride;
                return rec.word(r + (j % 3 == 0 ? kHeadDim : j % 3 == 1 ? kHeadDim + 1 : d));
            };
            unsigned long long w[3 * kMergeBatch];
#pragma unroll
            for (int j = 0; j < 3 * kMergeBatch; ++j)
                w[j] = u0 + j / 3 * lanes < units ? ll_load_word(addr(j)) : ll_landed(rec.flag);
            ll_wait_words(w, rec.flag, addr);
#pragma unroll
            for (int k = 0; k < kMergeBatch; ++k) {
                if (u0 + k * lanes < units)
                    merge_record(m, l, acc, ll_word_value(w[3 * k]), ll_word_value(w[3 * k + 1]),
                                 ll_word_value(w[3 * k + 2]));
            }
        }
        float m_all = m;
        for (int off = lanes / 2; off > 0; off >>= 1) m_all = fmaxf(m_all, __shfl_xor_sync(kFullMask, m_all, off));
        const float scale = expf(m - m_all);  // 0 for a lane without units
        float num = acc * scale, den = l * scale;
        for (int off = lanes / 2; off > 0; off >>= 1) {
            num += __shfl_xor_sync(kFullMask, num, off);
            den += __shfl_xor_sync(kFullMask, den, off);
        }
        if (active && sub == 0) out_s[i] = num / den;
    }
}

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
// Measured on the H200 (2026-11-22, dataflow_splitk vs dataflow at p=1 / 200): one copy, stride 1,
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
// same 64 lines: two copies halve them for twice the reader's loads. H200 (2026-11-22,
// dataflow_splitk_o at p = 1 / 200 / 1000 against one copy): 2 copies 1.038x / 1.020x / 1.021x,
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

// ---- the decode step ----------------------------------------------------------------------------
template <int kVariant>
__device__ __forceinline__ void decode_step(const MegakernelParams& P, const int token, const int position) {
    using T = Variant<kVariant>;
    const Shared s = carve_shared();
    const int nb = gridDim.x, b = blockIdx.x;
    const int warp = threadIdx.x >> 5;
    const int n_keys = position + 1;

    // Head groups (head-based variant): blocks [g * bpg, (g + 1) * bpg) serve kv head g; the
    // blocks past kv_heads * bpg sit the head-local phases out. launch.py ensures nb >= kv_heads.
    const int bpg = nb / kKVHeads;
    const int group = b / bpg, part = b - group * bpg;
    const AttentionSplit split = attention_split(n_keys, T::head_groups ? bpg : nb / kKVHeads);
    const int attention_units = kKVHeads * split.units;

    int r0, nr;  // this block's rows of the phase at hand
    constexpr unsigned kNoCap = 0xffffffffu;

    if (b == 0) {
        for (int i = threadIdx.x; i < kHidden; i += kThreads)
            P.residual[i] = bf16_to_float(P.embed[static_cast<size_t>(token) * kHidden + i]);
    }

    for (int layer = 0; layer < kLayers; ++layer) {
        const bf16_t* w_qkv = P.w_qkv + static_cast<size_t>(layer) * kQkvRows * kHidden;
        const bf16_t* w_o = P.w_o + static_cast<size_t>(layer) * kHidden * kQDim;
        const bf16_t* w_gu = P.w_gate_up + static_cast<size_t>(layer) * 2 * kInter * kHidden;
        const bf16_t* w_down = P.w_down + static_cast<size_t>(layer) * kHidden * kInter;

        auto store_qkv = [&](int row, const float* v) { P.qkv[row] = v[0]; return 0.f; };
        auto add_to_residual = [&](int row, const float* v) {
            const float x = load_l2_f32(P.residual + row) + v[0];
            P.residual[row] = x;
            return x * x;
        };
        auto swiglu = [&](int row, const float* v) {
            const float gate = v[0], up = v[1];
            P.act[row >> 1] = gate / (1.0f + expf(-gate)) * up;
            return 0.f;
        };

        // Phase 1: input RMSNorm (its own phase in the baseline) and the QKV projection.
        rmsnorm_into_vec<T>(P, layer == 0, token, P.norm_in + layer * kHidden, s);
        if (T::prefetch) {
            split_range(kHidden, b, nb, &r0, &nr);
            prefetch_rows<kQDim>(w_o, r0, nr, kNoCap);
            if (threadIdx.x == 0) {
                for (int w = b; w < attention_units; w += nb) {  // the KV ranges of this block's units
                    const int start = (w % split.units) * split.chunk;
                    prefetch_unit_kv(P, layer, w / split.units, start, min(split.chunk, n_keys - start));
                }
            }
        }
        if (T::head_groups) {
            if (group < kKVHeads) {
                unsigned* group_word = P.counters + kKVHeads + group;
                split_range(kGroupRows, part, bpg, &r0, &nr);
                block_gemv<kHidden, 1>(w_qkv, group * kGroupRows + r0, nr, s.vec, s.partial, false, store_qkv);
                subset_barrier(group_word, bpg, part == 0);
                for (int r = part + bpg * warp; r < kGqa + 2; r += bpg * kWarps)
                    qk_task(P, layer, position, group, r, P.q_rot + (group * kGqa + r) * kHeadDim);
                subset_barrier(group_word, bpg, part == 0);
                for (int u = part; u < split.units; u += bpg) attention_unit<false>(P, layer, position, group, u, split, s);
            }
        } else {
            split_range(kQkvRows, b, nb, &r0, &nr);
            block_gemv<kHidden, 1>(w_qkv, r0, nr, s.vec, s.partial, false, store_qkv);
            grid_sync(P.counters + kGridWordSlot);
            // Phase 2 (not fused): QK-norm, RoPE and the KV-cache write, one warp per head.
            if (!T::fused_qk) {
                constexpr int kTasks = kKVHeads * (kGqa + 2);
                for (int t = b + nb * warp; t < kTasks; t += nb * kWarps) {
                    const int g = t / (kGqa + 2), r = t % (kGqa + 2);
                    qk_task(P, layer, position, g, r, P.q_rot + (g * kGqa + r) * kHeadDim);
                }
                grid_sync(P.counters + kGridWordSlot);
            }
            // Phase 3: attention, split over (kv head, key chunk) units.
            if (T::prefetch) {
                split_range(kInter, b, nb, &r0, &nr);
                prefetch_rows<kHidden>(w_gu, 2 * r0, 2 * nr, kNoCap);
            }
            for (int w = b; w < attention_units; w += nb)
                attention_unit<T::fused_qk>(P, layer, position, w / split.units, w % split.units, split, s);
        }
        grid_sync(P.counters + kGridWordSlot);

        // Phase 4: O-projection + residual (fused: + the partial sums of squares of the next norm).
        load_vector_to_shared(P.attn_out, kQDim, s.vec);
        if (T::prefetch) {
            split_range(kHidden, b, nb, &r0, &nr);
            prefetch_rows<kInter>(w_down, r0, nr, kNoCap);
        }
        split_range(kHidden, b, nb, &r0, &nr);
        {
            const float sq = block_gemv<kQDim, 1>(w_o, r0, nr, s.vec, s.partial, false, add_to_residual);
            if (T::norm_partials) publish_sumsq(P, sq, nr, s.misc);
        }
        grid_sync(P.counters + kGridWordSlot);

        // Phase 5: post-attention RMSNorm (its own phase in the baseline), gate/up, SiLU * up.
        rmsnorm_into_vec<T>(P, false, token, P.norm_post + layer * kHidden, s);
        if (T::prefetch) {
            if (layer + 1 < kLayers) {
                split_range(kQkvRows, b, nb, &r0, &nr);
                prefetch_rows<kHidden>(w_qkv + static_cast<size_t>(kQkvRows) * kHidden, r0, nr, kNoCap);
            } else {
                split_range(static_cast<int>(P.vocab), b, nb, &r0, &nr);
                prefetch_rows<kHidden>(P.embed, r0, nr, 2u * kThreads * kGemvUnroll * 16u);
            }
        }
        split_range(kInter, b, nb, &r0, &nr);
        block_gemv<kHidden, 2>(w_gu, 2 * r0, 2 * nr, s.vec, s.partial, false, swiglu);
        grid_sync(P.counters + kGridWordSlot);

        // Phase 6: down projection + residual.
        load_vector_to_shared(P.act, kInter, s.vec);
        split_range(kHidden, b, nb, &r0, &nr);
        {
            const float sq = block_gemv<kInter, 1>(w_down, r0, nr, s.vec, s.partial, false, add_to_residual);
            if (T::norm_partials) publish_sumsq(P, sq, nr, s.misc);
        }
        grid_sync(P.counters + kGridWordSlot);
    }

    // Final RMSNorm and the tied LM head; greedy argmax is left to the caller.
    rmsnorm_into_vec<T>(P, kLayers == 0, token, P.norm_final, s);
    auto store_logit = [&](int row, const float* v) { P.logits[row] = v[0]; return 0.f; };
    split_range(static_cast<int>(P.vocab), b, nb, &r0, &nr);
    block_gemv<kHidden, 1>(P.embed, r0, nr, s.vec, s.partial, T::prefetch, store_logit);
}


// The stream variant's decode step: the phases and grid syncs of `fused` (5 per layer), with every
// weight load carried by the register stream w[] (loads for a phase are issued while the phase
// before it finishes), attention loading K/V before its queries, and each block's residual rows
// kept in shared memory (the O and down epilogues of a block update the same rows, so they need
// not read them back from L2).
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

// A thread's RMSNorm weights (rows threadIdx.x, + kThreads, ...) as floats, loaded before a wait
// so that their L2 round trip does not follow it.
template <int kPer>
__device__ __forceinline__ void norm_weights_to_registers(const bf16_t* weight, float (&gain)[kPer]) {
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
        const int i = threadIdx.x + j * kThreads;
        gain[j] = i < kHidden ? bf16_to_float(weight[i]) : 0.f;
    }
}

// RMSNorm of the residual stream into s.vec (vec_slot order), read as LL words of `flag`: every
// block's sum of squares (the probes: each block writes it after its rows), then every residual
// row (the dataflow variant's rmsnorm_into_vec).
// kKeepResidual (dataflow_splitk): also keep every residual row, as read, in s.own.
template <bool kKeepResidual = false, class Pump>
__device__ __forceinline__ void rmsnorm_ll(const LLBuffers& ll, unsigned flag, const bf16_t* weight, const Shared& s,
                                           Pump pump) {
    constexpr int kPer = (kHidden + kThreads - 1) / kThreads;
    float gain[kPer];  // before the wait, as in rmsnorm_acc
    norm_weights_to_registers(weight, gain);
    if (ring_issuer()) {
        const float total = warp_sum(ll_gather_probes(ll.sumsq, static_cast<int>(gridDim.x), flag,
                                                      [](int i) { return i; }, pump));
        if ((threadIdx.x & 31) == 0) s.misc[0] = total;
    }
    __syncthreads();
    unsigned long long w[kPer];
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
        const int i = threadIdx.x + j * kThreads;
        w[j] = i < kHidden ? ll_load_word(ll.residual + i) : ll_landed(flag);
    }
    const float inv_rms = 1.0f / sqrtf(s.misc[0] / static_cast<float>(kHidden) + kRmsEps);
    ll_wait_words(w, flag, [&](int j) { return ll.residual + threadIdx.x + j * kThreads; });
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
        const int i = threadIdx.x + j * kThreads;
        if (i < kHidden) {
            const float h = ll_word_value(w[j]);
            if constexpr (kKeepResidual) s.own[i] = h;
            s.vec[vec_slot(i)] = h * inv_rms * gain[j];
        }
    }
    __syncthreads();
}

// The split-K variants' RMSNorm after a split projection: the residual h = s.own (the residual
// before that projection, every row) + the blocks' partials summed in accumulator `slot` (the down
// sums: the input / final RMSNorm; in dataflow_splitk_o also the O sums: the post-attention one).
// One warp first polls one word per lane, spread over the vector, until each has every block's
// contribution (warp 0 while the issuing warp pumps the ring, MK_PUMP_WARP; else the issuing warp
// itself, pumping between polls); then every thread loads its words once
// and re-polls only a word still short. h goes back to s.own, its RMSNorm into s.vec (vec_slot
// order); the sum of squares is the block's own, over all rows, so no per-block sums are exchanged.
template <class Pump>
__device__ __forceinline__ void rmsnorm_acc(const MegakernelParams& P, int slot, const bf16_t* weight, const Shared& s,
                                            Pump pump) {
    constexpr int kPer = (kHidden + kThreads - 1) / kThreads;
    constexpr int kProbeStride = kHidden / 32;
    // The RMSNorm weights in registers before the wait: loaded after it, their L2 round trip
    // followed the block barriers on the critical path (norm_rope_head says what it bought).
    float gain[kPer];
    norm_weights_to_registers(weight, gain);
    if (kAccBulk && threadIdx.x == 0) bulk_wait_read();  // s.scores staged the last accumulator words
    auto poll_probes = [&](auto probe_pump) {
        const int lane = threadIdx.x & 31, copy = lane % kAccCopies;
        const unsigned long long* probe = acc_word(P, slot, copy, lane * kProbeStride + kProbeStride - 1);
        const unsigned expected = acc_blocks(copy);
        for (;;) {
            const unsigned count = acc_count(ll_load_word(probe));
            if (warp_all(count == expected)) break;
            acc_check_count(count, expected);
            probe_pump();
            ll_backoff();
        }
    };
    // Wait ids 2 slot + 2 increase over a launch's waits (merge_unit_records: 4L + 1).
    poll_while_pumping(s, kProbeWarp, 2 * slot + 2, poll_probes, pump);
    __syncthreads();
    unsigned long long w[kPer][kAccCopies];
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
        const int i = threadIdx.x + j * kThreads;
#pragma unroll
        for (int c = 0; c < kAccCopies; ++c) {
            if (i < kHidden) w[j][c] = ll_load_word(acc_word(P, slot, c, i));
        }
    }
    // Words still short: reloaded together, one round trip per pass.
    for (;;) {
        bool short_word = false;
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
            const int i = threadIdx.x + j * kThreads;
#pragma unroll
            for (int c = 0; c < kAccCopies; ++c) {
                const unsigned expected = acc_blocks(c);
                if (i < kHidden && acc_count(w[j][c]) != expected) {
                    acc_check_count(acc_count(w[j][c]), expected);
                    w[j][c] = ll_load_word(acc_word(P, slot, c, i));
                    short_word = true;
                }
            }
        }
        if (!short_word) break;
        ll_backoff();
    }
    float sq = 0.f;
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
        const int i = threadIdx.x + j * kThreads;
        if (i < kHidden) {
            long long fixed = 0;
#pragma unroll
            for (int c = 0; c < kAccCopies; ++c) fixed += acc_fixed(w[j][c], acc_blocks(c));
            const float h = s.own[i] + acc_to_float(fixed);
            s.own[i] = h;
            sq = fmaf(h, h, sq);
        }
    }
    const float inv_rms = 1.0f / sqrtf(block_sum<kThreads>(sq, s.misc) / static_cast<float>(kHidden) + kRmsEps);
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
        const int i = threadIdx.x + j * kThreads;
        if (i < kHidden) s.vec[vec_slot(i)] = s.own[i] * inv_rms * gain[j];
    }
    __syncthreads();
}

// load_vector_to_shared for LL words of `flag`, after its probes: all of a thread's loads are issued
// before it waits.
template <int kN, class Index, class Pump>
__device__ __forceinline__ void ll_vector_to_shared(const unsigned long long* src, unsigned flag, float* vec,
                                                    int probes, Index probe, Pump pump) {
    if (ring_issuer()) (void)ll_gather_probes(src, probes, flag, probe, pump);
    __syncthreads();
    constexpr int kPer = (kN + kThreads - 1) / kThreads;
    unsigned long long w[kPer];
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
        const int i = threadIdx.x + j * kThreads;
        w[j] = i < kN ? ll_load_word(src + i) : ll_landed(flag);
    }
    ll_wait_words(w, flag, [&](int j) { return src + threadIdx.x + j * kThreads; });
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
        const int i = threadIdx.x + j * kThreads;
        if (i < kN) vec[vec_slot(i)] = ll_word_value(w[j]);
    }
    __syncthreads();
}

// The stream/ring step: the phases of `fused` (5 grid syncs per layer), with every weight load
// carried by the register stream w[] (stream) or the shared-memory ring (ring), attention loading
// K/V before its queries, and each block's residual rows kept in shared memory (the O and down
// epilogues of a block update the same rows, so they need not read them back from L2). The
// dataflow variant runs the same phases with no grid sync: each exchange is LL words.
// In dataflow_splitk_o's half loop, the QKV and gate/up GEMVs from one call site, where their pages have one shape
// (Qwen3-0.6B's: 16 rows; an odd count for one row per output differs).
#ifndef MK_HALF_GEMV
#define MK_HALF_GEMV 1
#endif
constexpr bool kHalfGemv = MK_HALF_GEMV != 0 && ring_page_rows(kHidden, 1) == ring_page_rows(kHidden, 2) &&
                           ring_parts(kHidden, 1) == ring_parts(kHidden, 2);

template <int kVariant>
__device__ __forceinline__ void decode_step_stream(const MegakernelParams& P, const int token, const int position) {
    using T = Variant<kVariant>;
    static_assert((T::stream || T::ring) && T::fused_qk && T::norm_partials && T::redundant_norm && !T::head_groups,
                  "the stream step implements the fused phase list");
    static_assert(!T::dataflow || T::ring, "dataflow runs on the ring");
    const Shared s = carve_shared();
    const int nb = gridDim.x, b = blockIdx.x;
    const AttentionSplit split = attention_split(position + 1, nb / kKVHeads / (T::splitk_o ? kSplitOUnitsDivisor : 1),
                                                 T::dataflow ? kAttnMinChunk : kAttnTile);
    const int attention_units = kKVHeads * split.units;
    // MK_UNIT_PUMP, in dataflow_splitk_o (in dataflow_splitk it made ptxas spill on sm_90)
    const bool units_busy = kUnitPump && T::splitk_o && attention_units * 100 >= MK_UNIT_PUMP * nb;
    // MK_UNIT_KEYS_SHARED: the block's first unit takes its keys from s.unit_keys
    const bool keys_shared = unit_keys_shared_built() && T::splitk_o && MK_UNIT_KV_PREFETCH &&
                             ceil_div(split.chunk, kAttnTile) <= kAttnPreloadTiles;
    // Read before this block produces anything; block 0 advances it at its very end, which it
    // reaches only after every block's residual rows (so after every block has read it).
    const unsigned launch = T::dataflow ? load_volatile_u32(P.counters + kLaunchSlot) : 0u;
    auto flag = [&](int layer, int phase) { return ll_flag(launch, layer, phase); };
    static_assert(!T::splitk_o || T::splitk, "splitk_o builds on splitk");
    constexpr int kSplit = kSplitOf<T>;
    // Accumulator slots (split-K variants): a layer's down sums, and its O sums (dataflow_splitk_o).
    auto down_slot = [](int layer) { return T::splitk_o ? 2 * layer + 1 : layer; };
    auto o_slot = [](int layer) { return 2 * layer; };
    auto exchange_barrier = [&]() {
        if constexpr (!T::dataflow) grid_sync(P.counters + kGridWordSlot);
    };

    // Weights: the register stream (stream) or the shared-memory ring (ring); either way layer 0's
    // QKV weights are in flight from here on.
    uint4 w[kStreamDepth];
    Ring ring{0, 0, 0, 0, 0, 0, 0};
    if constexpr (T::ring) {
        if (kPumpWarp && T::splitk && threadIdx.x == 0) *reinterpret_cast<volatile int*>(s.misc + kPumpSlot) = 0;
        if (kUnitPump && T::splitk_o && threadIdx.x == 0)
            *reinterpret_cast<volatile unsigned*>(s.misc + kUnitTasksSlot) = 0u;
        // Lighter rows for the unit blocks (light_split) only while they are under a quarter of the
        // grid; the others' slices grow at most to a page over their uniform share.
        ring = ring_start<T::dataflow, kSplit>(P, s, T::splitk_o && 4 * attention_units < nb ? attention_units : 0);
        if (b < attention_units && !units_busy) ring.pace = kAttnBlockPace<kSplit>;
    } else {
        stream_start(P, s, w);
    }
    // GEMV on segment `seg` of the weight stream, whichever carries it.
    auto gemv = [&](auto k_tag, auto rows_per_out_tag, int seg, auto epilogue) -> float {
        constexpr int kK = decltype(k_tag)::value, kRowsPerOut = decltype(rows_per_out_tag)::value;
        if constexpr (T::ring) {
            return ring_gemv<kK, kRowsPerOut, T::dataflow, kSplit>(ring, seg, s.vec, s, epilogue);
        } else {
            return stream_gemv<kK, kRowsPerOut>(w, seg, stream_slice(P, seg), s.vec, s, epilogue);
        }
    };
    // The issuing warp, while it waits for other blocks (dataflow): the next page if the pace allows.
    auto pump = [&]() {
        if constexpr (T::ring) ring_pump<kSplit>(s, ring, ring.pace);
    };
    using Hidden = IntTag<kHidden>;
    using QDim = IntTag<kQDim>;
    using Inter = IntTag<kInter>;

    {
        int r0, nr;
        split_range(kHidden, b, nb, &r0, &nr);
        if constexpr (T::splitk) {  // every block keeps the whole residual stream
            r0 = 0;
            nr = kHidden;
        }
        for (int i = r0 + threadIdx.x; i < r0 + nr; i += kThreads) {
            const float x = bf16_to_float(P.embed[static_cast<size_t>(token) * kHidden + i]);
            s.own[i] = x;
            if constexpr (!T::dataflow) P.residual[i] = x;
        }
    }

    int layer = 0;  // the epilogues below read it
    auto store_qkv = [&](int row, const float* v) {
        if constexpr (T::dataflow) {
            ll_store(ll_buffers(P).qkv + row, v[0], flag(layer, kLLQkv));
        } else {
            P.qkv[row] = v[0];
        }
        return 0.f;
    };
    auto add_to_residual = [&](int row, const float* v, int phase) {
        const float x = s.own[row] + v[0];
        s.own[row] = x;
        if constexpr (T::dataflow) {
            ll_store(ll_buffers(P).residual + row, x, flag(layer, phase));
        } else {
            P.residual[row] = x;
        }
        return x * x;
    };
    auto add_o = [&](int row, const float* v) { return add_to_residual(row, v, kLLResidualO); };
    auto add_down = [&](int row, const float* v) { return add_to_residual(row, v, kLLResidualDown); };
    auto swiglu = [&](int row, const float* v) {
        const float gate = v[0], up = v[1];
        const float a = gate / (1.0f + expf(-gate)) * up;
        if constexpr (T::splitk) {  // the block's own activations: its down slice's inputs
            s.scores[(row - s.ring_rows[4 * layer + 2].x) >> 1] = a;
        } else if constexpr (T::dataflow) {
            ll_store(ll_buffers(P).act + (row >> 1), a, flag(layer, kLLAct));
        } else {
            P.act[row >> 1] = a;
        }
        return 0.f;
    };
    // The next RMSNorm's partial sum of squares of this block's residual rows.
    auto publish = [&](float sq, int nrows, int phase) {
        if constexpr (T::dataflow) {
            const float total = nrows <= 32 ? (threadIdx.x < 32 ? warp_sum(sq) : 0.f) : block_sum<kThreads>(sq, s.misc);
            if (threadIdx.x == 0) ll_store(ll_buffers(P).sumsq + b, total, flag(layer, phase));
        } else {
            publish_sumsq(P, sq, nrows, s.misc);
        }
    };
    // The input / post-attention / final RMSNorm into s.vec.
    auto rmsnorm = [&](bool from_embedding, const bf16_t* weight, int from_layer, int phase) {
        if constexpr (T::splitk) {
            if (!from_embedding && phase == kLLResidualDown) {
                rmsnorm_acc(P, down_slot(from_layer), weight, s, pump);
                return;
            }
        }
        if constexpr (T::dataflow) {
            if (!from_embedding) {
                rmsnorm_ll<T::splitk>(ll_buffers(P), flag(from_layer, phase), weight, s, pump);
                return;
            }
        }
        rmsnorm_into_vec<T>(P, from_embedding, token, weight, s);
    };

    // Attention with QK-norm, RoPE and the KV-cache write in its prologue, in units of
    // (kv head, chunk of keys); `rec`: how units of a split head leave their records.
    auto attention_units_phase = [&](auto rec) {
        for (int u = b; u < attention_units; u += nb) {
            const int g = u / split.units, unit = u % split.units;
            if constexpr (T::dataflow) {
                const LLIO in{P.qkv, ll_buffers(P).qkv, flag(layer, kLLQkv)};
                const LLIO out{P.attn_out, ll_buffers(P).attn_out, flag(layer, kLLAttnOut)};
                if (ceil_div(split.chunk, kAttnTile) <= kAttnPreloadTiles) {
                    if constexpr (T::splitk_o)
                        attention_unit_preloaded<kUnitKeyWarps>(P, layer, position, g, unit, split, s, in, out,
                                                                rec, pump, units_busy, keys_shared && u == b);
                    else
                        attention_unit_preloaded<kUnitKeyWarps>(P, layer, position, g, unit, split, s, in, out,
                                                                rec);
                } else {
                    attention_unit<true, true>(P, layer, position, g, unit, split, s, in, out, rec);
                }
            } else {
                if (ceil_div(split.chunk, kAttnTile) <= kAttnPreloadTiles)
                    attention_unit_preloaded(P, layer, position, g, unit, split, s);
                else
                    attention_unit<true, true>(P, layer, position, g, unit, split, s);
            }
        }
    };
    if constexpr (T::splitk_o) {
        // dataflow_splitk_o by half layers, so that the code both halves share (the RMSNorm reading an
        // accumulator, the split-K projection and its publication) is emitted once: the step's code
        // is at the edge of what the instruction cache holds (DESIGN.md, "The LM head, and code
        // size": 1-1.6% faster than the layer loop below, 2026-11-25). Half 2L runs the input RMSNorm, QKV and attention of layer L, then
        // its O projection split over K: the units leave (o, max, sum) records as LL words, each
        // block merges those of its rows [o0, o0 + no) of W_o^T (o_split_rows) into s.vec and adds
        // its partial of the whole O output into the layer's O accumulator, so neither a combine nor
        // the whole attention output crosses between blocks. Half 2L + 1 runs the post-attention
        // RMSNorm (the residual plus the O sums), gate/up, then the down projection; half 2 x layers
        // the final RMSNorm.
        for (int half = 0;; ++half) {
            layer = half >> 1;
            const bool attn = (half & 1) == 0;
            const int ev = layer * MK_TRACE_EVENTS_PER_LAYER;
            (void)ev;
            if (attn) MK_MARK(ev + 0);
            if (MK_UNIT_KV_PREFETCH && attn && half < 2 * kLayers && threadIdx.x == 0) {
                for (int u = b; u < attention_units; u += nb) {
                    const int start = (u % split.units) * split.chunk;
                    const int n = min(split.chunk, position + 1 - start);
                    if (keys_shared && u == b)
                        copy_unit_keys(P, layer, u / split.units, start, n, s);
                    else
                        prefetch_unit_kv(P, layer, u / split.units, start, n);
                }
            }
            if (half == 0) {
                rmsnorm_into_vec<T>(P, true, token, P.norm_in, s);
            } else {
                // Input / final RMSNorm from the down sums of layer - 1, post-attention from the O sums.
                const bf16_t* weight = half == 2 * kLayers ? P.norm_final
                                       : attn              ? P.norm_in + layer * kHidden
                                                           : P.norm_post + layer * kHidden;
                rmsnorm_acc(P, attn ? down_slot(layer - 1) : o_slot(layer), weight, s, pump);
                // This block's share of an accumulator every block has finished reading, zeroed for
                // the next launch. After the input RMSNorm: layer - 1's O sums (every block added its
                // down partial, computed after its whole read of them, and the sums just read count
                // every block). After the post-attention one: layer - 1's down sums (every block
                // added its O partial after its whole read of them). The last down sums: after the
                // LM head.
                if (attn || layer > 0) acc_clear(P, attn ? o_slot(layer - 1) : down_slot(layer - 1), false);
            }
            MK_MARK(ev + (attn ? 1 : 9));
            if (half == 2 * kLayers) break;
            if constexpr (kHalfGemv) {  // one GEMV for QKV and gate/up: its code emitted once
                ring_gemv<kHidden, 0, T::dataflow, kSplit>(
                    ring, 4 * layer + (attn ? 0 : 2), s.vec, s,
                    [&](int row, const float* v) { return attn ? store_qkv(row, v) : swiglu(row, v); }, attn ? 1 : 2);
            }
            if (attn) {
                if constexpr (!kHalfGemv) gemv(Hidden{}, IntTag<1>{}, 4 * layer, store_qkv);
                MK_MARK(ev + 2);
                MK_MARK(ev + 3);
                const LLIO rec{P.attn_partial, ll_buffers(P).partial, flag(layer, kLLAttnOut)};
                attention_units_phase(rec);
                MK_MARK(ev + 4);
                MK_MARK(ev + 5);
                int o0, no;
                o_split_rows(b, nb, &o0, &no);
                if (no > 0)  // wait id 4L + 1: between the rmsnorm_acc waits of this layer (2 slot + 2)
                    merge_unit_records(P, rec, o0 / (kGqa * kHeadDim), split.units, o0, no, s.vec, s, 4 * layer + 1,
                                       pump);
                MK_MARK(ev + 6);
            } else {
                if constexpr (!kHalfGemv) gemv(Hidden{}, IntTag<2>{}, 4 * layer + 2, swiglu);
                MK_MARK(ev + 10);
                MK_MARK(ev + 11);
                MK_MARK(ev + 12);
            }
            ring_splitk<true, kSplit>(ring, 4 * layer + (attn ? 1 : 3), attn ? s.vec : s.scores, s);
            acc_publish(P, attn ? o_slot(layer) : down_slot(layer), s);
            MK_MARK(ev + (attn ? 7 : 13));
            MK_MARK(ev + (attn ? 8 : 14));
        }
    } else {
        for (layer = 0; layer < kLayers; ++layer) {
            const int ev = layer * MK_TRACE_EVENTS_PER_LAYER;
            (void)ev;
            MK_MARK(ev + 0);
            // QKV projection (the input RMSNorm is computed by every block).
            rmsnorm(layer == 0, P.norm_in + layer * kHidden, layer - 1, kLLResidualDown);
            MK_MARK(ev + 1);
            gemv(Hidden{}, IntTag<1>{}, 4 * layer, store_qkv);
            MK_MARK(ev + 2);
            exchange_barrier();
            MK_MARK(ev + 3);

            attention_units_phase(PlainIO{});
            MK_MARK(ev + 4);
            exchange_barrier();
            MK_MARK(ev + 5);

            // O-projection + residual, publishing the next RMSNorm's partial sums of squares.
            if constexpr (T::dataflow) {
                // Probes: the last output of each kv head's group of q heads (the unit or the combine
                // that writes it writes the whole group).
                ll_vector_to_shared<kQDim>(ll_buffers(P).attn_out, flag(layer, kLLAttnOut), s.vec, kKVHeads,
                                           [](int g) { return (g + 1) * kGqa * kHeadDim - 1; }, pump);
            } else {
                load_vector_to_shared(P.attn_out, kQDim, s.vec);
            }
            MK_MARK(ev + 6);
            {
                const StreamSlice x = stream_slice(P, 4 * layer + 1);
                publish(gemv(QDim{}, IntTag<1>{}, 4 * layer + 1, add_o), x.nrows, kLLResidualO);
            }
            MK_MARK(ev + 7);
            exchange_barrier();
            MK_MARK(ev + 8);

            // Post-attention RMSNorm, gate/up, SiLU * up.
            rmsnorm(false, P.norm_post + layer * kHidden, layer, kLLResidualO);
            if constexpr (T::splitk) {
                // Every block has now published this layer's residual rows, each computed from its whole
                // read of the previous layer's down sums: they are free, and this block zeroes its share
                // for the next launch. (The last layer's: after the LM head.)
                if (layer > 0) acc_clear(P, down_slot(layer - 1), false);
            }
            MK_MARK(ev + 9);
            gemv(Hidden{}, IntTag<2>{}, 4 * layer + 2, swiglu);
            MK_MARK(ev + 10);
            exchange_barrier();
            MK_MARK(ev + 11);

            // Down projection + residual.
            if constexpr (T::splitk) {
                // The block's partial of the whole output, into the layer's accumulator; the next
                // RMSNorm adds it to the residual.
                MK_MARK(ev + 12);
                ring_splitk<true, kSplit>(ring, 4 * layer + 3, s.scores, s);
                acc_publish(P, down_slot(layer), s);
                MK_MARK(ev + 13);
                MK_MARK(ev + 14);
                continue;
            } else if constexpr (T::dataflow) {
                // Probes: the last activation of each block's slice.
                ll_vector_to_shared<kInter>(ll_buffers(P).act, flag(layer, kLLAct), s.vec, nb, [nb](int i) {
                    return static_cast<int>(static_cast<long long>(kInter) * (i + 1) / nb) - 1;
                }, pump);
            } else {
                load_vector_to_shared(P.act, kInter, s.vec);
            }
            MK_MARK(ev + 12);
            {
                const StreamSlice x = stream_slice(P, 4 * layer + 3);
                publish(gemv(Inter{}, IntTag<1>{}, 4 * layer + 3, add_down), x.nrows, kLLResidualDown);
            }
            MK_MARK(ev + 13);
            exchange_barrier();
            MK_MARK(ev + 14);
        }

        // Final RMSNorm.
        MK_MARK(kLayers * MK_TRACE_EVENTS_PER_LAYER + 0);
        rmsnorm(kLayers == 0, P.norm_final, kLayers - 1, kLLResidualDown);
    }

    // The tied LM head.
    // dataflow_splitk: the block has read the last layer's accumulator; the last block to say so
    // zeroes it after the LM head (the atomic's answer is not needed before then).
    unsigned readers_before = 0u;
    if (T::splitk && threadIdx.x == 0) readers_before = atomicAdd(P.counters + kAccReadSlot, 1u);
    MK_MARK(kLayers * MK_TRACE_EVENTS_PER_LAYER + 1);
    auto store_logit = [&](int row, const float* v) { P.logits[row] = v[0]; return 0.f; };
    if constexpr (T::ring)
        ring_gemv<kHidden, 1, T::dataflow, kSplit, true>(ring, kLmSeg, s.vec, s, store_logit);
    else
        gemv(Hidden{}, IntTag<1>{}, 4 * kLayers, store_logit);
    MK_MARK(kLayers * MK_TRACE_EVENTS_PER_LAYER + 2);
    if constexpr (T::ring && T::dataflow && kLmDynamic) {
        // Every block's claims are done once it has seen the end marker: the last block through
        // here zeroes the claim count for the next launch. No fence: each claim is an atomic whose
        // answer the block used before its end marker, so it was performed in L2 before the block
        // counted itself done here, and the zeroing store comes after every block did (relaxed
        // atomics, as the accumulators' last reader in dataflow_splitk).
        if (threadIdx.x == 0 && atomicAdd(P.counters + kLmDoneSlot, 1u) == static_cast<unsigned>(nb - 1)) {
            P.counters[kLmClaimSlot] = 0u;
            P.counters[kLmDoneSlot] = 0u;
        }
    }
    if constexpr (T::splitk) {
        int* last = reinterpret_cast<int*>(s.misc + kFlagSlot);
        if (threadIdx.x == 0) *last = readers_before == static_cast<unsigned>(nb - 1);
        __syncthreads();
        if (*last) {
            acc_clear(P, down_slot(kLayers - 1), true);
            if (threadIdx.x == 0) P.counters[kAccReadSlot] = 0u;
        }
    }
    if (T::dataflow && b == 0 && threadIdx.x == 0) atomicAdd(P.counters + kLaunchSlot, 1u);
}

}  // namespace mk

// Bytes of dynamic shared memory each block needs (launch.py computes the same number; a GPU test
// reads this to check).
extern "C" {
#ifdef MK_TRACE
__device__ long long mk_trace[MK_TRACE_MAX_BLOCKS * MK_TRACE_STRIDE];
#endif
__device__ int mk_shared_bytes = mk::kSharedBytes;
__device__ int mk_shared_bytes_ring = mk::kSharedBytesRing;
}

template <int kVariant>
__global__ void __launch_bounds__(mk::kThreads, 1)
    megakernel_decode(const __grid_constant__ mk::MegakernelParams params, const int token, const int position) {
    if constexpr (mk::Variant<kVariant>::stream || mk::Variant<kVariant>::ring) {
        mk::decode_step_stream<kVariant>(params, token, position);
    } else {
        mk::decode_step<kVariant>(params, token, position);
    }
}

template __global__ void megakernel_decode<0>(const __grid_constant__ mk::MegakernelParams, const int, const int);
template __global__ void megakernel_decode<1>(const __grid_constant__ mk::MegakernelParams, const int, const int);
template __global__ void megakernel_decode<2>(const __grid_constant__ mk::MegakernelParams, const int, const int);
template __global__ void megakernel_decode<3>(const __grid_constant__ mk::MegakernelParams, const int, const int);
template __global__ void megakernel_decode<4>(const __grid_constant__ mk::MegakernelParams, const int, const int);
template __global__ void megakernel_decode<5>(const __grid_constant__ mk::MegakernelParams, const int, const int);
template __global__ void megakernel_decode<6>(const __grid_constant__ mk::MegakernelParams, const int, const int);
template __global__ void megakernel_decode<7>(const __grid_constant__ mk::MegakernelParams, const int, const int);
template __global__ void megakernel_decode<8>(const __grid_constant__ mk::MegakernelParams, const int, const int);
template __global__ void megakernel_decode<9>(const __grid_constant__ mk::MegakernelParams, const int, const int);
