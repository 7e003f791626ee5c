"""Where a decode step's time goes: phase timings of the stream/ring variants from the kernel itself.

    python -m kernels.megakernel.trace --variants fused_ring --positions 1 200

Builds the kernel with -DMK_TRACE: thread 0 of every block stores clock64() at the phase
boundaries of decode_step_stream (mk_device.cuh MK_MARK) and, in the ring variant, the cycles it
spent waiting for weight pages. Per phase this prints the median and the maximum over blocks,
averaged over layers 1..27 (layer 0 warms the ring up; the gate/up sub-phases are the ring
variants' first gate/up page group), in microseconds at the SM clock the step
ran at (cycles of the whole step over its event-timed duration). A diagnostic, not a gate: the
stores themselves cost a little.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np

from kernels.megakernel.config import QWEN3_0_6B
from kernels.megakernel.family import MAX_SEQ
from kernels.megakernel.layout import TRACE_EVENTS_PER_LAYER
from kernels.megakernel.reference import make_weights, random_kv_cache

TOKEN = 1234
# (name, from event, to event) per layer; events as numbered in decode_step_stream.
PHASES = (
    ("rmsnorm (input)", 0, 1), ("qkv gemv", 1, 2), ("barrier 1", 2, 3), ("attention", 3, 4), ("barrier 2", 4, 5),
    ("load attn_out", 5, 6), ("o gemv", 6, 7), ("barrier 3", 7, 8), ("rmsnorm (post)", 8, 9),
    ("gate/up gemv", 9, 10), ("barrier 4", 10, 11), ("load act", 11, 12), ("down gemv", 12, 13),
    ("barrier 5", 13, 14),
)
# The GEMV whose first page group the sub-phase events (19-22) time (MK_TRACE_SUBPHASE_SEGMENT),
# and the event at which that GEMV starts.
SUBPHASE_SEGMENTS = {"qkv": (0, 1), "o": (1, 6), "gate_up": (2, 9)}


def subphases(segment: str) -> tuple[tuple[str, int, int], ...]:
    """The sub-phase rows of ``segment``'s first page group: page waits, dot products, barrier, epilogue."""
    start = SUBPHASE_SEGMENTS[segment][1]
    return ((f"  {segment} group 1: page waits", start, 19), (f"  {segment} group 1: dot products", 19, 20),
            (f"  {segment} group 1: block barrier", 20, 21), (f"  {segment} group 1: epilogue", 21, 22))
# dataflow_splitk_o: inside the attention units (events 23-26, 28, 29, each unit block's last unit of the
# layer) and the records' wait (event 27: the probe warp saw every unit's record), over the blocks
# whose events fall inside the layer's attention (3-4) or records (5-6) phase.
UNIT_PHASES = (("  unit: from its QKV to its start", 3, 23, (3, 4)), ("  unit: q/k/v in, QK-norm, RoPE", 23, 24, (3, 4)),
               ("  unit: scores", 24, 28, (3, 4)), ("  unit: softmax", 28, 29, (3, 4)), ("  unit: P.V", 29, 25, (3, 4)),
               ("  unit: record out", 25, 26, (3, 4)),
               ("  records: probes seen", 5, 27, (5, 6)), ("  records: merge", 27, 6, (5, 6)))
# Stragglers of the accumulator exchanges (dataflow_splitk_o). clock64() is per SM, so blocks' stamps
# cannot be compared; but every block leaves the post-attention (events 8-9) or the next input (0-1)
# RMSNorm about when the last partial sums land, so the block that waits least there is the one that
# published last, and the others' waits exceed its own by how much later it published.
PUBLISHES = (("  O sums: last publisher's lag", 8, 9), ("  down sums: last publisher's lag", 0, 1))
WAITS = (("  ring wait qkv", 15), ("  ring wait o", 16), ("  ring wait gate/up", 17), ("  ring wait down", 18))


