// CPU emulation of one megakernel launch (see cuda_emulation.h for what it can and cannot find).
// Built as a shared library by kernels/megakernel/emulator.py with -DMK_EMULATE and the model's
// -D shape macros; called through ctypes with a MegakernelParams of host pointers.
#include "../megakernel.cu"

#include <ucontext.h>

#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace emu {

ThreadState* g_current = nullptr;
uint3 g_grid_dim = {1, 1, 1};
uint3 g_block_dim = {1, 1, 1};

namespace {

constexpr size_t kStackBytes = 256 * 1024;
constexpr unsigned long long kMaxSwitches = 2000000000ull;  // a spin-wait that never ends

struct Barrier {
    int expected = 0;
    int arrived = 0;
    std::vector<int> waiters;
};

struct Fiber {
    ucontext_t context;
    ThreadState state;
    char* stack = nullptr;
    bool done = false;
};

struct Warp {
    Barrier barrier;
    unsigned long long slots[32];
};

struct Block {
    Barrier barrier;
    std::vector<Warp> warps;
    unsigned char* shared = nullptr;
};

std::vector<Fiber> fibers;
std::vector<Block> blocks;
Barrier grid_barrier;
std::vector<int> runnable;
int current = -1;
ucontext_t scheduler;
std::mt19937 rng;
std::function<void()> kernel_body;

void switch_to_scheduler() { swapcontext(&fibers[current].context, &scheduler); }

// The last arrival releases everyone, itself included, back into the random pool.
void arrive_and_wait(Barrier& barrier) {
    if (++barrier.arrived == barrier.expected) {
        barrier.arrived = 0;
        for (int w : barrier.waiters) runnable.push_back(w);
        barrier.waiters.clear();
        runnable.push_back(current);
    } else {
        barrier.waiters.push_back(current);
    }
    switch_to_scheduler();
}

void fiber_entry() {
    kernel_body();
    fibers[current].done = true;  // returning resumes the scheduler (uc_link)
}

Block& current_block() { return blocks[fibers[current].state.block_idx.x]; }

}  // namespace

void sync_block() { arrive_and_wait(current_block().barrier); }
void sync_grid() { arrive_and_wait(grid_barrier); }

void yield() {
    runnable.push_back(current);
    switch_to_scheduler();
}

// The kernel's __trap(): the grid stops with `message` as its error; this fiber never resumes.
std::string failure;
void fail(const char* message) {
    if (failure.empty()) failure = message;
    switch_to_scheduler();
}

unsigned char* block_shared_memory() { return current_block().shared; }

void warp_exchange(const void* value, void* out, int size, int lane_mask, bool from_lane) {
    const int t = static_cast<int>(fibers[current].state.thread_idx.x);
    Warp& warp = current_block().warps[t / 32];
    const int lane = t % 32;
    memcpy(&warp.slots[lane], value, size);
    arrive_and_wait(warp.barrier);
    memcpy(out, &warp.slots[from_lane ? (lane_mask & 31) : lane ^ lane_mask], size);
    arrive_and_wait(warp.barrier);
}

