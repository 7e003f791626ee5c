// Device helpers for the decode megakernel: bf16 bit conversions, cache-controlled loads,
// L2 prefetch, warp/block reductions and a barrier over a subset of the grid's blocks.
//
// bf16 values are carried as raw 16-bit patterns (bf16_t) so the kernel needs no cuda_bf16.h
// and the CPU emulator (emulate/) can compile the same source. With MK_EMULATE defined, the
// emulator's header supplies the CUDA built-ins and this file swaps inline PTX for plain C++.
#pragma once

#ifdef MK_EMULATE
#include "emulate/cuda_emulation.h"
#elif !defined(MK_OWN_GRID_BARRIER)
#include <cooperative_groups.h>
#endif

typedef unsigned short bf16_t;

// Phase timing (diagnostics; kernels/megakernel/trace.py builds with -DMK_TRACE): thread 0 of each
// block stores clock64() at numbered points of the ring variant's step into mk_trace[block][event].
#define MK_TRACE_EVENTS_PER_LAYER 30
// The GEMV whose first page group events 19-22 of a layer time (page waits, dot products, block
// barrier, epilogue): 0 QKV, 1 O, 2 gate/up.
#ifndef MK_TRACE_SUBPHASE_SEGMENT
#define MK_TRACE_SUBPHASE_SEGMENT 2
#endif
#define MK_TRACE_MAX_BLOCKS 1024
#ifdef MK_TRACE
extern "C" __device__ long long mk_trace[MK_TRACE_MAX_BLOCKS * (MK_TRACE_EVENTS_PER_LAYER * 64 + 8)];
#define MK_TRACE_STRIDE (MK_TRACE_EVENTS_PER_LAYER * 64 + 8)
#define MK_MARK(event)                                                                              \
    do {                                                                                            \
        if (threadIdx.x == 0) mk_trace[blockIdx.x * MK_TRACE_STRIDE + (event)] = clock64();          \
    } while (0)
#define MK_MARK_VALUE(event, value)                                                                 \
    do {                                                                                            \
        if (threadIdx.x == 0) mk_trace[blockIdx.x * MK_TRACE_STRIDE + (event)] = (value);            \
    } while (0)
#else
#define MK_MARK(event) ((void)0)
#define MK_MARK_VALUE(event, value) ((void)0)
#endif

namespace mk {

constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float bf16_to_float(bf16_t b) { return __uint_as_float(static_cast<unsigned>(b) << 16); }
// The two bf16 halves of a 32-bit word: element 2i is the low half (little-endian memory order).
__device__ __forceinline__ float bf16_low(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_high(unsigned w) { return __uint_as_float(w & 0xffff0000u); }

// Round to nearest even, as the reference (reference.py: round_bf16) does. NaN is not special-cased:
// no NaN reaches a rounding point unless something is already wrong, and the tests catch NaNs.
__device__ __forceinline__ bf16_t float_to_bf16(float f) {
    unsigned u = __float_as_uint(f);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<bf16_t>(u >> 16);
}

// Dot product of 8 bf16 weights with 8 fp32 activations (lo: elements 0-3, hi: 4-7), accumulated
// in fp32 in element order.
__device__ __forceinline__ float dot8_bf16_f32(const uint4 w, const float4 lo, const float4 hi) {
    float s = bf16_low(w.x) * lo.x;
    s = fmaf(bf16_high(w.x), lo.y, s);
    s = fmaf(bf16_low(w.y), lo.z, s);
    s = fmaf(bf16_high(w.y), lo.w, s);
    s = fmaf(bf16_low(w.z), hi.x, s);
    s = fmaf(bf16_high(w.z), hi.y, s);
    s = fmaf(bf16_low(w.w), hi.z, s);
    s = fmaf(bf16_high(w.w), hi.w, s);
    return s;
}

// ---- loads ------------------------------------------------------------------------------------
// Weights never change during a launch and are read once per token: the non-coherent path, and no
// L1 allocation (they would only evict the activations).
__device__ __forceinline__ uint4 load_weights_16B(const bf16_t* p) {
#ifdef MK_EMULATE
    return *reinterpret_cast<const uint4*>(p);
#else
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
#endif
}

// Data written earlier in this launch by another block (activations, partial sums, the KV row of
// the current position): read at L2 ("cache global"), never through a possibly stale L1 line.
__device__ __forceinline__ uint4 load_l2_16B(const void* p) {
#ifdef MK_EMULATE
    return *reinterpret_cast<const uint4*>(p);
#else
    uint4 v;
    asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
#endif
}

__device__ __forceinline__ float load_l2_f32(const float* p) {
#ifdef MK_EMULATE
    return *p;
#else
    float v;
    asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
#endif
}

// ---- L2 prefetch ------------------------------------------------------------------------------
// Asks the memory system to bring [p, p + bytes) into L2 without waiting for it. Called by ONE
// thread. On sm_90 a single bulk-prefetch instruction covers the range (p and bytes must be
// multiples of 16); before sm_90 there is no bulk form and this does nothing.
__device__ __forceinline__ void prefetch_l2_async(const void* p, unsigned bytes) {
#if !defined(MK_EMULATE) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (bytes >= 16u) {
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes & ~15u) : "memory");
    }
