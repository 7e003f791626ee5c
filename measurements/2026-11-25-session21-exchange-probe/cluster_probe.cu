// Session 21 probe (issue 5): would thread-block clusters shorten the megakernel's exchanges?
// A standalone program (nvcc -std=c++17 -arch=sm_90 cluster_probe.cu -o cluster_probe):
//  1. how many clusters of 1-16 blocks of the megakernel's footprint (512 threads, 208,952 B of
//     dynamic shared memory, one block per SM) can be resident at once, and whether a cooperative
//     launch may also carry a cluster dimension;
//  2. the round trip of a flag between two blocks, through L2 (st/ld.relaxed.gpu, as the LL words
//     and accumulator counts travel) and through distributed shared memory (a store into the other
//     block's shared memory, polled there), with the grid idle or with every block streaming 32 KB
//     weight pages from HBM into shared memory with bulk copies (pages in flight per block: the
//     megakernel's pace), as during the decode step.
#include <cooperative_groups.h>
#include <cstdio>
#include <cstdlib>
#include <algorithm>

namespace cg = cooperative_groups;

constexpr int kThreads = 512;
constexpr int kSmem = 208952;
constexpr int kPage = 32768;
constexpr int kSlots = 5;

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            printf("CUDA error %s at %s:%d: %s\n", cudaGetErrorName(e_), __FILE__, __LINE__,      \
                   cudaGetErrorString(e_));                                                        \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

__device__ __forceinline__ unsigned smem_addr(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void st_relaxed_gpu(unsigned* p, unsigned v) {
    asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned ld_relaxed_gpu(const unsigned* p) {
    unsigned v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ void st_remote(unsigned local_addr, unsigned rank, unsigned v) {
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local_addr), "r"(rank));
    asm volatile("st.relaxed.cluster.shared::cluster.u32 [%0], %1;" ::"r"(remote), "r"(v) : "memory");
}
__device__ __forceinline__ unsigned ld_local_cluster(unsigned local_addr) {
    unsigned v;
    asm volatile("ld.relaxed.cluster.shared::cta.u32 %0, [%1];" : "=r"(v) : "r"(local_addr) : "memory");
    return v;
}

__device__ __forceinline__ void bar_init(unsigned long long* bar) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void page_copy(void* dst, const void* src, unsigned bytes, unsigned long long* bar) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem_addr(dst)),
                 "l"(src), "r"(bytes), "r"(smem_addr(bar))
                 : "memory");
}
__device__ __forceinline__ void page_wait(unsigned long long* bar, unsigned parity) {
    asm volatile(
        "{\n\t.reg .pred done;\n"
        "WAIT:\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n\t"
        "@!done bra WAIT;\n}" ::"r"(smem_addr(bar)),
        "r"(parity)
        : "memory");
}

__device__ __forceinline__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    return t;
}

struct Args {
    const char* stream;          // per block: stream_bytes of pages
    unsigned long long stream_bytes;
    unsigned* flags;             // [0]: a's flag, [1]: b's flag (L2 mode), [2]: stop, [3]: ready count
    long long* out;              // [0] ns total, [1] cycles total, [2] pages streamed (all blocks)
    int mode;                    // 0: L2, 1: DSMEM (a, b in one cluster), 2: a adds by bulk reduction
    unsigned long long* acc;     // mode 2: 1024 words a adds 1 to, with one bulk reduction (as acc_publish)
    int a, b, iters, inflight;   // inflight 0: no streaming
    int who;                     // which blocks stream: 0 all, 1 all but a and b, 2 only a and b
    unsigned page_bytes;         // bytes per copy (at most kPage)
};

