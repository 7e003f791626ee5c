// Merge two partial attention results (a "prefix" and a "suffix" over disjoint key sets)
// into one, using each partial's log-sum-exp (LSE) of the attention logits:
//
//   m = max(p_lse, s_lse)
//   out[t, h, :] = (e^(p_lse-m) * prefix[t, h, :] + e^(s_lse-m) * suffix[t, h, :])
//                  / (e^(p_lse-m) + e^(s_lse-m))
//   out_lse[h, t] = log(e^(p_lse-m) + e^(s_lse-m)) + m
//
// Layouts: outputs [num_tokens, num_heads, HEAD_SIZE] (fp16 or bf16), LSEs [num_heads, num_tokens]
// float32. An LSE of +inf or -inf marks an empty partial: it gets weight 0 (vLLM's convention for
// +inf). When both partials are empty the output is 0 and the output LSE is -inf.
//
// Everything sits in this one file on purpose: CuPy's compile cache keys on the source text it is
// handed, not on included headers, so an edited header would leave stale binaries behind.
//
// 16-bit values are held as raw bit patterns and converted with PTX, so the source compiles under
// NVRTC without cuda_fp16.h / cuda_bf16.h. The bf16 conversions need sm_80 or newer.

struct fp16_t {
  unsigned short bits;
};
struct bf16_t {
  unsigned short bits;
};

__device__ __forceinline__ float to_float(fp16_t x) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
  return f;
}

__device__ __forceinline__ float to_float(bf16_t x) {
  return __uint_as_float(static_cast<unsigned int>(x.bits) << 16);
}

__device__ __forceinline__ void from_float(fp16_t& out, float f) {
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(out.bits) : "f"(f));
}

__device__ __forceinline__ void from_float(bf16_t& out, float f) {
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(out.bits) : "f"(f));
}

// Two 16-bit values packed in one 32-bit word: element 0 in the low half.
template <typename T>
struct Pair;

template <>
struct Pair<fp16_t> {
  static __device__ __forceinline__ float2 unpack(unsigned int word) {
    return make_float2(to_float(fp16_t{static_cast<unsigned short>(word & 0xffffu)}),
                       to_float(fp16_t{static_cast<unsigned short>(word >> 16)}));
  }
  static __device__ __forceinline__ unsigned int pack(float lo, float hi) {
    unsigned int word;
    // cvt.rn.f16x2.f32 d, a, b puts a in the upper half and b in the lower half.
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(word) : "f"(hi), "f"(lo));
    return word;
  }
};

template <>
struct Pair<bf16_t> {
  static __device__ __forceinline__ float2 unpack(unsigned int word) {
    return make_float2(__uint_as_float(word << 16), __uint_as_float(word & 0xffff0000u));
  }
  static __device__ __forceinline__ unsigned int pack(float lo, float hi) {
    unsigned int word;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(word) : "f"(hi), "f"(lo));
    return word;
  }
};

// ---------------------------------------------------------------------------------------------
// The LSE semantics, shared by every variant.

struct MergeWeights {
  float prefix_scale;
  float suffix_scale;
  float lse;
};

__device__ __forceinline__ float positive_infinity() { return __int_as_float(0x7f800000); }

__device__ __forceinline__ MergeWeights merge_weights(float p_lse, float s_lse) {
  const float inf = positive_infinity();
  // +inf and -inf both mean "this partial attended to no key": weight e^-inf = 0.
  p_lse = fabsf(p_lse) == inf ? -inf : p_lse;
  s_lse = fabsf(s_lse) == inf ? -inf : s_lse;
  const float max_lse = fmaxf(p_lse, s_lse);
  // Both empty: shift by 0 instead of -inf (which would give -inf - -inf = NaN); both weights
  // are then e^-inf = 0, and the selects below define the result.
  const bool both_empty = max_lse == -inf;
  const float shift = both_empty ? 0.0f : max_lse;
  const float p_se = __expf(p_lse - shift);
  const float s_se = __expf(s_lse - shift);
  const float out_se = p_se + s_se;
  MergeWeights w;
  w.prefix_scale = both_empty ? 0.0f : p_se / out_se;
  w.suffix_scale = both_empty ? 0.0f : s_se / out_se;
  w.lse = both_empty ? -inf : __logf(out_se) + max_lse;
  return w;
}

