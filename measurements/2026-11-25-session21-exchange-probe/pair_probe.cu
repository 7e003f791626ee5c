// Session 21 probe 2 (issue 5): would pairs of blocks (clusters of 2, which fit all 132 SMs) make the
// accumulator exchange cheaper? nvcc -std=c++17 -arch=sm_90 -O3 pair_probe.cu -o pair_probe
//
// Rounds of the megakernel's accumulator exchange, every block in lockstep: each block adds 1024
// 64-bit words (+1 each) into one of two copies of an accumulator with one bulk reduction
// (acc_publish), then reads both copies until every word carries the round's count (rmsnorm_acc).
// Mode "pairs": the odd block of each cluster of 2 first copies its words into the even block's
// shared memory (a bulk copy over distributed shared memory), and the even block adds both: 66 adders
// instead of 132. Warp 0 of every block streams 32 KB pages meanwhile (0, 1 or 2 in flight), as the
// weight ring does; warps 1-15 run the exchange.
#include <cooperative_groups.h>
#include <cstdio>
#include <cstdlib>

namespace cg = cooperative_groups;
constexpr int kThreads = 512, kSmem = 208952, kPage = 32768, kSlots = 4, kWords = 1024;

#define CHECK(x)                                                                                      \
    do {                                                                                              \
        cudaError_t e_ = (x);                                                                         \
        if (e_ != cudaSuccess) {                                                                      \
            printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__);           \
            exit(1);                                                                                  \
        }                                                                                             \
    } while (0)

__device__ __forceinline__ unsigned sa(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    return t;
}
__device__ __forceinline__ unsigned long long ld_gpu(const unsigned long long* p) {
    unsigned long long v;
    asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void bar_init(unsigned long long* b) { asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(sa(b)) : "memory"); }
__device__ __forceinline__ void bar_wait(unsigned long long* b, unsigned parity) {
    asm volatile("{\n\t.reg .pred d;\nW:\n\tmbarrier.try_wait.parity.shared::cta.b64 d, [%0], %1;\n\t@!d bra W;\n}" ::"r"(sa(b)), "r"(parity) : "memory");
}

struct Args {
    const char* stream;
    unsigned long long stream_bytes;
    unsigned long long* acc;  // [2][kWords]
    unsigned* flags;          // [0] stop, [1] ready count
    long long* out;           // [0] ns of block 0's rounds
    int pairs, rounds, inflight;
};

__global__ void __launch_bounds__(kThreads, 1) exchange(Args a) {
    extern __shared__ __align__(128) unsigned char smem[];
    unsigned long long* staged = reinterpret_cast<unsigned long long*>(smem + kSlots * kPage);  // 8 KB
    unsigned long long* recv = staged + kWords;                                                 // 8 KB
    unsigned long long* bars = recv + kWords;  // [0..kSlots): stream, [kSlots]: recv
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, b = blockIdx.x;
    cg::cluster_group cluster = cg::this_cluster();
    const bool odd = cluster.block_rank() == 1;
    if (threadIdx.x == 0) {
        for (int i = 0; i <= kSlots; ++i) bar_init(bars + i);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    cluster.sync();
    if (threadIdx.x == 0) {
        atomicAdd(a.flags + 1, 1u);
        while (*reinterpret_cast<volatile unsigned*>(a.flags + 1) < gridDim.x) {}
    }
    __syncthreads();
    if (warp == 0) {
        if (a.inflight > 0) {
            const char* base = a.stream + static_cast<unsigned long long>(b) * a.stream_bytes;
            const unsigned long long pages = a.stream_bytes / kPage;
            unsigned long long issued = 0, landed = 0;
            auto issue = [&] {
                if (lane == 0) {
                    unsigned long long* bar = bars + issued % kSlots;
                    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sa(bar)), "r"(kPage) : "memory");
                    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(sa(smem + (issued % kSlots) * kPage)),
                                 "l"(base + (issued % pages) * kPage), "r"(kPage), "r"(sa(bar)) : "memory");
                }
                ++issued;
            };
            while (issued < static_cast<unsigned long long>(a.inflight)) issue();
            while (true) {
                bar_wait(bars + landed % kSlots, static_cast<unsigned>((landed / kSlots) & 1));
                ++landed;
                if (*reinterpret_cast<volatile unsigned*>(a.flags)) break;
                issue();
            }
            while (landed < issued) {
                bar_wait(bars + landed % kSlots, static_cast<unsigned>((landed / kSlots) & 1));
                ++landed;
            }
        }
    } else {
        const int t = threadIdx.x - 32, nt = kThreads - 32;
        for (int i = t; i < kWords; i += nt) staged[i] = 1ull;
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        asm volatile("bar.sync 1, %0;" ::"r"(nt));
        // The copy a block (or a pair) adds into; each round every word of each copy gains 66.
        const int copy = a.pairs ? (b / 2) % 2 : b % 2;
        unsigned long long* mine = a.acc + copy * kWords;
        const unsigned long long t0 = now_ns();
        for (int r = 1; r <= a.rounds; ++r) {
            if (a.pairs && odd) {
                if (t == 0) {  // my words into the even block's `recv`, completing on its barrier
                    unsigned dst, bar;
                    asm volatile("mapa.shared::cluster.u32 %0, %1, 0;" : "=r"(dst) : "r"(sa(recv)));
                    asm volatile("mapa.shared::cluster.u32 %0, %1, 0;" : "=r"(bar) : "r"(sa(bars + kSlots)));
                    asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
                                 "r"(sa(staged)), "r"(kWords * 8), "r"(bar) : "memory");
                }
            } else if (a.pairs) {
                if (t == 0) asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sa(bars + kSlots)), "r"(kWords * 8) : "memory");
                bar_wait(bars + kSlots, static_cast<unsigned>((r - 1) & 1));
                if (t == 0) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");  // last round's add has read `staged`
                asm volatile("bar.sync 1, %0;" ::"r"(nt));
                for (int i = t; i < kWords; i += nt) staged[i] = 1ull + recv[i];
                asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
                asm volatile("bar.sync 1, %0;" ::"r"(nt));
            }
            if (!(a.pairs && odd) && t == 0) {
                asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.u64 [%0], [%1], %2;\n\tcp.async.bulk.commit_group;" ::"l"(mine),
                             "r"(sa(staged)), "r"(kWords * 8) : "memory");
            }
            // Read both copies until every word carries this round's count (each thread its words).
            // (All of a thread's words loaded together, the stale ones reloaded together, as
            // ll_wait_words does: one round trip per pass.)
            const unsigned long long want = 66ull * r;
            constexpr int kPer = (2 * kWords + (kThreads - 32) - 1) / (kThreads - 32);
            unsigned long long v[kPer];
