"""One GPU run of everything the megakernel family wants to know (about a minute of device time).

    python -m kernels.megakernel.sweep --out megakernel.json

1. correctness spot check: every variant vs the float32 reference, full model, two positions;
2. the cost of one grid barrier (cooperative_groups and the subset barrier);
3. ms/token of every variant at every perf position, bandwidth and roofline fraction;
4. the Hugging Face transformers peer (static cache, CUDA graph) where torch/transformers import,
   timed only after its logits match ours (hf_peer.check_logits);
5. a summary of about 25 lines at the very end (table, best variant, the issue's targets).
Writes every figure to --out as JSON.
"""
from __future__ import annotations

import sys
import time
import traceback
from typing import Any

import numpy as np

from kernels import sweeps
from kernels.megakernel.config import QWEN3_0_6B
from kernels.megakernel.family import (
    HF_CHECK_STEPS,
    ISSUE_TARGETS,
    KV_TOLERANCE,
    LOGIT_TOLERANCE,
    MAX_SEQ,
    PERF_POSITIONS,
    ROOFLINE_POSITIONS,
    VARIANTS,
)
from kernels.megakernel.reference import ReferenceModel, bf16_bits_to_float, make_weights, random_kv_cache

CHECK_POSITIONS = (0, 7, 600)  # 0: one key, the step's own
TOKEN = 1234
GRID_SYNC_ITERATIONS = 2000


def _policy() -> Any:
    from pytest_gpuperf.bench import SamplingPolicy

    return SamplingPolicy(budget_s=0.3, extension_budget_s=0.3, min_samples=20, precision=0.01)


def _time(launch: Any, name: str, **kwargs: Any) -> Any:
    from pytest_gpuperf.bench import time_callable

    return time_callable(launch, name=name, cache="cold", policy=_policy(), **kwargs)


def copy_bandwidth() -> float:
    """The device's SM copy bandwidth, bytes read + written per second (the roofline's rate).

    An early version timed a cudaMemcpy captured in a graph here; graphs run it on the copy engines
    (2.76 TB/s on the H200 against 4.2 TB/s for an SM copy), which inflated every roofline
    fraction by half. The plugin's copy kernel is the one ceiling all families use.
    """
    from pytest_gpuperf.bench import copy_bandwidth as measured

    return measured(ordinal=0)


def check_variants(mk: Any, ref: ReferenceModel, k: np.ndarray, v: np.ndarray, out: dict[str, Any],
                   variants: tuple[str, ...] = VARIANTS) -> bool:
    """Each variant's logits and new KV rows vs the reference, from the same random KV prefill."""
    import cupy

    from pytest_gpuperf.numerics import assert_close, poison

    ok = True
    for position in CHECK_POSITIONS:
        kr, vr = k.copy(), v.copy()
        expected = ref.decode_step(TOKEN, position, kr, vr)
        for variant in variants:
            mk.set_kv_cache(k, v)
            poison(mk.logits)
            logits = cupy.asnumpy(mk.step(variant, TOKEN, position))
            record: dict[str, Any] = {"variant": variant, "position": position}
            try:
                record["rel_l2"] = assert_close(logits, expected, name="logits", **LOGIT_TOLERANCE[mk.config.name])
                for name, ref_cache in (("k_cache", kr), ("v_cache", vr)):
                    got = bf16_bits_to_float(cupy.asnumpy(mk.buffers[name][:, :, position]))
                    assert_close(got, bf16_bits_to_float(ref_cache[:, :, position]), name=name, **KV_TOLERANCE)
                record["pass"] = True
            except AssertionError as exc:
                record.update({"pass": False, "error": str(exc)})
            record["max_abs"] = float(np.max(np.abs(logits - expected)))
            ok &= record["pass"]
            out["checks"].append(record)
            print(f"{'PASS' if record['pass'] else 'FAIL'} {variant:18s} p={position:4d} logits max|d| "
                  f"{record['max_abs']:.2e} {record.get('error', '')}", flush=True)
    return ok


