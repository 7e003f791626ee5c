"""Ping-pong vs Cooperative per shape, and the faster one against cuBLAS at 8192^3 (fixed shapes;
skipped without --gpu-perf). Each schedule launches with the tile-scheduler settings family.PERF_LAUNCH
gives for the shape (the fastest the sweep measured, else CUTLASS's defaults)."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from kernels.gemm_schedules.family import (
    CUBLAS_FRACTION_REQUIRED,
    CUBLAS_WIN_REPORT_THRESHOLD,
    FAMILY,
    FASTER_SCHEDULE,
    PERF_SHAPES,
    PLACEMENT_COPIES,
    SPEEDUP_MARGINS,
    VARIANTS,
    perf_launch,
)
from pytest_gpuperf import Variant

if TYPE_CHECKING:
    from pytest_gpuperf import GpuPerf

# Compute-bound GEMMs run power-capped (NVIDIA's sw_power_cap clock event), so their times follow
# each chip's power behaviour, not only the code. Regression checks compare each GEMM's time relative
# to a tensor-core GEMM reference timed in the same rounds (calibration), which removes what moves
# both alike. It does not remove Ping-pong's own levels: on H100s Ping-pong at 8192^3 ran 15% slower
# than its baseline in one of two runs on each of two machines, a whole run at one level, with
# Cooperative and the reference unchanged (replayed in test_bands.py).
# So checks against a single stored baseline carry a 16% band here and catch only gross slowdowns;
# the precise check is --gpu-perf-against (a pull request's merge base, timed in the same rounds),
# where no band applies. Entries recorded without calibration are compared raw, with the same band.
# Ping-pong 8192^3's H100 entry stores its two levels (gpuperf levels, over 15 A/A runs on eight
# H100s), and is checked to the default level band, 3%, of the level a run sits at.
pytestmark = pytest.mark.gpu_perf(machine_noise=0.16, calibrated_noise=0.16)
# On H200s the calibrated times of the square and K-heavy GEMMs stayed within 0.7% of the baselines
# recorded on another H200, on two machines (the A/A runs test_bands.py replays), so there they are checked with a 3% band. It fails the planted 13% Ping-pong slowdown
# that the 16% band passed (its interval [1.116, 1.138], replayed in test_bands.py)
# and passes every A/A check of those runs. The decode shapes, whose times move with where their
# buffers land (up to 12.7%), and the irregular one (intervals reaching about ±18%) keep 16% everywhere.
NARROW_ON_H200 = pytest.mark.gpu_perf_for("nvidia-h200-*", calibrated_noise=0.03)
NARROW_SHAPES = ("square4096", "square6144", "square8192", "k_heavy")
# The decode shapes' Ping-pong and Cooperative moved together from machine to machine by more than
# 16%: on one H100 both ran 16-21% slower than the stored baseline from another H100 in calibrated
# time, in two runs, while cuBLAS and decode_m128 ran at par (test_bands.py's H100_SLOW_DECODE); across 13 H100s and 6 H200s their calibrated
# times span up to 1.23x. So against stored baselines these check with a 30% band; their ratio (the
# speedup claim) holds within 1% on every machine, and --gpu-perf-against checks them precisely.
WIDE_SHAPES = {"decode_m16", "decode_m128"}
WIDE = pytest.mark.gpu_perf(machine_noise=0.30, calibrated_noise=0.30)


def shape_param(shape: str) -> Any:
    """The shape as a test parameter, with its regression band where it differs from the module's."""
    if shape in NARROW_SHAPES:
        return pytest.param(shape, marks=NARROW_ON_H200)
    if shape in WIDE_SHAPES:
        return pytest.param(shape, marks=WIDE)
    return shape


def assert_nothing_escaped(after: str) -> None:
    """The GPU is idle once a measurement returns: nothing was left on a stream the timing events
    did not bracket (once on an H200: cuBLAS calls piled up on another stream and overlapped
    later measurements). A partial guard: see problem.drain_device."""
    from kernels.gemm_schedules.problem import ESCAPED_WORK_LIMIT_S, drain_device

    busy_s = drain_device()
    assert busy_s <= ESCAPED_WORK_LIMIT_S, (
        f"after {after}: the GPU stayed busy {1e3 * busy_s:.1f} ms after the timing stream drained; work "
        "escaped the timing stream and overlapped the measurements, so they are not valid"
    )


