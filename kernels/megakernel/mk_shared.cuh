// The block's dynamic shared memory: the size of every region (kSharedBytes, kSharedBytesRing;
// layout.py computes the same numbers), Shared and carve_shared; and kv_offset, a KV-cache row's
// offset.
#pragma once

#include "mk_device.cuh"
#include "mk_config.cuh"
#include "mk_variants.cuh"

namespace mk {

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

}  // namespace mk
