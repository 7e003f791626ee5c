// Cluster reduce: within each thread-block cluster of two blocks, every block ends with the
// element-wise fp16 sum of both blocks' slices (LINEAR), optionally followed by ReLU (FFN).
//
//   out[b*size + i] = stage(in[b*size + i] + in[(b ^ 1)*size + i])   for block b of the grid
//
// Each block first stages its slice in shared memory (in the workload the note models, an
// earlier stage left it there); the variants differ in where the neighbour's slice is read:
//   kGlobal      from global memory (the note's baseline)
//   kDsmemNote   from the neighbour's shared memory, results written back in place: the note's
//                code, which races (the neighbour may read a slot after it was overwritten)
//   kDsmem       from the neighbour's shared memory, results written to a second buffer
//   kDsmemSplit  each block sums half of the slots and writes them to both blocks' shared
//                memory (reduce-scatter + all-gather), so each DSMEM read serves two outputs
//
// The file needs no header: NVRTC ships neither cooperative_groups.h nor cuda_fp16.h, and a
// CuPy install may not find the toolkit's copies (cupy/cupy#8257). The helpers below are the
// PTX that cg::this_cluster().sync() / map_shared_rank() and __hadd compile to (same SASS).
//
// Element type: fp16 bit patterns in unsigned short; a "packet" is 1 or 8 halves (uint4).

constexpr int kLinear = 0;
constexpr int kFfn = 1;

constexpr int kGlobal = 0;
constexpr int kDsmemNote = 1;
constexpr int kDsmem = 2;
constexpr int kDsmemSplit = 3;

constexpr int kClusterSize = 2;
constexpr int kMaxThreads = 1024;

// ---- cluster primitives ------------------------------------------------------------------

__device__ __forceinline__ unsigned cluster_block_rank() {
    unsigned rank;
    asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    return rank;
}

// Full cluster barrier with release/acquire semantics (what cg::cluster_group::sync() emits).
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive;\n\tbarrier.cluster.wait;" ::: "memory");
}

// Generic address of the same shared-memory object in block `rank` of this cluster.
template <class T>
__device__ __forceinline__ T* cluster_map_shared_rank(T* local, unsigned rank) {
    unsigned long long remote;
    asm volatile("mapa.u64 %0, %1, %2;"
                 : "=l"(remote)
                 : "l"(reinterpret_cast<unsigned long long>(local)), "r"(rank));
    return reinterpret_cast<T*>(remote);
}

// ---- fp16 arithmetic ---------------------------------------------------------------------

// Round-to-nearest-even fp16 add, never contracted into an fma (what __hadd does).
__device__ __forceinline__ unsigned short hadd(unsigned short a, unsigned short b) {
    unsigned short sum;
    asm("add.rn.f16 %0, %1, %2;" : "=h"(sum) : "h"(a), "h"(b));
    return sum;
}

__device__ __forceinline__ unsigned hadd2(unsigned a, unsigned b) {
    unsigned sum;
    asm("add.rn.f16x2 %0, %1, %2;" : "=r"(sum) : "r"(a), "r"(b));
    return sum;
}

// The note's ReLU, `__hgt(x, 0) ? x : 0`: NaN and -0 map to +0.
__device__ __forceinline__ unsigned short relu(unsigned short x) {
    unsigned short out;
    const unsigned short zero = 0;
    asm("{\n\t.reg .pred gt;\n\tsetp.gt.f16 gt, %1, %2;\n\tselp.b16 %0, %1, %2, gt;\n\t}"
        : "=h"(out)
        : "h"(x), "h"(zero));
    return out;
}

__device__ __forceinline__ unsigned relu2(unsigned x) {
    const unsigned lo = relu(static_cast<unsigned short>(x & 0xffffu));
    const unsigned hi = relu(static_cast<unsigned short>(x >> 16));
    return lo | (hi << 16);
}

template <int kStage>
__device__ __forceinline__ unsigned short combine(unsigned short a, unsigned short b) {
    const unsigned short sum = hadd(a, b);
    if constexpr (kStage == kFfn) return relu(sum);
    return sum;
}

template <int kStage>
__device__ __forceinline__ unsigned combine2(unsigned a, unsigned b) {
    const unsigned sum = hadd2(a, b);
    if constexpr (kStage == kFfn) return relu2(sum);
    return sum;
}

template <int kStage>
__device__ __forceinline__ uint4 combine(uint4 a, uint4 b) {
    return make_uint4(combine2<kStage>(a.x, b.x), combine2<kStage>(a.y, b.y),
                      combine2<kStage>(a.z, b.z), combine2<kStage>(a.w, b.w));
}

template <int kVec> struct PacketOf;
template <> struct PacketOf<1> { using type = unsigned short; };
template <> struct PacketOf<8> { using type = uint4; };

