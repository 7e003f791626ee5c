// Just enough of CUDA to run the megakernel's source on a CPU, for correctness only.
//
// Every GPU thread is a fiber (ucontext) on one OS thread. Fibers switch only at the points where
// GPU threads meet: __syncthreads, warp shuffles, the grid barrier and spin-wait back-off. At each
// switch the scheduler picks the next runnable fiber at random (seeded), so code that relies on an
// ordering no barrier guarantees gives different answers on different seeds. What this cannot
// find: memory-model bugs (missing fences: every write is visible at once here), bank conflicts,
// anything about speed. Shuffles need all 32 lanes of the warp (full mask), as the kernel uses them.
#pragma once

#include <math.h>
#include <cmath>
#include <stdint.h>
#include <string.h>

#include <cstddef>

#define __device__
#define __global__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __grid_constant__
#define __align__(n) alignas(n)

struct alignas(16) uint4 {
    unsigned x, y, z, w;
};
struct alignas(16) float4 {
    float x, y, z, w;
};
struct uint3 {
    unsigned x, y, z;
};
struct alignas(8) int2 {
    int x, y;
};
inline int2 make_int2(int x, int y) { return int2{x, y}; }

inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline float __uint_as_float(unsigned u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
inline unsigned __float_as_uint(float f) {
    unsigned u;
    memcpy(&u, &f, 4);
    return u;
}

namespace emu {

struct ThreadState {
    uint3 thread_idx;
    uint3 block_idx;
};

extern ThreadState* g_current;
extern uint3 g_grid_dim;
extern uint3 g_block_dim;

void sync_block();
void sync_grid();
void yield();
unsigned char* block_shared_memory();
// Every lane of the warp gets lane (lane ^ lane_mask)'s value, or with from_lane lane lane_mask's.
void warp_exchange(const void* value, void* out, int size, int lane_mask, bool from_lane = false);
void fail(const char* message);

}  // namespace emu

#define threadIdx (::emu::g_current->thread_idx)
#define blockIdx (::emu::g_current->block_idx)
#define gridDim (::emu::g_grid_dim)
#define blockDim (::emu::g_block_dim)

inline void __syncthreads() { emu::sync_block(); }

template <class T>
inline T __shfl_xor_sync(unsigned mask, T value, int lane_mask) {
    (void)mask;
    T out;
    emu::warp_exchange(&value, &out, sizeof(T), lane_mask);
    return out;
}

template <class T>
inline T __shfl_sync(unsigned mask, T value, int src_lane) {
    (void)mask;
    T out;
    emu::warp_exchange(&value, &out, sizeof(T), src_lane, true);
    return out;
}

// One OS thread runs every fiber and fibers switch only at the calls above, so a read-modify-write
// here is atomic.
inline unsigned atomicAdd(unsigned* p, unsigned v) {
    const unsigned old = *p;
    *p = old + v;
    return old;
}

inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
    const unsigned long long old = *p;
    *p = old + v;
    return old;
}

inline long long __float2ll_rn(float f) { return std::llrint(f); }  // round to nearest even

inline unsigned atomicExch(unsigned* p, unsigned v) {
    const unsigned old = *p;
    *p = v;
    return old;
}

inline unsigned emu_atomic_load(const unsigned* p) { return *reinterpret_cast<const volatile unsigned*>(p); }
inline void emu_yield() { emu::yield(); }
inline void emu_fence() {}
inline void emu_fail(const char* message) { emu::fail(message); }
inline unsigned char* mk_shared_memory() { return emu::block_shared_memory(); }

namespace cooperative_groups {
struct grid_group {
    void sync() const { emu::sync_grid(); }
};
inline grid_group this_grid() { return grid_group{}; }
}  // namespace cooperative_groups