__global__ void __launch_bounds__(kThreads, 1) pingpong(Args args) {
    extern __shared__ __align__(128) unsigned char smem[];
    unsigned long long* bars = reinterpret_cast<unsigned long long*>(smem + kSlots * kPage);
    unsigned* flag = reinterpret_cast<unsigned*>(smem + kSlots * kPage + 64);
    unsigned long long* staged = reinterpret_cast<unsigned long long*>(smem + kSlots * kPage + 128);  // 8 KB of ones
    for (int i = threadIdx.x; i < 1024; i += kThreads) staged[i] = 1ull;
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int block = blockIdx.x;
    if (threadIdx.x == 0) {
        for (int i = 0; i < kSlots; ++i) bar_init(bars + i);
        *flag = 0;
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (args.mode == 1) cg::this_cluster().sync();  // every flag zeroed before any remote store
    if (threadIdx.x == 0) {  // everyone resident and initialised before timing
        atomicAdd(args.flags + 3, 1u);
        while (ld_relaxed_gpu(args.flags + 3) < gridDim.x) {}
    }
    __syncthreads();
    const bool pair = block == args.a || block == args.b;
    const bool streams = args.inflight > 0 && (args.who == 0 || (args.who == 1 && !pair) || (args.who == 2 && pair));
    if (warp == 0 && streams) {
        // The stream: pages of this block's region, `inflight` in flight, until the stop flag.
        const char* base = args.stream + static_cast<unsigned long long>(block) * args.stream_bytes;
        const unsigned long long pages = args.stream_bytes / args.page_bytes;
        const unsigned pb = args.page_bytes;
        unsigned long long issued = 0, landed = 0;
        for (; issued < static_cast<unsigned long long>(args.inflight); ++issued)
            if (lane == 0) page_copy(smem + (issued % kSlots) * kPage, base + (issued % pages) * pb, pb, bars + issued % kSlots);
        while (true) {
            page_wait(bars + landed % kSlots, static_cast<unsigned>((landed / kSlots) & 1));
            ++landed;
            if (ld_relaxed_gpu(args.flags + 2)) break;
            if (lane == 0) page_copy(smem + (issued % kSlots) * kPage, base + (issued % pages) * pb, pb, bars + issued % kSlots);
            ++issued;
        }
        while (landed < issued) {
            page_wait(bars + landed % kSlots, static_cast<unsigned>((landed / kSlots) & 1));
            ++landed;
        }
        if (lane == 0) atomicAdd(reinterpret_cast<unsigned long long*>(args.out + 2), landed);
    } else if (warp == 1 && lane == 0 && (block == args.a || block == args.b)) {
        const bool is_a = block == args.a;
        const unsigned local = smem_addr(flag);
        const unsigned other_rank = is_a ? static_cast<unsigned>(args.b % cg::this_cluster().num_blocks())
                                         : static_cast<unsigned>(args.a % cg::this_cluster().num_blocks());
        unsigned* mine = args.flags + (is_a ? 0 : 1);
        unsigned* theirs = args.flags + (is_a ? 1 : 0);
        const unsigned long long t0 = now_ns();
        const long long c0 = clock64();
        for (unsigned i = 1; i <= static_cast<unsigned>(args.iters); ++i) {
            if (is_a) {
                if (args.mode == 2) {
                    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.u64 [%0], [%1], %2;\n\t"
                                 "cp.async.bulk.commit_group;" ::"l"(args.acc), "r"(smem_addr(staged)), "r"(8192) : "memory");
                } else if (args.mode == 0) st_relaxed_gpu(theirs, i); else st_remote(local, other_rank, i);
            }
            if (args.mode == 2 && !is_a) {
                unsigned long long w;
                do {
                    asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(w) : "l"(args.acc + 1023) : "memory");
                } while (w != i);
            } else if (args.mode != 1) { while (ld_relaxed_gpu(mine) != i) {} }
            else { while (ld_local_cluster(local) != i) {} }
            if (!is_a) {
                if (args.mode != 1) st_relaxed_gpu(theirs, i); else st_remote(local, other_rank, i);
            }
            if (is_a && args.mode == 2) asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
        }
        if (is_a) {
            args.out[0] = static_cast<long long>(now_ns() - t0);
            args.out[1] = clock64() - c0;
            st_relaxed_gpu(args.flags + 2, 1u);
        }
    }
    __syncthreads();
    if (args.mode == 1) cg::this_cluster().sync();  // no block leaves while its shared memory may be written
}

