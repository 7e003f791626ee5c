// One persistent cooperative launch per decode token for a Qwen3-shaped model (batch 1).
//
// Every block of the grid walks the same phase list; grid_sync() (cooperative_groups) separates
// phases whose inputs another block writes, except in the dataflow variants (7-9), where each value
// another block needs travels as an LL word (value + flag) or is summed in an L2 accumulator, and
// the consumer waits for exactly those words. The ten variants share this source and one launch
// harness; they differ in the Variant<V> switches (README.md: syncs per layer). Variants 0-4
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
//
// This file is the translation unit: the decode steps and the kernels. The parts they are built
// from, in the order they are included (each header includes what it needs):
//   mk_device.cuh     device helpers: bf16 bits, loads, L2 prefetch, asynchronous page copies,
//                     reductions, fences and barriers, LL words, fixed-point accumulators
//   mk_config.cuh     the model shape macros, the constants, struct MegakernelParams
//   mk_variants.cuh   the Variant<V> switches
//   mk_shared.cuh     the dynamic shared memory layout (Shared)
//   mk_gemv.cuh       the GEMV input vector, RMSNorm into it, block_gemv
//   mk_stream.cuh     the weight stream (stream_slice, stream_gemv)
//   mk_ring.cuh       the weight ring (ring_gemv), its pacing, the dynamic LM head
//   mk_exchange.cuh   phase inputs written by other blocks: plain buffers or LL words
//   mk_attention.cuh  QK-norm + RoPE + KV-cache write, attention units, combine and merge
//   mk_splitk.cuh     the projections split over K and their L2 accumulators
#include "mk_device.cuh"
#include "mk_config.cuh"
#include "mk_variants.cuh"
#include "mk_shared.cuh"
#include "mk_gemv.cuh"
#include "mk_stream.cuh"
#include "mk_ring.cuh"
#include "mk_exchange.cuh"
#include "mk_attention.cuh"
#include "mk_splitk.cuh"

namespace mk {

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

// ---- the stream, ring and dataflow step ----------------------------------------------------------
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
        // size": 1-1.6% faster than the layer loop below). Half 2L runs the input RMSNorm, QKV and attention of layer L, then
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
