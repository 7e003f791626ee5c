// D = A @ B on Hopper with a CUTLASS 3.x TMA warp-specialized persistent kernel.
//
// One build of this file is one kernel configuration, chosen with -D flags (family.py lists them):
//   GEMM_SCHEDULE   0 = Ping-pong, 1 = Cooperative
//   GEMM_TILE_M/N/K the CTA tile;  GEMM_CLUSTER_M/N the thread-block cluster
//
// Layouts ("TN", the layout Hopper's wgmma reads without transposes for 16-bit types):
//   A  bf16, M x K, row-major    (a C-contiguous (M, K) array)
//   B  bf16, K x N, column-major (a C-contiguous (N, K) array: the weight layout of nn.Linear)
//   D  bf16, M x N, row-major    (fp32 accumulation; no C operand is read: D = A @ B, beta = 0)
// TMA needs 16-byte aligned base pointers and row pitches, so K and N must be multiples of 8.
//
// The host API is extern "C" for ctypes: a plan binds one problem to its buffers (params and TMA
// descriptors built once), so gemm_plan_run only launches.
#include <cstdio>
#include <new>
#include <string>

#include <cuda_runtime.h>

#include "cutlass/cutlass.h"
#include "cute/tensor.hpp"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/kernel_hardware_info.h"
#include "cutlass/util/packed_stride.hpp"

#if !defined(GEMM_SCHEDULE) || !defined(GEMM_TILE_M) || !defined(GEMM_TILE_N) || !defined(GEMM_TILE_K) || \
    !defined(GEMM_CLUSTER_M) || !defined(GEMM_CLUSTER_N)
#error "define GEMM_SCHEDULE, GEMM_TILE_M/N/K and GEMM_CLUSTER_M/N (see kernels/gemm_schedules/family.py)"
#endif

namespace {

using namespace cute;

using ElementA = cutlass::bfloat16_t;
using ElementB = cutlass::bfloat16_t;
using ElementD = cutlass::bfloat16_t;
using ElementAccumulator = float;
using LayoutA = cutlass::layout::RowMajor;
using LayoutB = cutlass::layout::ColumnMajor;
using LayoutD = cutlass::layout::RowMajor;
constexpr int kAlignment = 128 / cutlass::sizeof_bits<ElementA>::value;  // 8 elements = 16 bytes

using TileShape = Shape<Int<GEMM_TILE_M>, Int<GEMM_TILE_N>, Int<GEMM_TILE_K>>;
using ClusterShape = Shape<Int<GEMM_CLUSTER_M>, Int<GEMM_CLUSTER_N>, _1>;

#if GEMM_SCHEDULE == 0
using MainloopSchedule = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecialized;
constexpr const char* kScheduleName = "pingpong";
#elif GEMM_SCHEDULE == 1
using MainloopSchedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;
constexpr const char* kScheduleName = "cooperative";
#else
#error "GEMM_SCHEDULE must be 0 (Ping-pong) or 1 (Cooperative)"
#endif

// ElementC = void: the epilogue reads no source tensor, so D = alpha * acc.
using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
    TileShape, ClusterShape,
    cutlass::epilogue::collective::EpilogueTileAuto,
    ElementAccumulator, ElementAccumulator,
    void, LayoutD, kAlignment,
    ElementD, LayoutD, kAlignment,
    EpilogueSchedule>::CollectiveOp;

// Stages: as many as fit in shared memory after the epilogue's share.
using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
    ElementA, LayoutA, kAlignment,
    ElementB, LayoutB, kAlignment,
    ElementAccumulator,
    TileShape, ClusterShape,
    cutlass::gemm::collective::StageCountAutoCarveout<
        static_cast<int>(sizeof(typename CollectiveEpilogue::SharedStorage))>,
    MainloopSchedule>::CollectiveOp;

using GemmKernel = cutlass::gemm::kernel::GemmUniversal<
    Shape<int, int, int, int>, CollectiveMainloop, CollectiveEpilogue>;
using Gemm = cutlass::gemm::device::GemmUniversalAdapter<GemmKernel>;

using RasterOrder = cutlass::gemm::kernel::detail::RasterOrderOptions;

thread_local std::string g_last_error;

int fail(const std::string& message) {
  g_last_error = message;
  return 1;
}

int fail_status(const char* where, cutlass::Status status) {
  return fail(std::string(where) + ": " + cutlassGetStatusString(status));
}

int fail_cuda(const char* where, cudaError_t err) {
  return fail(std::string(where) + ": " + cudaGetErrorString(err));
}

Gemm::Arguments make_arguments(int m, int n, int k, const void* a, const void* b, void* d, int device,
                               int max_swizzle, int raster) {
  auto stride_a = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideA{}, cute::make_shape(m, k, 1));
  auto stride_b = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideB{}, cute::make_shape(n, k, 1));
  auto stride_c = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideC{}, cute::make_shape(m, n, 1));
  auto stride_d = cutlass::make_cute_packed_stride(Gemm::GemmKernel::StrideD{}, cute::make_shape(m, n, 1));

  cutlass::KernelHardwareInfo hw_info;
  hw_info.device_id = device;
  hw_info.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(device);

  Gemm::Arguments args{
      cutlass::gemm::GemmUniversalMode::kGemm,
      {m, n, k, 1},
      {static_cast<const ElementA*>(a), stride_a, static_cast<const ElementB*>(b), stride_b},
      {{1.0f, 0.0f}, nullptr, stride_c, static_cast<ElementD*>(d), stride_d},
      hw_info};
  args.scheduler.max_swizzle_size = max_swizzle;
  args.scheduler.raster_order = raster == 1   ? RasterOrder::AlongM
                                : raster == 2 ? RasterOrder::AlongN
                                              : RasterOrder::Heuristic;
  return args;
}

}  // namespace