static int max_clusters(int size) {
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(size, 1, 1);
    config.blockDim = dim3(kThreads, 1, 1);
    config.dynamicSmemBytes = kSmem;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = size;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    config.attrs = attr;
    config.numAttrs = 1;
    int n = -1;
    cudaError_t e = cudaOccupancyMaxActiveClusters(&n, pingpong, &config);
    if (e != cudaSuccess) {
        printf("  cluster %2d: %s\n", size, cudaGetErrorString(e));
        cudaGetLastError();
        return -1;
    }
    return n;
}

static double run(const char* name, int grid, int cluster, bool cooperative, Args args, bool report = true) {
    CHECK(cudaMemset(args.flags, 0, 16));
    CHECK(cudaMemset(args.out, 0, 24));
    CHECK(cudaMemset(args.acc, 0, 8192));
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(grid, 1, 1);
    config.blockDim = dim3(kThreads, 1, 1);
    config.dynamicSmemBytes = kSmem;
    cudaLaunchAttribute attr[2];
    int n = 0;
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = cluster;
    attr[n].val.clusterDim.y = 1;
    attr[n].val.clusterDim.z = 1;
    ++n;
    if (cooperative) {
        attr[n].id = cudaLaunchAttributeCooperative;
        attr[n].val.cooperative = 1;
        ++n;
    }
    config.attrs = attr;
    config.numAttrs = n;
    cudaError_t e = cudaLaunchKernelEx(&config, pingpong, args);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        printf("%-44s launch failed: %s\n", name, cudaGetErrorString(e));
        cudaGetLastError();
        return -1;
    }
    long long out[3];
    CHECK(cudaMemcpy(out, args.out, sizeof(out), cudaMemcpyDeviceToHost));
    const double rt_ns = static_cast<double>(out[0]) / args.iters;
    if (report) {
        const double seconds = out[0] * 1e-9;
        printf("%-44s round trip %7.1f ns (%6.0f cycles)  stream %6.2f TB/s\n", name, rt_ns,
               static_cast<double>(out[1]) / args.iters, out[2] * static_cast<double>(args.page_bytes) / seconds / 1e12);
    }
    return rt_ns;
}

