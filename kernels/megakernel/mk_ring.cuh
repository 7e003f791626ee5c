// The weight ring (ring and dataflow variants): pages of the weight stream copied into shared
// memory ahead of the GEMVs, paced while a block waits for other blocks, the LM head shared out
// at run time, and ring_gemv.
#pragma once

#include "mk_device.cuh"
#include "mk_config.cuh"
#include "mk_shared.cuh"
#include "mk_gemv.cuh"
#include "mk_stream.cuh"

namespace mk {

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
// Against the static split (dataflow_splitk_o, A/B at p = 1 / 100 / 200 / 1000): H100
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
// computed, and every group waited for it: the traced LM head (dataflow_splitk_o at p=1)
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
// measured best on the H200 (p=1 / 200: 1 page 0.678 / 0.733 ms, 2 pages 0.697 / 0.751,
// 3 pages 0.700 / 0.752).
#ifndef MK_SPLITK_PACED_IN_FLIGHT
#define MK_SPLITK_PACED_IN_FLIGHT 1
#endif
template <int kSplit>
constexpr int kPacedInFlight = kSplit ? MK_SPLITK_PACED_IN_FLIGHT : MK_RING_PACED_IN_FLIGHT;
static_assert(kRingPacedInFlight >= 1 && kRingPacedInFlight <= kRingSlots, "pages in flight: 1 .. kRingSlots");
// The pace of the blocks that run attention units: they issue no page while they compute, and
// fall behind in their ring. H200 (dataflow_splitk_o at p = 1 / 200 / 1000 against
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
// (dataflow_splitk_o at p = 1 / 200 / 1000): 1.034x / 1.035x / 0.994x; with the units'
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
// (LmIssue, from one place: code inlined at every ring issue cost 1 us per layer on an H200):
// the rest of the static rows, then the claimed chunks, asking for the next chunk a chunk
// ahead so the atomic's round trip overlaps the pages; it leaves each page's first row in
// s.misc[kLmSlotRowSlot + slot] for the consumer, and after the last chunk an end marker (-1, a
// slot completed without a copy). With a static split the step ended with the slowest block's
// slice: blocks' LM heads took 68-80 us on an H200, some SMs persistently slower.
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
// the loop is latency-bound (4 iterations for K = 1024). H200 (dataflow_splitk_o at
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

}  // namespace mk
