"""The gemm_schedules family: CUTLASS Hopper Ping-pong vs Cooperative, configs, shapes, margins."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from kernels.contract import KernelFamily, TargetShortfalls
from pytest_gpuperf import CudaModule
from pytest_gpuperf import MarginsFile

SOURCES: tuple[Path, ...] = (Path(__file__).with_name("gemm_sm90.cu"),)

SCHEDULE_CODES = {"pingpong": 0, "cooperative": 1}
# nvcc flags after build_shared_library's defaults (-O3 -DNDEBUG ...). CUTLASS needs relaxed
# constexpr for its host/device tuple algebra (its CMake sets it too).
NVCC_FLAGS: tuple[str, ...] = ("--expt-relaxed-constexpr",)
ARCH = "sm_90a"  # wgmma and setmaxnreg exist only in sm_90a code


@dataclasses.dataclass(frozen=True)
class GemmConfig:
    """One build of gemm_sm90.cu: a kernel schedule, a CTA tile and a cluster shape."""

    schedule: str  # "pingpong" or "cooperative"
    tile: tuple[int, int, int]  # (M, N, K) of one CTA's output tile and k-block
    cluster: tuple[int, int]  # (M, N) CTAs per thread-block cluster

    @property
    def name(self) -> str:
        (tm, tn, tk), (cm, cn) = self.tile, self.cluster
        return f"{self.schedule}_{tm}x{tn}x{tk}_c{cm}x{cn}"

    def defines(self) -> tuple[str, ...]:
        """The -D flags that select this configuration in gemm_sm90.cu."""
        (tm, tn, tk), (cm, cn) = self.tile, self.cluster
        return (
            f"-DGEMM_SCHEDULE={SCHEDULE_CODES[self.schedule]}",
            f"-DGEMM_TILE_M={tm}",
            f"-DGEMM_TILE_N={tn}",
            f"-DGEMM_TILE_K={tk}",
            f"-DGEMM_CLUSTER_M={cm}",
            f"-DGEMM_CLUSTER_N={cn}",
        )


# The note's pairing: Ping-pong's tile is half of Cooperative's, since one Ping-pong consumer
# warp group holds a whole tile's accumulators while a Cooperative tile is split over two.
# 64 bf16 = 128 bytes of K per stage, one 128-byte swizzle atom.
_ALL = (
    GemmConfig("pingpong", (128, 128, 64), (2, 1)),
    GemmConfig("cooperative", (256, 128, 64), (2, 1)),
    # Alternatives for tuning the 8192^3 case (built and timed by sweep.py, not by the tests).
    GemmConfig("pingpong", (128, 128, 64), (1, 2)),
    GemmConfig("pingpong", (128, 128, 64), (1, 1)),
    GemmConfig("cooperative", (256, 128, 64), (1, 2)),
    GemmConfig("cooperative", (128, 256, 64), (2, 1)),
)
CONFIGS: dict[str, GemmConfig] = {c.name: c for c in _ALL}

# Variant name -> the config the tests and gates use. Kept after the sweep on an H200 (8192^3,
# default tile-scheduler settings; README.md's sweep table): no alternative build was faster.
# cooperative_128x256x64_c2x1 tied (1667.9 us vs 1671.0 us; its raster/swizzle not swept);
# cooperative c1x2 1689.8 us; pingpong c1x2 1830.0 us and c1x1 2083.5 us vs c2x1 1873.3 us
# (c1x2's 2.4% lead is under what raster/swizzle alone gives c2x1: 1682.2 us, see PERF_LAUNCH).
VARIANTS: dict[str, str] = {
    "pingpong": "pingpong_128x128x64_c2x1",
    "cooperative": "cooperative_256x128x64_c2x1",
}


def build_flags(config: GemmConfig) -> tuple[str, ...]:
    """The nvcc flags one configuration is built with (launch.build_config and CUDA_MODULES)."""
    return (*NVCC_FLAGS, *config.defines())


# tests/gemm_schedules/test_static.py: the variants' libraries, built exactly as launch.py builds
# them (same flags, so the same nvcc cache entry: a CUTLASS build takes 1-2 minutes). Facts: the
# mainloop's warpgroup MMAs (HGMMA) and the register reallocation between producer and consumer
# warpgroups (setmaxnreg -> USETMAXREG); ptxas's C7510 (wgmma serialized across a call, e.g.
# from device asserts without -DNDEBUG) fails the tier separately.
CUDA_MODULES: tuple[CudaModule, ...] = tuple(
    CudaModule(
        f"gemm_schedules.{variant}",
        SOURCES[0],
        options=build_flags(CONFIGS[config_name]),
        archs=(ARCH,),
        shared_library=True,
        include_dirs_from="kernels.gemm_schedules.launch:cutlass_include_dirs",
        library_name=f"gemm_{config_name}",
        sass_facts={"cutlass::device_kernel<": (r"\bHGMMA\.", r"\bUSETMAXREG\b")},
        group="gemm_schedules",
    )
    for variant, config_name in VARIANTS.items()
)


@dataclasses.dataclass(frozen=True)
class Launch:
    """Tile-scheduler settings of a launch (no rebuild): the order in which a persistent CTA walks
    the output tiles ("heuristic": along M when there are more tile columns than tile rows, else
    along N) and the swizzle (CUTLASS caps it at what the tile grid allows)."""

    raster: str = "heuristic"  # "heuristic", "along_m" or "along_n"
    swizzle: int = 1  # 1, 2, 4 or 8

    @property
    def label(self) -> str:
        return f"{self.raster}/swz{self.swizzle}"


DEFAULT_LAUNCH = Launch()

# (M, N, K). D = A @ B with A (M, K), B given as (N, K); N and K must be multiples of 8.
PERF_SHAPES: dict[str, tuple[int, int, int]] = {
    "square4096": (4096, 4096, 4096),
    "square6144": (6144, 6144, 6144),
    "square8192": (8192, 8192, 8192),
    "decode_m16": (16, 8192, 8192),  # one token batch against a 8192x8192 weight
    "decode_m128": (128, 8192, 8192),
    "k_heavy": (2048, 2048, 32768),
    "irregular": (3001, 5000, 4104),  # no dimension a multiple of any tile; K has a partial k-block
}

# Shapes whose perf tests time each variant over this many separately allocated input copies,
# cycled launch by launch (Variant rotations): a decode GEMM's time depends on where its inputs
# landed in device memory, so one allocation's time is not the kernel's (README, "Input placement").
PLACEMENT_COPIES: dict[str, int] = {"decode_m16": 8, "decode_m128": 8}

# The launch each perf test uses, per shape and variant; DEFAULT_LAUNCH where a shape is not listed.
# From sweep.py on an H200 (README.md's sweep table; each launch timed on its own, cold-L2
# mode), which swept raster x swizzle at 8192^3 only: the
# other shapes keep the default until a sweep tunes them (sweep.py now does, and prints the
# entries to change here).
PERF_LAUNCH: dict[str, dict[str, Launch]] = {
    "square8192": {
        # 1614.0 us [1613.0, 1628.7] = 681 TFLOP/s, 1.002 of cuBLAS (1616.6 us); along_n/swz4 tied
        # (1614.8 us). Default (heuristic = along M here, swizzle 1): 1671.0 us, 0.967 of cuBLAS.
        "cooperative": Launch("along_n", 8),
        # 1682.2 us [1680.7, 1690.6] = 654 TFLOP/s, 0.961 of cuBLAS; along_m/swz8 tied (1686.6 us).
        # Default (heuristic = along N here, swizzle 1): 1873.3 us, 0.863 of cuBLAS.
        "pingpong": Launch("along_n", 8),
    },
}


def perf_launch(shape: str, variant: str) -> Launch:
    """The tile-scheduler settings the perf tests use for ``variant`` on ``shape``."""
    return PERF_LAUNCH.get(shape, {}).get(variant, DEFAULT_LAUNCH)


# Margins per architecture, keyed "<fast>_vs_<baseline>[<shape>]", each with the interval it came
# from (GPU, date, commit): margins.json. An architecture without a table records the ratios
# ungated. A value below 1 gates "Ping-pong no slower than this fraction of Cooperative" on
# shapes where the note's claim does not hold. Margins come from the interleaved perf tests at
# PERF_LAUNCH, not from the sweep; for scale, the H200 sweep (separately timed) put Ping-pong over
# Cooperative at x1.066 (square4096), x0.990 (square6144), x0.959 (square8192 at PERF_LAUNCH;
# x0.892 at the default launch), x1.845 (decode_m16), x2.125 (decode_m128), x0.981 (k_heavy),
# x0.882 (irregular). On the H100 SXM these GEMMs run at the power cap (SM clocks 1275-1755 MHz)
# and each schedule's time moves between levels 10-15% apart, not together with the other's: at
# square8192 Ping-pong over Cooperative came out 1.030x on one machine and 0.871x on another, so
# the margins there bound the slowdown (README, "What did not hold, and why").
MARGINS = MarginsFile.read(SOURCES[0].with_name("margins.json"))
SPEEDUP_MARGINS: dict[str, dict[str, float | None]] = MARGINS.table()

# Required by issue 4 (a requirement, not a measurement): the faster schedule reaches at least this
# fraction of cuBLAS's throughput at 8192^3.
CUBLAS_FRACTION_REQUIRED: dict[str, dict[str, float]] = {"sm_90": {"square8192": 0.95}}

# The faster schedule, per architecture and shape, which that gate times against cuBLAS (measured,
# so the test need not time both schedules again). H200 sweep, both at PERF_LAUNCH: Cooperative
# 1614.0 us [1613.0, 1628.7] vs Ping-pong 1682.2 us [1680.7, 1690.6], Ping-pong at x0.959.
# The interleaved test_pingpong_vs_cooperative[square8192] put Ping-pong ahead at 8192^3 with the
# tuned launch (on an H200: 1.0268x [1.0250, 1.0327]), so the gate times Ping-pong; switch
# if that test ever puts Cooperative ahead on the H200.
FASTER_SCHEDULE: dict[str, dict[str, str]] = {"sm_90": {"square8192": "pingpong"}}

# GPU models (the name NVML reports) on which CUBLAS_FRACTION_REQUIRED ("cublas_fraction") is not
# reliably met, with what was measured, at every shape it applies to (None). There the test measures
# and records the ratio ungated, passes when its whole interval meets the requirement and xfails
# otherwise (baseline regressions still fail it).
TARGET_SHORTFALLS: TargetShortfalls = {
    "sm_90": {
        "cublas_fraction": {
            "NVIDIA H100 80GB HBM3": (
                None,
                "H100 SXM 2026-11-25 (six machines): Ping-pong at 8192^3 reached 0.892x "
                "[0.887, 0.898] and 0.894x of cuBLAS on two, 1.016x to 1.041x on the other four; "
                "power-capped, the schedules' "
                "times move between levels 10-15% apart there, so the required 0.95x holds on some H100s only",
            ),
        },
    },
}

# A shape where cuBLAS is more than this much faster than the better schedule is reported.
CUBLAS_WIN_REPORT_THRESHOLD = 1.10


def gemm_flops(m: int, n: int, k: int) -> int:
    """Floating-point operations of one M x N x K product (a multiply-add counts 2)."""
    return 2 * m * n * k


def gemm_bytes(m: int, n: int, k: int) -> int:
    """Fewest device-memory bytes one call moves: A and B read once, D written once (bf16)."""
    return 2 * (m * k + n * k + m * n)


FAMILY = KernelFamily(
    name="gemm_schedules",
    directory=SOURCES[0].parent,
    sources=SOURCES,
    cuda_modules=CUDA_MODULES,
    margins=MARGINS,
    perf_grid=PERF_SHAPES,
    margin_tests=("test_pingpong_vs_cooperative",),
    target_shortfalls=TARGET_SHORTFALLS,
)
