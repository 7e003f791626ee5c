"""Check every qkv variant, then time it over the note's layers and a launch sweep.

    python -m kernels.qkv.sweep --out qkv_sweep.json

1. Checks: every variant (default launch) and cuBLAS against the float64 reference on the
   two layers and two odd shapes; prints PASS/FAIL with the relative L2 error.
2. Timings (cold L2): cuBLAS and every variant's default launch on both layers first, then
   the sweep: warps per block 1..32 with blocks = SMs, 4, 8 and 16 warps with 2x, 4x and 8x
   SMs (up to 64 resident warps per SM for the base kernels), and for the strip variants 4, 8
   and 16 words per thread; blocks larger than a kernel is built for are left out. Each
   configuration is checked once before it is timed. Sweep configurations stop when
   --budget-s is spent (reported).
3. A table per layer ("x base": speedup over the fastest qkv_base launch; "x cuBLAS": over
   cuBLAS, below 1 is slower), then a summary short enough for a log tail: cuBLAS, the best
   configuration per variant (as BEST_CONFIGS lines for family.py) and the gated ratios of
   those best configurations. All figures go to --out.
"""
from __future__ import annotations

import os
import time
from dataclasses import asdict
from typing import Any, Callable

from kernels import sweeps
from kernels.qkv.family import GATES, LAYERS, gate_key
from kernels.qkv.launch import (
    STRIP_VARIANTS,
    STRIP_WORDS,
    VARIANTS,
    LaunchConfig,
    QkvBuffers,
    make_cublas_launcher,
    make_launcher,
    max_warps_per_block,
    upload,
)
from kernels.qkv.reference import QkvShape, make_inputs

SEED = 2023
MAX_REL_L2 = 1e-5  # fp32 accumulation vs float64 (justified in tests/qkv/test_correctness.py)
CHECK_SHAPES = {
    **LAYERS,
    "odd": QkvShape(d_model=37, d_qkv=101, d_ws=333),
    "tiny": QkvShape(d_model=3, d_qkv=5, d_ws=7),
}
SWEEP_WARPS = (1, 2, 3, 4, 8, 16, 32)
QUICK_WARPS = (4, 8, 16)
# The first H200 sweep stopped at 4 blocks of 8 warps per SM, where qkv_base_w2 was
# still speeding up (it has registers for 64 warps per SM): 16 warps and 8 blocks extend it.
MULTI_BLOCK_WARPS = (4, 8, 16)
BLOCKS_PER_SM = (2, 4, 8)


def sweep_configs(variant: str, quick: bool) -> list[LaunchConfig]:
    """Launch configurations to time for ``variant``, the default one first."""
    words_options = STRIP_WORDS if variant in STRIP_VARIANTS else (LaunchConfig().words_per_thread,)
    configs = [LaunchConfig()]
    for words in words_options:
        full = words == LaunchConfig().words_per_thread and not quick
        configs += [LaunchConfig(warps_per_block=w, words_per_thread=words) for w in (SWEEP_WARPS if full else QUICK_WARPS)]
        if not quick:
            configs += [
                LaunchConfig(warps_per_block=w, blocks_per_sm=b, words_per_thread=words)
                for b in BLOCKS_PER_SM
                for w in MULTI_BLOCK_WARPS
            ]
    feasible = [c for c in configs if c.warps_per_block <= max_warps_per_block(variant, c.words_per_thread)]
    return list(dict.fromkeys(feasible))


class Layer:
    """Device buffers of one shape and its float64 reference on the device."""

    def __init__(self, name: str, shape: QkvShape):
        import cupy

        from kernels.qkv.reference import reference

        w_qkv, h_in = make_inputs(shape, SEED)
        self.name, self.shape = name, shape
        self.bufs: QkvBuffers = upload(w_qkv, h_in)
        self.expected = cupy.asarray(reference(w_qkv, h_in))
        self._expected_norm = float(cupy.linalg.norm(self.expected))

    def check(self, launch: Callable[[], None]) -> tuple[bool, float, int]:
        """Run ``launch`` on a poisoned output: (passed, relative L2 error, NaN count)."""
        import cupy

        from pytest_gpuperf.numerics import poison

        poison(self.bufs.h_qkv)
        launch()
        out = self.bufs.h_qkv.astype(cupy.float64)
        nans = int(cupy.isnan(out).sum())
        err = float(cupy.linalg.norm(cupy.nan_to_num(out) - self.expected)) / self._expected_norm
        return nans == 0 and err <= MAX_REL_L2, err, nans