def time_grid_sync(grid_blocks: int, out: dict[str, Any]) -> None:
    from kernels.megakernel.launch import GRID_SYNC_MODES, GridSyncCost

    cost = GridSyncCost(grid_blocks)
    for mode in GRID_SYNC_MODES:
        empty = _time(cost.launcher(mode, 0), f"{mode}-0")
        full = _time(cost.launcher(mode, GRID_SYNC_ITERATIONS), f"{mode}-{GRID_SYNC_ITERATIONS}")
        per_sync = (full.median_s - empty.median_s) / GRID_SYNC_ITERATIONS
        out["grid_sync"][mode] = {"per_sync_s": per_sync, "empty_launch_s": empty.median_s}
        print(f"grid sync ({mode}, {grid_blocks} blocks x 512): {per_sync * 1e6:.2f} us per barrier", flush=True)


def time_variants(mk: Any, positions: tuple[int, ...], bandwidth: float, out: dict[str, Any],
                  variants: tuple[str, ...] = VARIANTS) -> None:
    config = mk.config
    for position in positions:
        base = None
        for variant in variants:
            nbytes = config.step_bytes(position)
            m = _time(mk.launcher(variant, TOKEN, position), f"{variant}@{position}", bytes=nbytes)
            base = base or m.median_s
            row = {"variant": variant, "position": position, "median_s": m.median_s, "ci_low_s": m.ci_low_s,
                   "ci_high_s": m.ci_high_s, "bytes": nbytes, "bandwidth": m.bandwidth,
                   "roofline_fraction": m.bandwidth / bandwidth, "speedup_vs_first": base / m.median_s,
                   "tokens_per_s": 1.0 / m.median_s, "method": m.method}
            out["timings"].append(row)
            print(f"{variant:18s} p={position:4d} {m.median_s * 1e3:7.3f} ms [{m.ci_low_s * 1e3:.3f}, "
                  f"{m.ci_high_s * 1e3:.3f}] {m.bandwidth / 1e9:7.0f} GB/s {row['roofline_fraction']:5.1%} "
                  f"x{row['speedup_vs_first']:.3f} vs {variants[0]} ({m.method})", flush=True)


def best_variant(out: dict[str, Any], position: int) -> str | None:
    """The fastest variant timed at ``position`` in this run among those that passed every check."""
    failed = {c["variant"] for c in out["checks"] if not c["pass"]}
    rows = [r for r in out["timings"] if r["position"] == position and r["variant"] not in failed]
    return min(rows, key=lambda r: r["median_s"])["variant"] if rows else None


def time_hf_peer(weights: dict[str, np.ndarray], k: np.ndarray, v: np.ndarray, mk: Any,
                 positions: tuple[int, ...], out: dict[str, Any]) -> None:
    """Build the transformers peer, check it computes our logits, then time it at each position."""
    from kernels.megakernel import hf_peer

    reason = hf_peer.unavailable_reason()
    if reason:
        out["hf_peer"] = {"skipped": reason}
        print(f"HF peer skipped: {reason}", flush=True)
        return
    import cupy
    import transformers

    record: dict[str, Any] = {"transformers": transformers.__version__, "timings": [], "checks": []}
    out["hf_peer"] = record
    peer = None
    try:
        peer = hf_peer.HFStaticCachePeer(mk.config, weights, MAX_SEQ)
        record["attn_implementation"] = peer.attn_implementation
        ours_variant = best_variant(out, positions[0]) or "fused"
        for token, position in HF_CHECK_STEPS:  # eager steps, then the graph at another position
            mk.set_kv_cache(k, v)
            ours = cupy.asnumpy(mk.step(ours_variant, token, position)).copy()
            record["checks"].append({"variant": ours_variant, "graph": False,
                                     **hf_peer.cross_check(peer, ours, k, v, token, position)})
        peer.set_step(*HF_CHECK_STEPS[0])
        try:
            peer.capture()
            record["graph"] = True
            token, position = HF_CHECK_STEPS[-1]
            mk.set_kv_cache(k, v)
            ours = cupy.asnumpy(mk.step(ours_variant, token, position)).copy()
            record["checks"].append({"variant": ours_variant, "graph": True,
                                     **hf_peer.cross_check(peer, ours, k, v, token, position)})
        except Exception as exc:  # keep going eagerly, and say why
            record["graph"] = False
            record["capture_error"] = f"{type(exc).__name__}: {exc}"
            print(f"HF peer: CUDA-graph capture failed, timing eager steps ({record['capture_error']})", flush=True)
        mk.set_kv_cache(k, v)
        for c in record["checks"]:
            print(f"HF peer check {'graph' if c['graph'] else 'eager'} p={c['position']}: "
                  f"{'ok' if c['ok'] else 'FAILED'} rel_l2 {c['rel_l2']:.4f} max|d| {c['max_abs']:.3f} "
                  f"argmax {c['argmax']}/{c['expected_argmax']} (gap {c['expected_gap']:.3f}) {c['why']}", flush=True)
        record["same_model"] = all(c["ok"] for c in record["checks"])
        if not record["same_model"]:
            print("HF peer is NOT our model: not timed", flush=True)
            return
        for position in positions:
            peer.prefill(k, v, position)
            peer.set_step(TOKEN, position)
            seconds = peer.time_step(iterations=30)
            counters = peer.write_positions()
            record["timings"].append({"position": position, "median_s": seconds,
                                      "write_counters_ok": not counters or set(counters) == {position + 1}})
            print(f"HF transformers {'graph' if record['graph'] else 'eager'} p={position:4d} {seconds * 1e3:7.3f} ms",
                  flush=True)
    except Exception as exc:
        record["error"] = f"{type(exc).__name__}: {exc}"
        record["traceback"] = traceback.format_exc()
        print(f"HF peer failed: {record['error']}", flush=True)
    finally:
        if peer is not None:
            peer.close()