// ---------------------------------------------------------------------------------------------
// Baseline (the design note's first kernel): one thread per element, grid (num_tokens, num_heads),
// block = HEAD_SIZE threads. Loads the LSEs, computes the weights (and writes the LSE), and only
// then loads the two output elements.

template <typename T, int HEAD_SIZE, bool OUTPUT_LSE>
__global__ void merge_attn_states_baseline(T* __restrict__ output,
                                           float* __restrict__ output_lse,
                                           const T* __restrict__ prefix_output,
                                           const float* __restrict__ prefix_lse,
                                           const T* __restrict__ suffix_output,
                                           const float* __restrict__ suffix_lse) {
  const int token_idx = blockIdx.x;
  const int head_idx = blockIdx.y;
  const int num_tokens = gridDim.x;
  const int num_heads = gridDim.y;
  const int tid = threadIdx.x;

  const int lse_offset = head_idx * num_tokens + token_idx;
  const float p_lse = prefix_lse[lse_offset];
  const float s_lse = suffix_lse[lse_offset];

  const MergeWeights w = merge_weights(p_lse, s_lse);
  if (OUTPUT_LSE) {
    output_lse[lse_offset] = w.lse;  // every thread of the block stores the same value, as the note does
  }

  const int output_offset = token_idx * HEAD_SIZE * num_heads + head_idx * HEAD_SIZE;
  const float p_out = to_float(prefix_output[output_offset + tid]);
  const float s_out = to_float(suffix_output[output_offset + tid]);

  from_float(output[output_offset + tid], p_out * w.prefix_scale + s_out * w.suffix_scale);
}

// ---------------------------------------------------------------------------------------------
// Reordered (the design note's second kernel): identical, except that the two output elements are
// loaded right after the LSEs, before any arithmetic, so all four loads are in flight together.

template <typename T, int HEAD_SIZE, bool OUTPUT_LSE>
__global__ void merge_attn_states_reordered(T* __restrict__ output,
                                            float* __restrict__ output_lse,
                                            const T* __restrict__ prefix_output,
                                            const float* __restrict__ prefix_lse,
                                            const T* __restrict__ suffix_output,
                                            const float* __restrict__ suffix_lse) {
  const int token_idx = blockIdx.x;
  const int head_idx = blockIdx.y;
  const int num_tokens = gridDim.x;
  const int num_heads = gridDim.y;
  const int tid = threadIdx.x;

  const int lse_offset = head_idx * num_tokens + token_idx;
  const float p_lse = prefix_lse[lse_offset];
  const float s_lse = suffix_lse[lse_offset];

  const int output_offset = token_idx * HEAD_SIZE * num_heads + head_idx * HEAD_SIZE;
  const float p_out = to_float(prefix_output[output_offset + tid]);
  const float s_out = to_float(suffix_output[output_offset + tid]);

  const MergeWeights w = merge_weights(p_lse, s_lse);
  if (OUTPUT_LSE) {
    output_lse[lse_offset] = w.lse;
  }

  from_float(output[output_offset + tid], p_out * w.prefix_scale + s_out * w.suffix_scale);
}

// ---------------------------------------------------------------------------------------------
// Vectorized: each thread moves 16-byte packs (8 values), PACKS_PER_THREAD of them, all loads
// issued before the first use. The (token, head) rows are flattened in memory order, so one block
// of BLOCK_THREADS threads covers BLOCK_THREADS * 8 / HEAD_SIZE heads per pass and every warp
// access is a contiguous 512-byte span. The LSEs are scalar loads, one pair per (token, head);
// the thread holding a row's first pack writes the output LSE.

