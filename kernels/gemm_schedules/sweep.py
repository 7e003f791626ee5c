"""Build, check and time every GEMM configuration and cuBLAS in one run on the device.

    python -m kernels.gemm_schedules.sweep --out sweep.json [--jobs 16] [--cache-dir DIR]

1. builds every config of family.CONFIGS in parallel (cached; prints ptxas performance warnings);
2. checks each config and cuBLAS against references on two irregular shapes (PASS/FAIL + error);
3. times cuBLAS and the two variants over family.PERF_SHAPES, every config at 8192^3, and a
   rasterization/swizzle sweep at 8192^3; prints TFLOP/s, speedups and where cuBLAS wins by >10%;
4. writes every figure to --out as JSON.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from typing import Any, Callable, Sequence

from kernels.gemm_schedules.build import build_all, registers
from kernels.gemm_schedules.family import CONFIGS, CUBLAS_WIN_REPORT_THRESHOLD, PERF_SHAPES, VARIANTS
from kernels.gemm_schedules.launch import GemmLibrary
from kernels.gemm_schedules.reference import bf16_bits_to_float32, make_inputs, reference_gemm, tolerances

CHECK_SHAPES = ((257, 136, 72), (3001, 5000, 4104))
SWEEP_SHAPE = "square8192"
SWIZZLES = (1, 2, 4, 8)
RASTERS = ("along_m", "along_n")
TIMING_BUDGET_S = 0.6  # per measurement; ~40 measurements keep the sweep near 40 s of GPU time


def _expected(m: int, n: int, k: int, a: Any, bt: Any) -> Any:
    """float64 NumPy for small problems, else cuBLAS fp32 on the exact float32 values of the inputs."""
    import cupy

    if m * n * k <= 2**27:
        return reference_gemm(a.get(), bt.get())
    return cupy.matmul(bf16_bits_to_float32(a, cupy), bf16_bits_to_float32(bt, cupy).T).get()


def check_all(libraries: dict[str, GemmLibrary]) -> list[dict[str, Any]]:
    """Every config and cuBLAS vs the reference on CHECK_SHAPES; prints PASS/FAIL lines."""
    import cupy

    from kernels.gemm_schedules.problem import GemmProblem
    from pytest_gpuperf.numerics import assert_close, poison

    rows = []
    for m, n, k in CHECK_SHAPES:
        a, bt = make_inputs(m, n, k, seed=7, xp=cupy)
        problem = GemmProblem(a, bt, cupy.empty((m, n), dtype=cupy.uint16))
        expected = _expected(m, n, k, a, bt)
        launchers: dict[str, Callable[[], Any]] = {"cublas": problem.cublas}
        for name, library in libraries.items():
            launchers[name] = functools.partial(problem.plan, library)
        for name, make in launchers.items():
            row: dict[str, Any] = {"variant": name, "shape": [m, n, k]}
            try:
                runner = make()
                poison(problem.out)
                runner.launch()
                cupy.cuda.get_current_stream().synchronize()
                actual = bf16_bits_to_float32(problem.out.get())
                row["rel_l2"] = assert_close(actual, expected, name=name, **tolerances(k))
                row["ok"] = True
            except Exception as exc:  # report every variant, then go on
                row.update(ok=False, error=f"{type(exc).__name__}: {exc}")
            rows.append(row)
            detail = f"rel_l2 {row['rel_l2']:.2e}" if row["ok"] else row["error"].splitlines()[0]
            print(f"{'PASS' if row['ok'] else 'FAIL'}  {name:32s} {m}x{n}x{k}  {detail}")
        del problem
        cupy.get_default_memory_pool().free_all_blocks()
    return rows


def _time(name: str, shape_name: str, problem: Any, launch: Callable[[], None], **extra: Any) -> dict[str, Any]:
    from pytest_gpuperf.bench import time_callable
    from pytest_gpuperf.timing.sampler import SamplingPolicy

    policy = SamplingPolicy(budget_s=TIMING_BUDGET_S)
    m = time_callable(launch, name=name, cache="cold", bytes=problem.bytes, flops=problem.flops, policy=policy)
    return {
        "variant": name,
        "shape_name": shape_name,
        "shape": list(problem.shape),
        "median_us": m.median_s * 1e6,
        "ci_low_us": m.ci_low_s * 1e6,
        "ci_high_us": m.ci_high_s * 1e6,
        "tflops": problem.flops / m.median_s / 1e12,
        "gbps": problem.bytes / m.median_s / 1e9,
        **extra,
    }


def time_all(libraries: dict[str, GemmLibrary]) -> list[dict[str, Any]]:
    """cuBLAS and the variants on every perf shape; all configs and the swizzle sweep at 8192^3."""
    import cupy

    from kernels.gemm_schedules.problem import GemmProblem

    rows = []
    for shape_name, (m, n, k) in PERF_SHAPES.items():
        problem = GemmProblem.random(m, n, k, seed=0)
        rows.append(_time("cublas", shape_name, problem, problem.cublas().launch))
        names = list(CONFIGS) if shape_name == SWEEP_SHAPE else list(VARIANTS.values())
        for name in names:
            if name in libraries:
                rows.append(_time(name, shape_name, problem, problem.plan(libraries[name]).launch))
        if shape_name == SWEEP_SHAPE:
            for name in VARIANTS.values():
                if name not in libraries:
                    continue
                for raster in RASTERS:
                    for swizzle in SWIZZLES:
                        plan = problem.plan(libraries[name], max_swizzle=swizzle, raster=raster)
                        label = f"{name}/{raster}/swz{swizzle}"
                        rows.append(_time(label, shape_name, problem, plan.launch, raster=raster, swizzle=swizzle))
        _print_shape(rows, shape_name)
        del problem
        cupy.get_default_memory_pool().free_all_blocks()
    return rows


def _print_shape(rows: list[dict[str, Any]], shape_name: str) -> None:
    mine = [r for r in rows if r["shape_name"] == shape_name]
    cublas = next(r for r in mine if r["variant"] == "cublas")
    for r in mine:
        r["vs_cublas"] = cublas["median_us"] / r["median_us"]
        print(
            f"{shape_name:12s} {r['variant']:44s} {r['median_us']:10.1f} us "
            f"[{r['ci_low_us']:.1f}, {r['ci_high_us']:.1f}]  {r['tflops']:7.1f} TFLOP/s "
            f"{r['gbps']:8.1f} GB/s  x{r['vs_cublas']:.3f} vs cuBLAS"
        )


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Ping-pong over Cooperative per shape, and the shapes where cuBLAS wins by more than 10%."""
    pp, co = VARIANTS["pingpong"], VARIANTS["cooperative"]
    summary: dict[str, Any] = {"pingpong_over_cooperative": {}, "cublas_wins_over_10pct": []}
    for shape_name in PERF_SHAPES:
        by_name = {r["variant"]: r for r in rows if r["shape_name"] == shape_name}
        if pp in by_name and co in by_name:
            summary["pingpong_over_cooperative"][shape_name] = by_name[co]["median_us"] / by_name[pp]["median_us"]
        schedules = [by_name[v] for v in (pp, co) if v in by_name]
        if schedules and "cublas" in by_name:
            best = min(schedules, key=lambda r: r["median_us"])
            ratio = best["median_us"] / by_name["cublas"]["median_us"]
            if ratio > CUBLAS_WIN_REPORT_THRESHOLD:
                summary["cublas_wins_over_10pct"].append({"shape": shape_name, "cublas_faster_by": ratio})
    sweep = [r for r in rows if r["shape_name"] == SWEEP_SHAPE and r["variant"] != "cublas"]
    if sweep:
        fastest = min(sweep, key=lambda r: r["median_us"])
        summary["fastest_at_8192"] = {"variant": fastest["variant"], "vs_cublas": fastest["vs_cublas"]}
    print("\nPing-pong over Cooperative (>1: Ping-pong faster, as the note claims):")
    for shape_name, speedup in summary["pingpong_over_cooperative"].items():
        print(f"  {shape_name:12s} x{speedup:.3f}{'' if speedup >= 1 else '  <- the note does not hold'}")
    print("cuBLAS faster than the better schedule by more than 10%:")
    for item in summary["cublas_wins_over_10pct"] or [{"shape": "none", "cublas_faster_by": float("nan")}]:
        print(f"  {item['shape']:12s} x{item['cublas_faster_by']:.3f}")
    if "fastest_at_8192" in summary:
        f = summary["fastest_at_8192"]
        print(f"fastest at 8192^3: {f['variant']} at {f['vs_cublas']:.3f} of cuBLAS (issue 4 wants >= 0.95)")
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="JSON file for every figure")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel nvcc builds")
    parser.add_argument("--cache-dir", default=None, help="nvcc build cache (default: $GPU_PERF_CACHE_DIR or ~/.cache/pytest-gpuperf)")
    args = parser.parse_args(argv)

    import cupy

    device = cupy.cuda.Device()
    props = cupy.cuda.runtime.getDeviceProperties(device.id)
    report: dict[str, Any] = {"device": props["name"].decode(), "compute_capability": device.compute_capability}
    print(f"device: {report['device']} (cc {report['compute_capability']})")

    start = time.perf_counter()
    builds = build_all(list(CONFIGS), jobs=args.jobs, cache_dir=args.cache_dir)
    print(f"builds: {time.perf_counter() - start:.0f} s wall")
    libraries: dict[str, GemmLibrary] = {}
    report["builds"] = {}
    for name, result in builds.items():
        if isinstance(result, Exception):
            report["builds"][name] = {"error": f"{type(result).__name__}: {result}"}
            print(f"BUILD FAIL {name}: {result}")
            continue
        libraries[name] = GemmLibrary(CONFIGS[name], result)
        report["builds"][name] = {
            "describe": libraries[name].describe(),
            "cached": result.cached,
            "build_seconds": result.build_seconds,
            "registers": registers(result),
            "perf_warnings": list(result.perf_warnings),
        }
        print(f"BUILD {'WARN' if result.perf_warnings else 'OK  '} {libraries[name].describe()}, registers {registers(result)}")
        for warning in result.perf_warnings:
            print(f"      ptxas: {warning}")

    report["checks"] = check_all(libraries)
    failed = {r["variant"] for r in report["checks"] if not r["ok"]}
    timed = {name: lib for name, lib in libraries.items() if name not in failed}
    report["timings"] = time_all(timed)
    report["summary"] = summarize(report["timings"])
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1)
    print(f"wrote {args.out}")
    return 1 if failed or len(libraries) < len(CONFIGS) else 0


if __name__ == "__main__":
    sys.exit(main())
