// Attention: QK-norm + RoPE + the KV-cache write (qk_task: a phase of its own, or the attention
// prologue in the fused variants), the attention units over (kv head, chunk of keys), the
// combine of a head's units, and the merge of their LL records in dataflow_splitk_o.
#pragma once

#include "mk_device.cuh"
#include "mk_config.cuh"
#include "mk_shared.cuh"
#include "mk_ring.cuh"
#include "mk_exchange.cuh"

namespace mk {

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
        // path (H200, with the same in rmsnorm_acc and rmsnorm_ll: 1.009x / 1.013x /
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
// when loaded after it (H100). A/B at p = 1 / 200 / 1000: H100 1.009x / 1.019x / 1.015x
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
// are then loaded while the unit waits for its q/k/v. A/B at p = 1 / 200 / 1000: H200
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
// q/k/v are in (unit_by_warps: no block barrier between its scores, softmax and P.V). A/B
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
// the unit's scores, softmax and P.V at 1.6-1.7 us whatever its keys (traced on an H200:
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
// loop's unrolled remainder handling (same results). H200, at p = 1 / 50 / 200 /
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
// MK_ATTN_BLOCK_PACE and the tasks stay on warps 0-3. H200 (against no unit pumping,
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
// every busy lane polls L2 until its words land, and on the H200 (ms at p = 1 / 200 /
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
    // No block barrier: the other warps load and poll their few words at once (H200:
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

}  // namespace mk
