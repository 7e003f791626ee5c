// The ten variants of the decode megakernel as compile-time switches (Variant<V>, V the index in
// family.py VARIANTS), and which projections a ring variant splits over K.
#pragma once

namespace mk {

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

}  // namespace mk