#else
    (void)p;
    (void)bytes;
#endif
}

// ---- the shared-memory weight ring (ring variant) ------------------------------------------------
// Pages of weights are copied global -> shared memory asynchronously, so they arrive while the block
// waits at a grid barrier or computes something else, without holding registers. sm_90: one thread
// issues one bulk copy (cp.async.bulk, the TMA engine) per page, completing on the slot's mbarrier,
// which every consumer waits on. Before sm_90: the 32 lanes of one warp issue 16-byte cp.async
// copies, one commit group per page, and the consumer's wait is that warp's wait_group plus a block
// barrier. The emulator copies at issue time (a slot overwritten too early then shows as wrong
// values).
__device__ __forceinline__ unsigned shared_address(const void* p) {
#ifdef MK_EMULATE
    (void)p;
    return 0u;
#else
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
#endif
}

// Once per launch, by one thread, before any copy: the slots' barriers (arrival count 1).
__device__ __forceinline__ void page_barrier_init(unsigned long long* bar) {
#if defined(MK_EMULATE)
    *bar = 0;  // the emulator counts the copies into the slot
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_address(bar)) : "memory");
#else
    (void)bar;
#endif
}

// Makes initialised barriers visible to the copy engine; the caller then syncs the block.
__device__ __forceinline__ void page_barrier_init_fence() {
#if !defined(MK_EMULATE) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

// One range of a page copy: `bytes` from global src into shared dst.
struct CopyRange {
    void* dst;
    const void* src;
};

// Called by all 32 lanes of the issuing warp: kRanges ranges of `bytes` each (a multiple of 16; dst
// and src 16-byte aligned) from global into shared memory, completing together on `bar` (one arrival).
// kEvictFirst (sm_90): the lines leave L2 before any others (the LM head's, so that what the next
// step starts with, its code among them, is still there).
template <bool kEvictFirst = false, int kRanges>
__device__ __forceinline__ void page_copy_ranges_async(const CopyRange (&ranges)[kRanges], unsigned bytes,
                                                       unsigned long long* bar) {
#if defined(MK_EMULATE)
    if ((threadIdx.x & 31) == 0) {
        for (const CopyRange& r : ranges) memcpy(r.dst, r.src, bytes);
        ++*bar;
    }
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if ((threadIdx.x & 31) == 0) {
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(bar)),
                     "r"(kRanges * bytes)
                     : "memory");
        for (const CopyRange& r : ranges) {
            if constexpr (kEvictFirst) {
                unsigned long long policy;
                asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
                asm volatile(
                    "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;"
                    ::"r"(shared_address(r.dst)), "l"(r.src), "r"(bytes), "r"(shared_address(bar)), "l"(policy)
                    : "memory");
            } else {
                asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                             ::"r"(shared_address(r.dst)), "l"(r.src), "r"(bytes), "r"(shared_address(bar))
                             : "memory");
            }
        }
    }
#else
    (void)bar;
    for (const CopyRange& r : ranges) {  // 16-byte cp.async copies, lane l taking chunks l, l + 32, ...
        const unsigned d = shared_address(r.dst);
        const char* g = static_cast<const char*>(r.src);
        for (unsigned off = (threadIdx.x & 31) * 16u; off < bytes; off += 512u)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d + off), "l"(g + off) : "memory");
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