template <typename T>
__device__ __forceinline__ unsigned int merge_word(unsigned int p, unsigned int s, const MergeWeights& w) {
  const float2 pf = Pair<T>::unpack(p);
  const float2 sf = Pair<T>::unpack(s);
  return Pair<T>::pack(pf.x * w.prefix_scale + sf.x * w.suffix_scale,
                       pf.y * w.prefix_scale + sf.y * w.suffix_scale);
}

template <typename T, int HEAD_SIZE, bool OUTPUT_LSE, int BLOCK_THREADS, int PACKS_PER_THREAD>
__global__ void __launch_bounds__(BLOCK_THREADS)
    merge_attn_states_vectorized(T* __restrict__ output,
                                 float* __restrict__ output_lse,
                                 const T* __restrict__ prefix_output,
                                 const float* __restrict__ prefix_lse,
                                 const T* __restrict__ suffix_output,
                                 const float* __restrict__ suffix_lse,
                                 unsigned int num_tokens,
                                 unsigned int num_heads) {
  static_assert(sizeof(T) == 2, "16-bit element types only");
  constexpr unsigned int ELEMS_PER_PACK = 16 / sizeof(T);
  static_assert(HEAD_SIZE % ELEMS_PER_PACK == 0, "HEAD_SIZE must be a multiple of 8");
  constexpr unsigned int PACKS_PER_ROW = HEAD_SIZE / ELEMS_PER_PACK;

  // The launcher guarantees num_tokens * num_heads * HEAD_SIZE < 2^31, so 32-bit indices suffice.
  const unsigned int num_packs = num_tokens * num_heads * PACKS_PER_ROW;
  const unsigned int first_pack = blockIdx.x * (BLOCK_THREADS * PACKS_PER_THREAD) + threadIdx.x;
  const uint4* __restrict__ prefix_packs = reinterpret_cast<const uint4*>(prefix_output);
  const uint4* __restrict__ suffix_packs = reinterpret_cast<const uint4*>(suffix_output);
  uint4* __restrict__ output_packs = reinterpret_cast<uint4*>(output);

  uint4 p_pack[PACKS_PER_THREAD];
  uint4 s_pack[PACKS_PER_THREAD];
  float p_lse[PACKS_PER_THREAD];
  float s_lse[PACKS_PER_THREAD];
  unsigned int lse_offset[PACKS_PER_THREAD];

#pragma unroll
  for (int i = 0; i < PACKS_PER_THREAD; ++i) {
    const unsigned int pack = first_pack + i * BLOCK_THREADS;
    if (pack < num_packs) {
      const unsigned int row = pack / PACKS_PER_ROW;  // row = token * num_heads + head
      const unsigned int token = row / num_heads;
      const unsigned int head = row - token * num_heads;
      lse_offset[i] = head * num_tokens + token;
      p_lse[i] = prefix_lse[lse_offset[i]];
      s_lse[i] = suffix_lse[lse_offset[i]];
      p_pack[i] = prefix_packs[pack];
      s_pack[i] = suffix_packs[pack];
    }
  }

#pragma unroll
  for (int i = 0; i < PACKS_PER_THREAD; ++i) {
    const unsigned int pack = first_pack + i * BLOCK_THREADS;
    if (pack < num_packs) {
      const MergeWeights w = merge_weights(p_lse[i], s_lse[i]);
      if (OUTPUT_LSE && pack % PACKS_PER_ROW == 0) {
        output_lse[lse_offset[i]] = w.lse;
      }
      uint4 out;
      out.x = merge_word<T>(p_pack[i].x, s_pack[i].x, w);
      out.y = merge_word<T>(p_pack[i].y, s_pack[i].y, w);
      out.z = merge_word<T>(p_pack[i].z, s_pack[i].z, w);
      out.w = merge_word<T>(p_pack[i].w, s_pack[i].w, w);
      output_packs[pack] = out;
    }
  }
}