// Runs `body` as a grid of nblocks x nthreads fibers; returns "" or what went wrong.
std::string run_grid(int nblocks, int nthreads, size_t shared_bytes, unsigned seed, std::function<void()> body) {
    if (nthreads % 32 != 0) return "threads per block must be a multiple of 32";
    kernel_body = std::move(body);
    rng.seed(seed);
    g_grid_dim = {static_cast<unsigned>(nblocks), 1, 1};
    g_block_dim = {static_cast<unsigned>(nthreads), 1, 1};
    const int total = nblocks * nthreads;

    blocks.assign(nblocks, Block());
    for (Block& block : blocks) {
        block.barrier.expected = nthreads;
        block.warps.assign(nthreads / 32, Warp());
        for (Warp& warp : block.warps) warp.barrier.expected = 32;
        block.shared = static_cast<unsigned char*>(aligned_alloc(16, (shared_bytes + 15) / 16 * 16 + 16));
        memset(block.shared, 0xff, shared_bytes);  // NaN as float: reads of unwritten shared memory show
    }
    grid_barrier = Barrier();
    grid_barrier.expected = total;

    fibers.assign(total, Fiber());
    runnable.clear();
    for (int i = 0; i < total; ++i) {
        Fiber& f = fibers[i];
        f.state.block_idx = {static_cast<unsigned>(i / nthreads), 0, 0};
        f.state.thread_idx = {static_cast<unsigned>(i % nthreads), 0, 0};
        f.stack = static_cast<char*>(malloc(kStackBytes));
        getcontext(&f.context);
        f.context.uc_stack.ss_sp = f.stack;
        f.context.uc_stack.ss_size = kStackBytes;
        f.context.uc_link = &scheduler;
        makecontext(&f.context, fiber_entry, 0);
        runnable.push_back(i);
    }

    unsigned long long switches = 0;
    std::string error;
    failure.clear();
    while (!runnable.empty() && failure.empty()) {
        if (++switches > kMaxSwitches) {
            error = "gave up after too many fiber switches (a spin-wait that never ends?)";
            break;
        }
        const size_t pick = rng() % runnable.size();
        current = runnable[pick];
        runnable[pick] = runnable.back();
        runnable.pop_back();
        g_current = &fibers[current].state;
        swapcontext(&scheduler, &fibers[current].context);
    }
    if (!failure.empty()) error = "trap: " + failure;
    if (error.empty()) {
        int blocked = 0;
        for (const Fiber& f : fibers) blocked += f.done ? 0 : 1;
        if (blocked) error = "deadlock: " + std::to_string(blocked) + " threads wait at a barrier that never completes";
    }
    for (Fiber& f : fibers) free(f.stack);
    for (Block& block : blocks) free(block.shared);
    fibers.clear();
    blocks.clear();
    g_current = nullptr;
    return error;
}

}  // namespace emu

extern "C" {

int mk_emulate_params_bytes() { return static_cast<int>(sizeof(mk::MegakernelParams)); }
int mk_emulate_shared_bytes() { return mk::kSharedBytes; }
int mk_emulate_shared_bytes_ring() { return mk::kSharedBytesRing; }

// One decode step of `variant` on `blocks` emulated blocks. Returns 0, or 1 with `error` filled.
int mk_emulate_decode(int variant, const void* params, int token, int position, int blocks, unsigned seed,
                      char* error, int error_bytes) {
    mk::MegakernelParams p;
    memcpy(&p, params, sizeof(p));
    std::function<void()> body;
    switch (variant) {
        case 0: body = [p, token, position] { megakernel_decode<0>(p, token, position); }; break;
        case 1: body = [p, token, position] { megakernel_decode<1>(p, token, position); }; break;
        case 2: body = [p, token, position] { megakernel_decode<2>(p, token, position); }; break;
        case 3: body = [p, token, position] { megakernel_decode<3>(p, token, position); }; break;
        case 4: body = [p, token, position] { megakernel_decode<4>(p, token, position); }; break;
        case 5: body = [p, token, position] { megakernel_decode<5>(p, token, position); }; break;
        case 6: body = [p, token, position] { megakernel_decode<6>(p, token, position); }; break;
        case 7: body = [p, token, position] { megakernel_decode<7>(p, token, position); }; break;
        case 8: body = [p, token, position] { megakernel_decode<8>(p, token, position); }; break;
        case 9: body = [p, token, position] { megakernel_decode<9>(p, token, position); }; break;
        default: snprintf(error, error_bytes, "unknown variant %d", variant); return 1;
    }
    const int shared = variant >= 6 ? mk::kSharedBytesRing : mk::kSharedBytes;
    const std::string message = emu::run_grid(blocks, mk::kThreads, shared, seed, body);
    if (message.empty()) return 0;
    snprintf(error, error_bytes, "%s", message.c_str());
    return 1;
}

}  // extern "C"