// page_copy_ranges_async of one range.
template <bool kEvictFirst = false>
__device__ __forceinline__ void page_copy_async(void* dst, const void* src, unsigned bytes, unsigned long long* bar) {
    page_copy_ranges_async<kEvictFirst>({CopyRange{dst, src}}, bytes, bar);
}

// Called by all 32 lanes of the issuing warp: completes the slot's current use with no copy (a
// marker the consumer reads beside the slot).
__device__ __forceinline__ void page_arrive_empty(unsigned long long* bar) {
#if defined(MK_EMULATE)
    if ((threadIdx.x & 31) == 0) ++*bar;
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if ((threadIdx.x & 31) == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(shared_address(bar)) : "memory");
#else
    (void)bar;
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

// The issuing warp's placeholder for a page that does not exist (end of the stream): before sm_90
// the consumer's wait counts commit groups, one per page issued.
__device__ __forceinline__ void page_copy_none() {
#if !defined(MK_EMULATE) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

// Every thread of the block, for each page of a group: until the page in `bar`'s slot, its use
// number `use` (the mbarrier phase parity is use mod 2), has landed (sm_90; before sm_90
// page_group_wait does the waiting; the emulator waits until that copy has been issued).
__device__ __forceinline__ void page_wait(unsigned long long* bar, unsigned use) {
#if defined(MK_EMULATE)
    while (*reinterpret_cast<volatile unsigned long long*>(bar) <= use) emu_yield();
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const unsigned parity = use & 1u;
    asm volatile(
        "{\n\t.reg .pred done;\n"
        "WAIT:\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n\t"
        "@!done bra WAIT;\n}" ::"r"(shared_address(bar)),
        "r"(parity)
        : "memory");
#else
    (void)bar;
    (void)use;
#endif
}

// Whether the copy of use number `use` into `bar`'s slot has landed, without waiting (sm_90 and
// the emulator; before sm_90 there is no per-page test, and this says yes: the pacing that uses it
// then only limits by free slots).
__device__ __forceinline__ bool page_landed(unsigned long long* bar, unsigned use) {
#if defined(MK_EMULATE)
    return *reinterpret_cast<volatile unsigned long long*>(bar) > use;
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    unsigned done;
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(shared_address(bar)), "r"(use & 1u)
        : "memory");
    return done != 0u;
#else
    (void)bar;
    (void)use;
    return true;
#endif
}

// Every thread of the block, after page_wait for each page of a group: before sm_90, the issuing
// warp waits until at most `pending` of its commit groups (the pages issued after the group) are
// outstanding, then the block syncs. Nothing to do on sm_90 or in the emulator.
__device__ __forceinline__ void page_group_wait(int pending, bool issuer) {
#if !defined(MK_EMULATE) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
    if (issuer) {
        switch (pending) {  // wait_group takes an immediate
            case 0: asm volatile("cp.async.wait_group 0;" ::: "memory"); break;
            case 1: asm volatile("cp.async.wait_group 1;" ::: "memory"); break;
            case 2: asm volatile("cp.async.wait_group 2;" ::: "memory"); break;
            case 3: asm volatile("cp.async.wait_group 3;" ::: "memory"); break;
            default: asm volatile("cp.async.wait_group 4;" ::: "memory"); break;
        }
    }
    __syncthreads();
#else
    (void)pending;
    (void)issuer;
#endif
}

// ---- reductions -------------------------------------------------------------------------------
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
    return v;
}

// Whether `pred` holds in every lane of the warp (all 32 lanes call it).
__device__ __forceinline__ bool warp_all(bool pred) {
#ifdef MK_EMULATE
    int v = pred ? 1 : 0;
    for (int offset = 16; offset > 0; offset >>= 1) v &= __shfl_xor_sync(kFullMask, v, offset);
    return v != 0;
#else
    return __all_sync(kFullMask, pred);
#endif
}

