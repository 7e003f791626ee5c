// The cost of one grid-wide barrier on this device: a cooperative kernel that only synchronises.
// time(iterations = N) - time(iterations = 0), over N, is the cost of one barrier.
//   grid_sync_loop<0>: cooperative_groups grid.sync(), the megakernel's phase barrier.
//   grid_sync_loop<1>: mk::subset_barrier over every block (the head-group barrier's code, and the
//                      grid barrier with MK_OWN_GRID_BARRIER).
#include "mk_device.cuh"

template <int kMode>
__global__ void __launch_bounds__(512, 1) grid_sync_loop(unsigned* word, const int iterations) {
    for (int i = 0; i < iterations; ++i) {
        if (kMode == 0) {
            cooperative_groups::this_grid().sync();
        } else {
            mk::subset_barrier(word, gridDim.x, blockIdx.x == 0);
        }
    }
}

template __global__ void grid_sync_loop<0>(unsigned*, const int);
template __global__ void grid_sync_loop<1>(unsigned*, const int);