def run_checks(layers: list[Layer], results: dict[str, Any]) -> None:
    print("== correctness (default launch) vs float64 reference, max rel L2", MAX_REL_L2)
    for layer in layers:
        name, shape = layer.name, layer.shape
        launchers: dict[str, Callable[[], None]] = {v: make_launcher(v, layer.bufs) for v in VARIANTS}
        launchers["cublas"] = make_cublas_launcher(layer.bufs)
        for variant, launch in launchers.items():
            ok, err, nans = layer.check(launch)
            verdict = "PASS" if ok else "FAIL"
            print(f"{verdict} {variant:13s} {name:6s} ({shape}) rel_l2={err:.2e} nan={nans}")
            results["checks"].append(
                {"variant": variant, "shape": name, **asdict(shape), "passed": ok, "rel_l2": err, "nan": nans}
            )


def time_layer(layer: Layer, quick: bool, deadline: float, results: dict[str, Any], sweep: bool) -> None:
    """Time cuBLAS and the variants on ``layer``: default launches, or the rest of the sweep."""
    from pytest_gpuperf.bench import time_callable
    from pytest_gpuperf.bench import SamplingPolicy

    policy = SamplingPolicy(budget_s=0.25, precision=0.01, min_samples=10, extension_budget_s=0.0)
    shape = layer.shape

    def record(variant: str, label: str, config: LaunchConfig | None, launch: Callable[[], None]) -> None:
        entry: dict[str, Any] = {"variant": variant, "layer": layer.name, "config": label}
        entry["launch"] = asdict(config) if config else None
        ok, err, nans = layer.check(launch)
        entry.update(passed=ok, rel_l2=err, nan=nans)
        if ok:
            m = time_callable(launch, name=f"{variant}[{label}]", cache="cold", bytes=shape.min_bytes,
                              flops=shape.flops, policy=policy)
            entry.update(median_s=m.median_s, ci_low_s=m.ci_low_s, ci_high_s=m.ci_high_s,
                         tflops=shape.flops / m.median_s / 1e12, gbps=shape.min_bytes / m.median_s / 1e9,
                         method=m.method, throttled=m.throttled, notes=list(m.notes))
        results["timings"].append(entry)

    if not sweep:
        record("cublas", "cupy.matmul", None, make_cublas_launcher(layer.bufs))
    for variant in VARIANTS:
        configs = sweep_configs(variant, quick)
        for config in configs[1:] if sweep else configs[:1]:
            label = config.label(variant)
            if sweep and time.monotonic() > deadline:
                results["skipped"].append({"variant": variant, "layer": layer.name, "config": label})
                continue
            try:
                launch = make_launcher(variant, layer.bufs, config)
            except ValueError as exc:  # e.g. more warps than the kernel's registers allow
                results["infeasible"].append({"variant": variant, "layer": layer.name, "config": label,
                                              "reason": str(exc)})
                continue
            record(variant, label, config, launch)