extern "C" {

// A one-line description of this build's configuration.
const char* gemm_config() {
  static char text[160];
  std::snprintf(text, sizeof(text), "%s tile %dx%dx%d cluster %dx%dx1 stages %d smem %d",
                kScheduleName, GEMM_TILE_M, GEMM_TILE_N, GEMM_TILE_K, GEMM_CLUSTER_M, GEMM_CLUSTER_N,
                static_cast<int>(CollectiveMainloop::DispatchPolicy::Stages),
                static_cast<int>(GemmKernel::SharedStorageSize));
  return text;
}

// The message of the last failed call on this thread.
const char* gemm_last_error() { return g_last_error.c_str(); }

// Bytes of device workspace a plan for this problem needs (0 for the data-parallel scheduler).
int gemm_workspace_size(int m, int n, int k, int max_swizzle, int raster, size_t* bytes) {
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return fail_cuda("cudaGetDevice", err);
  Gemm::Arguments args = make_arguments(m, n, k, nullptr, nullptr, nullptr, device, max_swizzle, raster);
  *bytes = Gemm::get_workspace_size(args);
  return 0;
}

// Check the problem, build the kernel parameters (TMA descriptors) and return an opaque plan.
// raster: 0 heuristic, 1 along M, 2 along N. max_swizzle: 1, 2, 4 or 8.
int gemm_plan_create(int m, int n, int k, const void* a, const void* b, void* d, void* workspace,
                     size_t workspace_bytes, int max_swizzle, int raster, void* stream, void** plan) {
  *plan = nullptr;
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return fail_cuda("cudaGetDevice", err);

  Gemm::Arguments args = make_arguments(m, n, k, a, b, d, device, max_swizzle, raster);
  cutlass::Status status = Gemm::can_implement(args);
  if (status != cutlass::Status::kSuccess) return fail_status("can_implement", status);
  size_t needed = Gemm::get_workspace_size(args);
  if (workspace_bytes < needed) {
    return fail("workspace of " + std::to_string(workspace_bytes) + " bytes, need " + std::to_string(needed));
  }

  Gemm* gemm = new (std::nothrow) Gemm();
  if (gemm == nullptr) return fail("out of host memory");
  status = gemm->initialize(args, workspace, static_cast<cudaStream_t>(stream));
  if (status != cutlass::Status::kSuccess) {
    delete gemm;
    return fail_status("initialize", status);
  }
  *plan = gemm;
  return 0;
}

// Enqueue the GEMM on `stream`; no allocation, no synchronization.
int gemm_plan_run(void* plan, void* stream) {
  if (plan == nullptr) return fail("null plan");
  cutlass::Status status = static_cast<Gemm*>(plan)->run(static_cast<cudaStream_t>(stream));
  if (status != cutlass::Status::kSuccess) return fail_status("run", status);
  return 0;
}

void gemm_plan_destroy(void* plan) { delete static_cast<Gemm*>(plan); }

}  // extern "C"