def make_variants(
    gpu_perf: GpuPerf, shape: str, load_gemm: Callable[[str], Any], names: tuple[str, ...], seed: int
) -> dict[str, Variant]:
    """``names`` (schedules of VARIANTS, or "cublas") on one problem: random device inputs, shared
    output; on a shape in PLACEMENT_COPIES, on that many problems, each variant cycling through them.
    The buffers come through gpu_perf.shared, so under --gpu-perf-against both revisions time on the
    same ones (the decode shapes' times depend on where their buffers landed)."""
    import dataclasses

    from kernels.gemm_schedules.problem import GemmProblem

    def buffers(i: int) -> tuple[Any, ...]:
        problem = GemmProblem.random(*PERF_SHAPES[shape], seed=seed + 1000 * i)
        return tuple(getattr(problem, f.name) for f in dataclasses.fields(problem))

    copies = PLACEMENT_COPIES.get(shape, 1)
    problems = [GemmProblem(*gpu_perf.shared(("gemm buffers", shape, seed, i), lambda i=i: buffers(i))) for i in range(copies)]
    variants = {}
    for name in names:
        if name == "cublas":
            launches = [problem.cublas().launch for problem in problems]
        else:
            launch = perf_launch(shape, name)
            library = load_gemm(name)
            launches = [
                problem.plan(library, max_swizzle=launch.swizzle, raster=launch.raster).launch for problem in problems
            ]
        rotations = tuple(launches) if copies > 1 else ()
        variants[name] = Variant(
            name, launches[0], bytes=problems[0].bytes, flops=problems[0].flops, rotations=rotations
        )
    return variants


@pytest.mark.sm90(exact=True)  # sm_90a code runs on compute capability 9.0 only
@pytest.mark.parametrize("shape", [shape_param(shape) for shape in PERF_SHAPES])
def test_pingpong_vs_cooperative(gpu_perf: GpuPerf, load_gemm: Callable[[str], Any], shape: str) -> None:
    """The note's claim, per shape: Ping-pong at least as fast as Cooperative. Each shape's margin
    is what was measured there; below 1 where Cooperative wins (the note does not hold)."""
    v = make_variants(gpu_perf, shape, load_gemm, (*VARIANTS, "cublas"), seed=0)
    margin = SPEEDUP_MARGINS.get(gpu_perf.device.arch, {}).get(f"pingpong_vs_cooperative[{shape}]")
    comparison = gpu_perf.assert_speedup(v["pingpong"], v["cooperative"], at_least=margin)
    assert_nothing_escaped("Ping-pong vs Cooperative")
    cublas = gpu_perf.measure(v["cublas"])  # not interleaved: a reported figure, not a gate
    assert_nothing_escaped("measuring cuBLAS")
    tflops = {
        "pingpong": comparison.fast.flop_rate / 1e12,
        "cooperative": comparison.baseline.flop_rate / 1e12,
        "cublas": cublas.flop_rate / 1e12,
    }
    for name, rate in tflops.items():
        gpu_perf.record(f"{name}_tflops", rate, unit="TFLOP/s")
    gpu_perf.record("pingpong_over_cooperative", comparison.speedup)
    cublas_over_best = tflops["cublas"] / max(tflops["pingpong"], tflops["cooperative"])
    gpu_perf.record("cublas_over_best_schedule", cublas_over_best)
    # Reported, not gated (issue 4): shapes where cuBLAS beats the better schedule by more than 10%.
    # On the H200 sweep: square6144, both decode shapes (64 output tiles for 132 SMs, no split-K or
    # stream-K here) and k_heavy.
    gpu_perf.record("cublas_wins_by_over_10pct", float(cublas_over_best > CUBLAS_WIN_REPORT_THRESHOLD))


@pytest.mark.sm90(exact=True)
@NARROW_ON_H200
def test_faster_schedule_vs_cublas_at_8192(gpu_perf: GpuPerf, load_gemm: Callable[[str], Any]) -> None:
    """Issue 4: the faster schedule reaches at least 95% of cuBLAS at 8192^3 (interleaved with cuBLAS).
    Which schedule is faster is a measurement (family.FASTER_SCHEDULE), so only that one is timed;
    test_pingpong_vs_cooperative[square8192] records the ordering on every run. On a GPU model listed
    in family.TARGET_SHORTFALLS the ratio is measured and recorded ungated, and a run that does not
    show the requirement met is an xfail; baseline regressions and escaped work still fail it."""
    arch = gpu_perf.device.arch
    shortfall = FAMILY.target_shortfall(arch, gpu_perf.device.name, "cublas_fraction")
    required = CUBLAS_FRACTION_REQUIRED.get(arch, {}).get("square8192")
    best = FASTER_SCHEDULE.get(arch, {}).get("square8192", "cooperative")
    v = make_variants(gpu_perf, "square8192", load_gemm, (best, "cublas"), seed=1)
    comparison = gpu_perf.assert_speedup(v[best], v["cublas"], at_least=None if shortfall else required)
    assert_nothing_escaped(f"{best} vs cuBLAS")
    gpu_perf.record(f"{best}_over_cublas", comparison.speedup)
    if shortfall and required is not None and comparison.ci_low < required:
        pytest.xfail(
            f"{best} at {comparison.speedup:.3f}x [{comparison.ci_low:.3f}, {comparison.ci_high:.3f}] of cuBLAS, "
            f"required {required}x: a documented shortfall on this GPU model: {shortfall}"
        )