def print_summary(out: dict[str, Any], positions: tuple[int, ...]) -> None:
    """About 25 lines: what the lead reads first."""
    by = {(r["variant"], r["position"]): r for r in out["timings"]}
    hf_record = out.get("hf_peer", {})
    hf = {r["position"]: r["median_s"] for r in hf_record.get("timings", [])}
    device = out["device"]
    print(f"\n==== megakernel sweep summary: {device['name']}, {device['grid_blocks']} blocks x 512 threads ====")
    failed = [c for c in out["checks"] if not c["pass"]]
    worst = max((c["max_abs"] for c in out["checks"]), default=float("nan"))
    print(f"correctness: {len(out['checks']) - len(failed)}/{len(out['checks'])} PASS (max |logit diff| {worst:.2e})"
          + "".join(f"\n  FAIL {c['variant']} p={c['position']}: {c.get('error', '')[:200]}" for c in failed))
    bw = out.get("copy_bandwidth", float("nan"))
    print(f"copy bandwidth (SM copy kernel) {bw / 1e12:.2f} TB/s; grid barrier "
          + ", ".join(f"{mode} {g['per_sync_s'] * 1e6:.2f} us" for mode, g in out["grid_sync"].items()))
    print("ms/token (roofline fraction)  " + "".join(f"{'p=' + str(p):>18s}" for p in positions))
    for variant in out.get("variants", VARIANTS):
        cells = [f"{by[variant, p]['median_s'] * 1e3:6.3f} ({by[variant, p]['roofline_fraction']:4.0%})"
                 if (variant, p) in by else "-" for p in positions]
        print(f"{variant:29s} " + "".join(f"{c:>18s}" for c in cells))
    if hf:
        print(f"{'hf static cache + graph':29s} " + "".join(f"{hf.get(p, float('nan')) * 1e3:18.3f}" for p in positions))
    best = {p: best_variant(out, p) for p in positions}
    print(f"{'fastest (passing checks)':29s} " + "".join(f"{(best[p] or '-'):>18s}" for p in positions))
    if hf:
        print(f"{'fastest speedup vs hf':29s} "
              + "".join(f"{hf.get(p, float('nan')) / by[best[p], p]['median_s']:18.2f}" if best[p] else f"{'-':>18s}"
                        for p in positions))
    elif hf_record:
        print(f"hf peer: {hf_record.get('skipped') or hf_record.get('error') or 'not timed (failed its check)'}")
    roof = [by[best[p], p]["roofline_fraction"] for p in positions if p in ROOFLINE_POSITIONS and best[p]]
    target = ISSUE_TARGETS["roofline_fraction"]
    if roof:
        print(f"target roofline >= {target:.0%} at p <= 200: {'PASS' if min(roof) >= target else 'FAIL'} "
              f"(worst {min(roof):.1%}, need <= {config_ms_at(out, target):.3f} ms at p=1)")
    if hf:
        ratios = [hf[p] / by[best[p], p]["median_s"] for p in positions if p in hf and best[p]]
        need = ISSUE_TARGETS["speedup_vs_hf"]
        print(f"target >= {need:g}x the hf peer: {'PASS' if ratios and min(ratios) >= need else 'FAIL'} "
              f"(worst {min(ratios):.2f}x)")
    checks = hf_record.get("checks", [])
    if checks:
        print("hf peer same model: " + ("yes" if hf_record.get("same_model") else "NO") + " ("
              + ", ".join(f"p={c['position']}{' graph' if c['graph'] else ''} rel_l2 {c['rel_l2']:.3f}" for c in checks)
              + f"; transformers {hf_record.get('transformers')}, {hf_record.get('attn_implementation')})")