// Sum over each group of 16 consecutive lanes (the xor offsets stay inside the half-warp).
__device__ __forceinline__ float half_warp_sum(float v) {
#pragma unroll
    for (int offset = 8; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
    return v;
}

// Four values per lane summed over groups of kLanes lanes (16: a half-warp, 32: the warp), scattered:
// afterwards v[0] of a lane is its group's sum of v[i], i = the returned index (2 x the lane's
// kLanes / 2 bit + its kLanes / 4 bit); the same additions in the same order as kLanes-wide
// butterfly sums (half_warp_sum, warp_sum) of each v[i], with 5 (16 lanes) or 6 (32) shuffles
// instead of 16 or 20.
template <int kLanes>
__device__ __forceinline__ int reduce_scatter4(float (&v)[4], int lane) {
    static_assert(kLanes == 16 || kLanes == 32, "reduce_scatter4: half-warps or whole warps");
    const int hi = (lane & (kLanes / 2)) != 0, mid = (lane & (kLanes / 4)) != 0;
#pragma unroll
    for (int k = 0; k < 2; ++k) {  // keep pair `hi`, send the other
        const float keep = hi ? v[2 + k] : v[k], send = hi ? v[k] : v[2 + k];
        v[k] = keep + __shfl_xor_sync(kFullMask, send, kLanes / 2);
    }
    {
        const float keep = mid ? v[1] : v[0], send = mid ? v[0] : v[1];
        v[0] = keep + __shfl_xor_sync(kFullMask, send, kLanes / 4);
    }
#pragma unroll
    for (int offset = kLanes / 8; offset > 0; offset >>= 1) v[0] += __shfl_xor_sync(kFullMask, v[0], offset);
    return 2 * hi + mid;
}

// Sum of one value per thread over the block; every thread gets the total. `scratch` holds one
// float per warp. Each thread adds the per-warp sums in the same order, so the result is
// deterministic. Ends with a barrier so `scratch` can be reused at once.
template <int kThreads>
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    constexpr int kWarps = kThreads / 32;
    v = warp_sum(v);
    if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
    __syncthreads();
    float total = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) total += scratch[w];
    __syncthreads();
    return total;
}

// ---- fences and barriers -----------------------------------------------------------------------
// Release/acquire fence at GPU scope. Paired with a relaxed atomic it publishes this thread's
// earlier writes (release) or makes other blocks' published writes visible (acquire); lighter than
// __threadfence(), which is a sequentially consistent fence.
__device__ __forceinline__ void fence_gpu() {
#ifdef MK_EMULATE
    emu_fence();
#else
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
#endif
}

__device__ __forceinline__ unsigned load_volatile_u32(const unsigned* p) {
#ifdef MK_EMULATE
    return emu_atomic_load(p);
#else
    return *reinterpret_cast<const volatile unsigned*>(p);
#endif
}

__device__ __forceinline__ void backoff() {
#ifdef MK_EMULATE
    emu_yield();
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    __nanosleep(32);
#endif
}

// Barrier over `expected` co-resident blocks that share `word` (zero-initialised once, never
// reset). Same scheme as cooperative_groups' grid barrier: the master block adds
// 0x80000000 - (expected - 1) and the others add 1, so the top bit flips exactly when the last
// block arrives and the low bits return to their previous value: the word is ready for the next
// barrier with no reset, whatever `expected` the next launch uses.
__device__ __forceinline__ void subset_barrier(unsigned* word, unsigned expected, bool master) {
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned add = master ? 0x80000000u - (expected - 1u) : 1u;
        fence_gpu();  // release: the block's writes (ordered before by __syncthreads) go first
        const unsigned before = atomicAdd(word, add);
        while (((before ^ load_volatile_u32(word)) & 0x80000000u) == 0u) backoff();
        fence_gpu();  // acquire: the other blocks' writes are visible from here on
    }
    __syncthreads();
}

// The whole-grid barrier between phases. Requires a cooperative launch (launch.py does one):
// cooperative_groups' grid.sync(), or with MK_OWN_GRID_BARRIER the same scheme on `word` (for
// toolchains without the cooperative_groups headers, and to compare the two).
__device__ __forceinline__ void grid_sync(unsigned* word) {
#ifdef MK_OWN_GRID_BARRIER
    subset_barrier(word, gridDim.x, blockIdx.x == 0);
#else
    (void)word;
    cooperative_groups::this_grid().sync();
#endif
}