#pragma unroll
            for (int k = 0; k < kPer; ++k) v[k] = t + k * nt < 2 * kWords ? ld_gpu(a.acc + t + k * nt) : want;
            bool stale = true;
            while (stale) {
                stale = false;
#pragma unroll
                for (int k = 0; k < kPer; ++k) {
                    if (v[k] < want) {
                        stale = true;
                        v[k] = ld_gpu(a.acc + t + k * nt);
                    }
                }
            }
            asm volatile("bar.sync 1, %0;" ::"r"(nt));
            if (a.pairs && odd && t == 0) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
        }
        if (t == 0) {
            if (b == 0) a.out[0] = static_cast<long long>(now_ns() - t0);
            if (b == 0) *reinterpret_cast<volatile unsigned*>(a.flags) = 1u;
            asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
        }
    }
    __syncthreads();
    cluster.sync();
}

int main() {
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
    CHECK(cudaFuncSetAttribute(exchange, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    const int grid = prop.multiProcessorCount / 2 * 2;
    if (grid != 132) printf("note: the expected count (66 per copy and round) assumes 132 blocks\n");
    const unsigned long long stream_bytes = 8ull << 20;
    char* stream;
    CHECK(cudaMalloc(&stream, stream_bytes * grid));
    CHECK(cudaMemset(stream, 1, stream_bytes * grid));
    unsigned long long* acc;
    unsigned* flags;
    long long* out;
    CHECK(cudaMalloc(&acc, 2 * kWords * 8));
    CHECK(cudaMalloc(&flags, 8));
    CHECK(cudaMalloc(&out, 8));
    for (int rep = 0; rep < 2; ++rep) {
        for (int inflight : {0, 1, 2}) {
            for (int pairs : {0, 1}) {
                CHECK(cudaMemset(acc, 0, 2 * kWords * 8));
                CHECK(cudaMemset(flags, 0, 8));
                Args a{stream, stream_bytes, acc, flags, out, pairs, 2000, inflight};
                cudaLaunchConfig_t config = {};
                config.gridDim = dim3(grid);
                config.blockDim = dim3(kThreads);
                config.dynamicSmemBytes = kSmem;
                cudaLaunchAttribute attr[1];
                attr[0].id = cudaLaunchAttributeClusterDimension;
                attr[0].val.clusterDim.x = 2;
                attr[0].val.clusterDim.y = 1;
                attr[0].val.clusterDim.z = 1;
                config.attrs = attr;
                config.numAttrs = 1;
                CHECK(cudaLaunchKernelEx(&config, exchange, a));
                CHECK(cudaDeviceSynchronize());
                long long ns;
                CHECK(cudaMemcpy(&ns, out, 8, cudaMemcpyDeviceToHost));
                unsigned long long last;
                CHECK(cudaMemcpy(&last, acc + 2 * kWords - 1, 8, cudaMemcpyDeviceToHost));
                printf("%-34s %d pages in flight: %7.1f ns per exchange round (last word %llu, expected %d)\n",
                       pairs ? "pairs (66 adders, DSMEM first)" : "every block adds (132 adders)", inflight,
                       static_cast<double>(ns) / a.rounds, last, 66 * a.rounds);
            }
        }
    }
    return 0;
}