def best_per_variant(results: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    best: dict[tuple[str, str], dict[str, Any]] = {}
    for t in results["timings"]:
        key = (t["variant"], t["layer"])
        if "median_s" in t and (key not in best or t["median_s"] < best[key]["median_s"]):
            best[key] = t
    return best


def print_report(results: dict[str, Any]) -> None:
    best = best_per_variant(results)
    for layer in LAYERS:
        shape = LAYERS[layer]
        print(f"\n== {layer} ({shape}): {shape.flops / 1e9:.3f} GFLOP, {shape.min_bytes / 1e6:.2f} MB minimum traffic")
        print(f"{'variant':13s} {'config':16s} {'median us':>10s} {'CI us':>17s} {'TFLOP/s':>8s} {'GB/s':>7s} "
              f"{'x base':>7s} {'x cuBLAS':>8s}")
        base = best.get(("qkv_base", layer))
        cublas = best.get(("cublas", layer))
        rows = [t for t in results["timings"] if t["layer"] == layer]
        for t in sorted(rows, key=lambda t: (t["variant"], t.get("median_s", float("inf")))):
            if "median_s" not in t:
                print(f"{t['variant']:13s} {t['config']:16s} FAIL rel_l2={t['rel_l2']:.2e} nan={t['nan']}")
                continue
            us = t["median_s"] * 1e6
            ci = f"[{t['ci_low_s'] * 1e6:.2f}, {t['ci_high_s'] * 1e6:.2f}]"
            x_base = base["median_s"] / t["median_s"] if base else float("nan")
            x_cublas = cublas["median_s"] / t["median_s"] if cublas else float("nan")
            star = " *" if best.get((t["variant"], layer)) is t else ""
            print(f"{t['variant']:13s} {t['config']:16s} {us:10.2f} {ci:>17s} {t['tflops']:8.2f} {t['gbps']:7.0f} "
                  f"{x_base:7.2f} {x_cublas:8.3f}{star}")

    print("\n== cuBLAS (cupy.matmul; timed with events: CuPy refuses cuBLAS calls in graph capture)")
    for layer in LAYERS:
        c = best.get(("cublas", layer))
        if c:
            print(f"{layer}: {c['median_s'] * 1e6:.2f} us [{c['ci_low_s'] * 1e6:.2f}, {c['ci_high_s'] * 1e6:.2f}] "
                  f"{c['tflops']:.2f} TFLOP/s {c['gbps']:.0f} GB/s")
    print("\n== best configuration per variant (* above); BEST_CONFIGS lines for family.py:")
    for (variant, layer), t in sorted(best.items()):
        if t["launch"]:
            fields = ", ".join(
                f"{k}={v!r}" for k, v in t["launch"].items()
                if v is not None and (k != "words_per_thread" or variant in STRIP_VARIANTS)
            )
            cublas = best.get(("cublas", layer))
            x_cublas = f", {cublas['median_s'] / t['median_s']:.3f}x cuBLAS" if cublas else ""
            print(f'    "{variant}/{layer}": LaunchConfig({fields}),  # {t["median_s"] * 1e6:.2f} us '
                  f'[{t["ci_low_s"] * 1e6:.2f}, {t["ci_high_s"] * 1e6:.2f}]{x_cublas}')
    print("\n== gated ratios at the best configurations (separate runs, not interleaved; the perf tests measure them "
          "interleaved)")
    for fast, baseline, layer in GATES:
        f, b = best.get((fast, layer)), best.get((baseline, layer))
        if f and b:
            ratio = b["median_s"] / f["median_s"]
            results["gates"].append({"fast": fast, "baseline": baseline, "layer": layer, "speedup": ratio})
            print(f"{gate_key(fast, baseline, layer)}: {ratio:.3f}x")
    if results["skipped"]:
        print(f"\n{len(results['skipped'])} sweep configurations skipped: --budget-s spent")
    print(f"{len(results['infeasible'])} configurations refused by the launcher (reasons in --out)")
    failed = [c for c in results["checks"] if not c["passed"]] + [t for t in results["timings"] if not t["passed"]]
    print(f"{len(failed)} correctness failures" + (": see above" if failed else ""))


def main(argv: list[str] | None = None) -> int:
    parser = sweeps.parser("qkv", __doc__.split("\n")[0])
    parser.add_argument("--budget-s", type=float, default=45.0, help="stop the sweep (not the defaults) after this")
    parser.add_argument("--quick", action="store_true", help="warps 4, 8, 16 only, one block per SM")
    args = parser.parse_args(argv)

    start = time.monotonic()
    run = sweeps.start("qkv")
    results: dict[str, Any] = {
        "env": {"CUPY_TF32": os.environ.get("CUPY_TF32")},
        "checks": [], "timings": [], "skipped": [], "infeasible": [], "gates": [],
    }
    check_layers = [Layer(name, shape) for name, shape in CHECK_SHAPES.items()]
    run_checks(check_layers, results)
    timed_layers = [layer for layer in check_layers if layer.name in LAYERS]
    deadline = start + args.budget_s
    for sweep in (False, True):
        for layer in timed_layers:
            time_layer(layer, args.quick, deadline, results, sweep)
    print_report(results)
    run.write(args.out, results)
    failed = any(not c["passed"] for c in results["checks"]) or any(not t["passed"] for t in results["timings"])
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