// ---- LL words (dataflow variant) ------------------------------------------------------------------
// A value and the flag of the exchange that wrote it, in one naturally aligned 64-bit word: stores
// and loads of it are single-copy atomic, so a reader that sees the flag sees the value. Loads are
// relaxed at GPU scope (served by L2, never by a stale L1 line).
__device__ __forceinline__ void ll_store(unsigned long long* p, float value, unsigned flag) {
    const unsigned long long word = (static_cast<unsigned long long>(flag) << 32) | __float_as_uint(value);
#ifdef MK_EMULATE
    *reinterpret_cast<volatile unsigned long long*>(p) = word;
#else
    asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" ::"l"(p), "l"(word) : "memory");
#endif
}

__device__ __forceinline__ unsigned long long ll_load_word(const unsigned long long* p) {
#ifdef MK_EMULATE
    return *reinterpret_cast<const volatile unsigned long long*>(p);
#else
    unsigned long long word;
    asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(word) : "l"(p) : "memory");
    return word;
#endif
}

// Between two polls of an LL word: nothing on the GPU (__nanosleep's granularity is far coarser
// than the ~1 us an exchange should take, and only one warp per block polls for long); the
// emulator lets the other fibers run.
__device__ __forceinline__ void ll_backoff() {
#ifdef MK_EMULATE
    emu_yield();
#endif
}

// An LL word's parts: whether it carries `flag` (its upper half), and its value (the lower half).
__device__ __forceinline__ bool ll_carries(unsigned long long word, unsigned flag) {
    return static_cast<unsigned>(word >> 32) == flag;
}
__device__ __forceinline__ float ll_word_value(unsigned long long word) {
    return __uint_as_float(static_cast<unsigned>(word));
}

// The value of the word at p, given its first load `word`: reloads until it carries `flag`.
__device__ __forceinline__ float ll_value(const unsigned long long* p, unsigned long long word, unsigned flag) {
    while (!ll_carries(word, flag)) {
        ll_backoff();
        word = ll_load_word(p);
    }
    return ll_word_value(word);
}

__device__ __forceinline__ float ll_load(const unsigned long long* p, unsigned flag) {
    return ll_value(p, ll_load_word(p), flag);
}

// A word that needs no wait: entries of ll_wait_words' array that a thread does not use.
__device__ __forceinline__ unsigned long long ll_landed(unsigned flag) {
    return static_cast<unsigned long long>(flag) << 32;
}

// Waits until every word of w (first loads, in flight together) carries `flag`, reloading the stale
// ones together: one L2 round trip per pass. Checked one after another with ll_value, a stale
// first word cost its round trip, then each next word's stale first load another (MK_LL_WAIT_SERIAL
// keeps that order, for A/B runs). `addr(j)`: the address of word j.
template <int N, class Addr>
__device__ __forceinline__ void ll_wait_words(unsigned long long (&w)[N], unsigned flag, Addr addr) {
#ifdef MK_LL_WAIT_SERIAL
#pragma unroll
    for (int j = 0; j < N; ++j) {
        while (!ll_carries(w[j], flag)) {
            ll_backoff();
            w[j] = ll_load_word(addr(j));
        }
    }
#else
    for (;;) {
        bool stale = false;
#pragma unroll
        for (int j = 0; j < N; ++j) {
            if (!ll_carries(w[j], flag)) {
                w[j] = ll_load_word(addr(j));
                stale = true;
            }
        }
        if (!stale) return;
        ll_backoff();
    }
#endif
}

// ---- fixed-point accumulators (dataflow_splitk) --------------------------------------------------
// A sum over blocks in one 64-bit word: each block adds (1 << 56) + its value in units of 2^-28 with
// one integer atomic. Integer addition is exact and associative, so the sum is the same in
// whatever order the blocks arrive (deterministic), and the top 8 bits count the blocks that have
// added: a reader that sees the count it expects has the whole sum, with no fence, flag or
// barrier. A block's value saturates at +-2^19 (NaN becomes +2^19, so a broken kernel shows huge
// values rather than a NaN turned into 0), which keeps 255 blocks' sum inside the 56-bit field.
// (2^-24 units, tried first, added as much rounding error as the fp32 sums themselves: measured on
// the H200, logits 1.6x further from the reference than `dataflow`'s. 2^-28 is 16x finer; 2^-32,
// measured too, bounded each block's value at 2^15, which a real checkpoint's outlier channels
// could approach.)
constexpr int kAccCountShift = 56;
constexpr float kAccScale = 268435456.0f;            // 2^28
constexpr float kAccLimit = 524288.0f * kAccScale;   // 2^19, in units of 2^-28