def config_ms_at(out: dict[str, Any], fraction: float) -> float:
    """The ms/token at position 1 that reaches ``fraction`` of the roofline."""
    return QWEN3_0_6B.step_bytes(1) / (fraction * out.get("copy_bandwidth", float("nan"))) * 1e3


def main(argv: list[str] | None = None) -> int:
    parser = sweeps.parser("megakernel", __doc__.split("\n")[0])
    parser.add_argument("--positions", type=int, nargs="+", default=list(PERF_POSITIONS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-hf", action="store_true", help="do not build the transformers peer")
    parser.add_argument("--define", action="append", default=[], metavar="NAME=VALUE",
                        help="override a tuning macro of megakernel.cu or its headers (repeatable)")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS),
                        help="variants to check and time (default: all; speedups are against the first)")
    args = parser.parse_args(argv)
    positions = tuple(args.positions)
    variants = tuple(args.variants)

    import cupy

    from kernels.megakernel.launch import Megakernel

    run = sweeps.start("megakernel")
    config = QWEN3_0_6B
    out: dict[str, Any] = {"config": config.__dict__, "checks": [],
                           "grid_sync": {}, "timings": [], "positions": list(positions), "variants": list(variants)}
    t0 = time.time()
    weights = make_weights(config, args.seed)
    k, v = random_kv_cache(config, MAX_SEQ, args.seed + 1)
    mk = Megakernel(config, weights, max_seq=MAX_SEQ, defines=tuple(args.define))
    out["defines"] = list(args.define)
    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    out["device"] = {"name": props["name"].decode(), "sm_count": props["multiProcessorCount"],
                     "grid_blocks": mk.grid_blocks, "max_grid_blocks": mk.max_grid_blocks,
                     "shared_bytes": mk.shared_bytes}
    try:
        out["device"]["shared_bytes_in_module"] = mk.shared_bytes_in_module()
    except Exception as exc:  # a figure for the report, not a reason to stop
        out["device"]["shared_bytes_in_module"] = f"{type(exc).__name__}: {exc}"
    print(f"{out['device']}  (set-up {time.time() - t0:.0f} s)", flush=True)

    ok = check_variants(mk, ReferenceModel(config, weights, MAX_SEQ), k, v, out, variants)
    bandwidth = copy_bandwidth()
    out["copy_bandwidth"] = bandwidth
    print(f"copy bandwidth {bandwidth / 1e12:.2f} TB/s; weights {config.weight_bytes() / 1e9:.3f} GB per token", flush=True)
    time_grid_sync(mk.grid_blocks, out)
    mk.set_kv_cache(k, v)
    time_variants(mk, positions, bandwidth, out, variants)
    if not args.skip_hf:
        time_hf_peer(weights, k, v, mk, positions, out)
    print_summary(out, positions)
    run.write(args.out, out)
    print(f"all checks {'passed' if ok else 'FAILED'}; {time.time() - t0:.0f} s", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