def phase_table(cycles: np.ndarray, layers: int, mhz: float, segment: str = "gate_up") -> list[dict[str, Any]]:
    """Per phase: median and max over blocks of its cycles, averaged over layers 1.., in us."""
    rows = []
    per_layer = TRACE_EVENTS_PER_LAYER
    for name, a, b in PHASES + subphases(segment):
        d = np.stack([cycles[:, layer * per_layer + b] - cycles[:, layer * per_layer + a] for layer in range(1, layers)])
        slowest = np.bincount(d.argmax(axis=1))  # which block is slowest, counted over layers
        rows.append({"phase": name, "median_us": float(np.median(d, axis=1).mean() / mhz),
                     "max_us": float(d.max(axis=1).mean() / mhz), "min_us": float(d.min(axis=1).mean() / mhz),
                     "slowest_block": int(slowest.argmax()), "slowest_share": float(slowest.max() / len(d))})
    for name, a, b, (lo, hi) in UNIT_PHASES:
        medians, maxima, minima = [], [], []
        for layer in range(1, layers):
            c = cycles[:, layer * per_layer:(layer + 1) * per_layer]
            inside = (c[:, a] >= c[:, lo]) & (c[:, b] <= c[:, hi]) & (c[:, b] >= c[:, a]) & (c[:, a] > 0)
            if inside.any():
                d = (c[inside, b] - c[inside, a]).astype(np.float64)
                medians.append(np.median(d)), maxima.append(d.max()), minima.append(d.min())
        if medians:
            rows.append({"phase": name, "median_us": float(np.mean(medians) / mhz),
                         "max_us": float(np.mean(maxima) / mhz), "min_us": float(np.mean(minima) / mhz)})
    for name, a, b in PUBLISHES:  # median_us: the median block's wait beyond the last publisher's; max_us: the longest's
        w = np.stack([cycles[:, layer * per_layer + b] - cycles[:, layer * per_layer + a]
                      for layer in range(1, layers)]).astype(np.float64)
        last = np.bincount(w.argmin(axis=1))
        rows.append({"phase": name, "median_us": float((np.median(w, axis=1) - w.min(axis=1)).mean() / mhz),
                     "max_us": float((w.max(axis=1) - w.min(axis=1)).mean() / mhz), "min_us": 0.0,
                     "slowest_block": int(last.argmax()), "slowest_share": float(last.max() / len(w))})
    for name, e in WAITS:
        d = np.stack([cycles[:, layer * per_layer + e] for layer in range(1, layers)])
        rows.append({"phase": name, "median_us": float(np.median(d, axis=1).mean() / mhz),
                     "max_us": float(d.max(axis=1).mean() / mhz), "min_us": float(d.min(axis=1).mean() / mhz)})
    layer_total = np.stack([cycles[:, (layer + 1) * per_layer] - cycles[:, layer * per_layer]
                            for layer in range(1, layers - 1)])
    rows.append({"phase": "layer (start to next start)", "median_us": float(np.median(layer_total, axis=1).mean() / mhz),
                 "max_us": float(layer_total.max(axis=1).mean() / mhz), "min_us": float(layer_total.min(axis=1).mean() / mhz)})
    head = layers * per_layer
    for name, a, b in (("final rmsnorm", head, head + 1), ("lm head", head + 1, head + 2)):
        d = cycles[:, b] - cycles[:, a]
        rows.append({"phase": name, "median_us": float(np.median(d) / mhz), "max_us": float(d.max() / mhz),
                     "min_us": float(d.min() / mhz)})
    d = cycles[:, head + 3]
    rows.append({"phase": "  ring wait lm head", "median_us": float(np.median(d) / mhz), "max_us": float(d.max() / mhz),
                 "min_us": float(d.min() / mhz)})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variants", nargs="+", default=["fused_ring"])
    parser.add_argument("--positions", type=int, nargs="+", default=[1, 200])
    parser.add_argument("--out", default=None, help="JSON file for the tables")
    parser.add_argument("--define", action="append", default=[], metavar="NAME=VALUE",
                        help="override a tuning macro of megakernel.cu or its headers (repeatable)")
    parser.add_argument("--grid-blocks", type=int, default=None, help="blocks to launch (default: one per SM)")
    parser.add_argument("--raw", default=None, help="npz file for the raw cycles (blocks x events) of each table")
    parser.add_argument("--subphases", choices=sorted(SUBPHASE_SEGMENTS), default="gate_up",
                        help="the GEMV whose first page group is timed in sub-phases")
    args = parser.parse_args(argv)
    if args.subphases == "o" and "dataflow_splitk_o" in args.variants:
        parser.error("dataflow_splitk_o projects O through ring_splitk, which records no sub-phases: "
                     "use --subphases qkv or gate_up for it")

    import cupy

    from kernels.megakernel.launch import Megakernel

    config = QWEN3_0_6B
    defines = (*args.define, f"MK_TRACE_SUBPHASE_SEGMENT={SUBPHASE_SEGMENTS[args.subphases][0]}")
    mk = Megakernel(config, make_weights(config, 0), max_seq=MAX_SEQ, trace=True, defines=defines,
                    grid_blocks=args.grid_blocks)
    mk.set_kv_cache(*random_kv_cache(config, MAX_SEQ, 1))
    out: dict[str, Any] = {"tables": []}
    raw: dict[str, np.ndarray] = {}
    for variant in args.variants:
        for position in args.positions:
            launch = mk.launcher(variant, TOKEN, position)
            for _ in range(5):
                launch()
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            launch()
            end.record()
            end.synchronize()
            elapsed_us = cupy.cuda.get_elapsed_time(start, end) * 1e3
            cycles = mk.trace_cycles()
            span = float(np.median(cycles[:, config.layers * TRACE_EVENTS_PER_LAYER + 2] - cycles[:, 0]))
            mhz = span / elapsed_us  # cycles per us over the step (a slight underestimate: launch overhead)
            raw[f"{variant}_p{position}"] = cycles
            raw[f"{variant}_p{position}_mhz"] = np.float64(mhz)
            rows = phase_table(cycles, config.layers, mhz, args.subphases)
            out["tables"].append({"variant": variant, "position": position, "elapsed_us": elapsed_us, "mhz": mhz,
                                  "rows": rows})
            print(f"\n{variant} p={position}: {elapsed_us:.1f} us per step (traced build), {mhz:.0f} cycles/us; "
                  "per phase over blocks, layers 1-27 averaged:")
            print(f"{'phase':30s} {'median us':>10s} {'max us':>8s} {'min us':>8s}  slowest block (share of layers)")
            for r in rows:
                slowest = f"  {r['slowest_block']:4d} ({r['slowest_share']:.0%})" if "slowest_block" in r else ""
                print(f"{r['phase']:30s} {r['median_us']:10.2f} {r['max_us']:8.2f} {r['min_us']:8.2f}{slowest}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)
    if args.raw:
        np.savez_compressed(args.raw, **raw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