__device__ __forceinline__ unsigned long long acc_contribution(float value) {
    float fixed = value * kAccScale;
    fixed = fabsf(fixed) <= kAccLimit ? fixed : (fixed < 0.f ? -kAccLimit : kAccLimit);  // NaN: +limit
    return (1ull << kAccCountShift) + static_cast<unsigned long long>(__float2ll_rn(fixed));
}

// A word that counts more blocks than add into it can only be left over from a launch that did not
// finish (its accumulators were not zeroed): waiting for the expected count would spin forever, so
// the kernel stops with an error instead (a trap leaves the CUDA context unusable; a new process
// allocates zeroed buffers). Best effort: a reader that sees the expected count first does not trap.
__device__ __forceinline__ void acc_check_count(unsigned count, unsigned expected) {
    if (count > expected) {
#ifdef MK_EMULATE
        emu_fail("dataflow_splitk: an accumulator counts more blocks than the grid has (left over from an "
                 "unfinished launch)");
#else
        __trap();
#endif
    }
}

// Adds `value` into the accumulator word at p (a reduction: nothing is returned).
__device__ __forceinline__ void acc_add(unsigned long long* p, float value) { atomicAdd(p, acc_contribution(value)); }

// Zeroes an accumulator word for the next launch. A relaxed store at GPU scope, like the reads it
// follows (a plain store would formally race with them).
__device__ __forceinline__ void acc_zero(unsigned long long* p) {
#ifdef MK_EMULATE
    *reinterpret_cast<volatile unsigned long long*>(p) = 0ull;
#else
    asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" ::"l"(p), "l"(0ull) : "memory");
#endif
}

// Blocks that have added into `word` (the value field is within +-2^55, so rounding recovers it).
__device__ __forceinline__ unsigned acc_count(unsigned long long word) {
    return static_cast<unsigned>((word + (1ull << (kAccCountShift - 1))) >> kAccCountShift);
}

// The sum in `word`, in units of 2^-28, given its count.
__device__ __forceinline__ long long acc_fixed(unsigned long long word, unsigned count) {
    return static_cast<long long>(word - (static_cast<unsigned long long>(count) << kAccCountShift));
}

__device__ __forceinline__ float acc_to_float(long long fixed) { return static_cast<float>(fixed) * (1.0f / kAccScale); }

// Adds n 64-bit words from shared memory into global memory with one bulk reduction (the TMA
// engine, sm_90), by ONE thread, after the block's writes to src are ordered before it (each
// writer: bulk_source_fence, then a block barrier). bulk_wait_read (the same thread) returns once
// src may be overwritten. The emulator adds word by word.
__device__ __forceinline__ void bulk_source_fence() {
#if !defined(MK_EMULATE) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

__device__ __forceinline__ void bulk_add_u64(unsigned long long* dst, const unsigned long long* src, int n) {
#if defined(MK_EMULATE)
    for (int i = 0; i < n; ++i) atomicAdd(dst + i, src[i]);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.u64 [%0], [%1], %2;\n\t"
                 "cp.async.bulk.commit_group;" ::"l"(dst), "r"(shared_address(src)), "r"(n * 8) : "memory");
#else
    for (int i = 0; i < n; ++i) atomicAdd(dst + i, src[i]);
#endif
}

__device__ __forceinline__ void bulk_wait_read() {
#if !defined(MK_EMULATE) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
#endif
}

#ifndef MK_EMULATE
// Base of the block's dynamic shared memory (the emulator supplies its own per-block buffer).
__device__ __forceinline__ unsigned char* mk_shared_memory() {
    extern __shared__ __align__(16) unsigned char mk_dynamic_smem[];
    return mk_dynamic_smem;
}
#endif

__device__ __forceinline__ int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Even split of `total` items into `parts`: part `part` gets [*begin, *begin + *count).
__device__ __forceinline__ void split_range(int total, int part, int parts, int* begin, int* count) {
    const long long lo = static_cast<long long>(total) * part / parts;
    const long long hi = static_cast<long long>(total) * (part + 1) / parts;
    *begin = static_cast<int>(lo);
    *count = static_cast<int>(hi - lo);
}

}  // namespace mk