// ---- block-wide loops --------------------------------------------------------------------
// Thread t handles packets first, first + stride, ...; kBatch of them are loaded before the
// first is used, so kBatch loads per thread are in flight (kBatch = 1 is the note's loop).

template <int kBatch, class P>
__device__ __forceinline__ void copy_packets(P* dst, const P* src, int first, int end, int stride) {
    for (int base = first; base < end; base += kBatch * stride) {
        P v[kBatch];
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
            const int i = base + u * stride;
            if (i < end) v[u] = src[i];
        }
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
            const int i = base + u * stride;
            if (i < end) dst[i] = v[u];
        }
    }
}

// dst[i] = combine(mine[i], other[i]), also stored to mirror[i] when mirror is not null.
template <int kStage, int kBatch, class P>
__device__ __forceinline__ void combine_packets(P* dst, P* mirror, const P* mine, const P* other,
                                                int first, int end, int stride) {
    for (int base = first; base < end; base += kBatch * stride) {
        P a[kBatch], b[kBatch];
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
            const int i = base + u * stride;
            if (i < end) {
                a[u] = mine[i];
                b[u] = other[i];
            }
        }
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
            const int i = base + u * stride;
            if (i < end) {
                const P sum = combine<kStage>(a[u], b[u]);
                dst[i] = sum;
                if (mirror != nullptr) mirror[i] = sum;
            }
        }
    }
}

// ---- the kernel --------------------------------------------------------------------------
// Launch: grid = kClusterSize * clusters blocks (1-D), any block size up to 1024 in multiples
// of 32, `size` a multiple of kVec, dynamic shared memory = size * 2 bytes (twice that for
// kDsmem). kSkew = true makes block rank 1 start its combine loop only after rank 0 finished
// its own: the worst interleaving, on which a correct variant must still be right.

template <int kAlgo, int kStage, int kVec, int kBatch, bool kSkew>
__global__ void __launch_bounds__(kMaxThreads) __cluster_dims__(kClusterSize, 1, 1)
cluster_reduce(const unsigned short* __restrict__ input, unsigned short* __restrict__ output, int size) {
    static_assert(kAlgo == kGlobal || kAlgo == kDsmemNote || kAlgo == kDsmem || kAlgo == kDsmemSplit,
                  "unknown algorithm");
    static_assert(kStage == kLinear || kStage == kFfn, "unknown stage");
    static_assert(kVec == 1 || kVec == 8, "a packet is 1 or 8 halves");
    static_assert(kAlgo != kDsmemSplit || kClusterSize == 2, "the split assumes two blocks");
    using P = typename PacketOf<kVec>::type;
    extern __shared__ __align__(16) unsigned char smem_raw[];
    P* const local = reinterpret_cast<P*>(smem_raw);

    const int n = size / kVec;  // packets per block
    const unsigned rank = cluster_block_rank();
    const unsigned neighbor = (rank + 1) % kClusterSize;
    // The note indexed input[rank * size + i], which names cluster 0's data in every cluster.
    // With a 1-D grid, cluster c is blocks [c * kClusterSize, (c + 1) * kClusterSize).
    const size_t my_offset = static_cast<size_t>(blockIdx.x) * n;
    const size_t neighbor_offset = static_cast<size_t>(blockIdx.x - rank + neighbor) * n;
    const P* const in = reinterpret_cast<const P*>(input);
    P* const out = reinterpret_cast<P*>(output);
    const int tid = static_cast<int>(threadIdx.x);
    const int stride = static_cast<int>(blockDim.x);

    copy_packets<kBatch>(local, in + my_offset, tid, n, stride);
    cluster_sync();  // both slices staged; for kGlobal a block barrier would do

    P* result = local;
    P* mirror = nullptr;
    const P* other;
    int first = tid;
    int end = n;
    if constexpr (kAlgo == kGlobal) {
        other = in + neighbor_offset;
    } else {
        P* const remote = cluster_map_shared_rank(local, neighbor);
        other = remote;
        // kDsmemNote keeps result = local: slot i is overwritten while the neighbour may not
        // have read it yet, and then it adds our sum instead of our input.
        if constexpr (kAlgo == kDsmem) result = local + n;  // never overwrite what the neighbour reads
        if constexpr (kAlgo == kDsmemSplit) {
            // Rank 0 owns packets [0, n/2), rank 1 [n/2, n); no slot is touched by both.
            mirror = remote;
            first = (rank == 0 ? 0 : n / 2) + tid;
            end = rank == 0 ? n / 2 : n;
        }
    }

    if constexpr (kSkew) {
        if (rank != 0) cluster_sync();
    }
    combine_packets<kStage, kBatch>(result, mirror, local, other, first, end, stride);
    if constexpr (kSkew) {
        if (rank == 0) cluster_sync();
    }
    // All DSMEM reads and writes are done after this barrier, so a block may exit after it
    // without pulling shared memory from under its neighbour.
    cluster_sync();

    copy_packets<kBatch>(out + my_offset, result, tid, n, stride);
}