int main() {
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    printf("%s, %d SMs, cc %d.%d\n", prop.name, prop.multiProcessorCount, prop.major, prop.minor);
    CHECK(cudaFuncSetAttribute(pingpong, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    CHECK(cudaFuncSetAttribute(pingpong, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    printf("resident clusters of the megakernel's footprint (512 threads, %d B shared, 1 block/SM):\n", kSmem);
    for (int size : {1, 2, 4, 8, 16}) {
        const int n = max_clusters(size);
        if (n >= 0) printf("  cluster %2d: %3d clusters = %3d blocks\n", size, n, n * size);
    }
    const int sms = prop.multiProcessorCount;
    const unsigned long long stream_bytes = 8ull << 20;
    char* stream;
    CHECK(cudaMalloc(&stream, stream_bytes * sms));
    CHECK(cudaMemset(stream, 1, stream_bytes * sms));
    unsigned* flags;
    long long* out;
    CHECK(cudaMalloc(&flags, 16));
    CHECK(cudaMalloc(&out, 24));
    unsigned long long* acc;
    CHECK(cudaMalloc(&acc, 8192));
    Args base{stream, stream_bytes, flags, out, 0, acc, 0, 1, 20000, 0, 0, kPage};
    // A cooperative launch with a cluster dimension: accepted?
    {
        Args a = base;
        a.iters = 100;
        run("cooperative + cluster 2, 132 blocks (check)", sms, 2, true, a, false) >= 0
            ? printf("cooperative launch with clusters of 2: accepted\n")
            : printf("cooperative launch with clusters of 2: refused\n");
        const int c8 = max_clusters(8), c16 = max_clusters(16);
        if (c8 > 0) {
            run("cooperative + cluster 8 (check)", c8 * 8, 8, true, a, false) >= 0
                ? printf("cooperative launch of %d clusters of 8: accepted\n", c8)
                : printf("cooperative launch of %d clusters of 8: refused\n", c8);
        }
        if (c16 > 0) {
            run("cooperative + cluster 16 (check)", c16 * 16, 16, true, a, false) >= 0
                ? printf("cooperative launch of %d clusters of 16: accepted\n", c16)
                : printf("cooperative launch of %d clusters of 16: refused\n", c16);
        }
    }
    const int pairs = max_clusters(2);
    const int grid = std::min(sms / 2, pairs) * 2;  // every block resident: the start waits for all of them
    printf("timed grid: %d blocks in clusters of 2; %d round trips per figure\n", grid, base.iters);
    for (int rep = 0; rep < 2; ++rep) {
        for (int inflight : {0, 1, 2, 4}) {
            char name[96];
            Args a = base;
            a.inflight = inflight;
            a.mode = 0; a.a = 0; a.b = 1;
            snprintf(name, sizeof name, "L2, blocks 0-1, %d pages in flight", inflight);
            run(name, grid, 2, false, a);
            a.b = grid / 2 + 1;
            snprintf(name, sizeof name, "L2, blocks 0-%d, %d pages in flight", a.b, inflight);
            run(name, grid, 2, false, a);
            a.mode = 1; a.b = 1;
            snprintf(name, sizeof name, "DSMEM, blocks 0-1, %d pages in flight", inflight);
            run(name, grid, 2, false, a);
        }
    }
    // Whose stream slows the L2 round trip: the pair's own pages in flight, or everyone else's?
    for (int inflight : {1, 2}) {
        for (int who : {1, 2}) {
            char name[96];
            Args a = base;
            a.inflight = inflight;
            a.who = who;
            a.mode = 0; a.a = 0; a.b = grid / 2 + 1;
            snprintf(name, sizeof name, "L2, 0-%d, %d in flight, %s", a.b, inflight, who == 1 ? "others stream" : "pair streams");
            run(name, grid, 2, false, a);
        }
    }
    // A publication by bulk reduction (acc_publish: 1024 words, one cp.reduce.async.bulk), seen by the
    // other block polling its last word, then a flag back: does the publisher's own stream of page
    // copies (the same TMA engine) hold the reduction up?
    for (int inflight : {0, 1, 2}) {
        for (int who : {1, 0, 2}) {
            if (inflight == 0 && who != 1) continue;
            char name[96];
            Args a = base;
            a.inflight = inflight;
            a.who = who;
            a.mode = 2; a.a = 0; a.b = grid / 2 + 1;
            snprintf(name, sizeof name, "bulk add, 0-%d, %d in flight, %s", a.b, inflight,
                     who == 1 ? "others stream" : who == 0 ? "all stream" : "pair streams");
            run(name, grid, 2, false, a);
        }
    }
    // The L2 round trip against the bytes in flight per streaming block (the pair idle): how much
    // stream rate each step of exchange latency buys.
    const int shapes[][2] = {{4096, 1}, {8192, 1}, {16384, 1}, {8192, 3}, {32768, 1}, {16384, 3}, {32768, 2}, {32768, 3}};
    for (const auto& shape : shapes) {
        char name[96];
        Args a = base;
        a.page_bytes = shape[0];
        a.inflight = shape[1];
        a.who = 1;
        a.mode = 0; a.a = 0; a.b = grid / 2 + 1;
        snprintf(name, sizeof name, "L2, others: %2d KB x %d in flight (%3d KB)", shape[0] / 1024, shape[1], shape[0] * shape[1] / 1024);
        run(name, grid, 2, false, a);
    }
    return 0;
}
