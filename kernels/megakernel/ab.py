"""A/B of megakernel builds (tuning macros) in one process, timed interleaved on one GPU.

    python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 200 1000 \\
        --set base= --set copies1=MK_ACC_COPIES=1 --set pace2=MK_SPLITK_PACED_IN_FLIGHT=2 --out ab.json

Each ``--set NAME=DEFINES`` (comma-separated ``MACRO=VALUE``, empty for the source's defaults; the
pseudo-define ``grid_blocks=N`` launches that build on N blocks instead of one per SM) is compiled
in parallel worker processes first (CuPy's kernel cache keeps the results), then built as its own
``Megakernel`` on the same weights. Every build is checked against the float32 reference before it
is timed (except a ``--probe``: a build made to time one change whose values are
known to be wrong, e.g. half the accumulator adders; it is checked, reported as a probe and timed
whatever its check says). Timing goes round-robin over the builds, ``--rounds`` times per
position, so drift of the machine (clocks, temperature) falls on every build alike: pool
machines differ by up to 2.5% for the same code, which is why builds are only compared within a
run. Prints, per position, each build's median of round medians and its ratio to the first build
(min and max over rounds).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import sys
import time
from typing import Any

import numpy as np

from kernels.megakernel.config import QWEN3_0_6B
from kernels.megakernel.family import MAX_SEQ, VARIANTS
from kernels.megakernel.reference import ReferenceModel, make_weights, random_kv_cache
from kernels.megakernel.sweep import TOKEN, _time, check_variants


def parse_set(text: str) -> tuple[str, tuple[str, ...]]:
    """``NAME=A=1,B=2`` -> ("NAME", ("A=1", "B=2")); ``NAME=`` -> ("NAME", ())."""
    name, sep, defines = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"--set wants NAME=DEFINES (DEFINES may be empty), got {text!r}")
    parsed = tuple(d for d in defines.split(",") if d)
    for d in parsed:
        if "=" not in d:
            raise argparse.ArgumentTypeError(f"--set {name}: {d!r} is not MACRO=VALUE")
    try:
        split_grid(parsed)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"--set {name}: {error}") from None
    return name, parsed


GRID_BLOCKS = "grid_blocks="


def split_grid(defines: tuple[str, ...]) -> tuple[tuple[str, ...], int | None]:
    """The compile defines, and the grid size named by a ``grid_blocks=N`` entry (None: one block per SM).
    ValueError for more than one entry or a size that is not an integer."""
    grids = [d for d in defines if d.startswith(GRID_BLOCKS)]
    if len(grids) > 1:
        raise ValueError(f"one grid_blocks per set, got {grids}")
    try:
        grid = int(grids[0][len(GRID_BLOCKS):]) if grids else None
    except ValueError:
        raise ValueError(f"grid_blocks wants an integer, got {grids[0]!r}") from None
    return tuple(d for d in defines if not d.startswith(GRID_BLOCKS)), grid


def _compile(defines: tuple[str, ...]) -> float:
    from kernels.megakernel.launch import decode_module

    t0 = time.time()
    decode_module(QWEN3_0_6B, defines=defines).get_function("megakernel_decode<0>")
    return time.time() - t0


def prebuild(sets: list[tuple[str, tuple[str, ...]]]) -> None:
    """Compile every set in worker processes (spawned: CUDA does not survive fork)."""
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=min(len(sets), 8), mp_context=context) as pool:
        for (name, _), seconds in zip(sets, pool.map(_compile, [split_grid(d)[0] for _, d in sets])):
            print(f"built {name} in {seconds:.0f} s", flush=True)


def summarize(rows: list[dict[str, Any]], names: list[str], positions: tuple[int, ...]) -> list[dict[str, Any]]:
    """Per position and build: median of the round medians, and the ratio first / build per round."""
    summary = []
    for position in positions:
        by_name = {n: [r["median_s"] for r in rows if r["position"] == position and r["set"] == n] for n in names}
        first = np.array(by_name[names[0]])
        for n in names:
            times = np.array(by_name[n])
            ratios = first / times  # > 1: faster than the first build
            summary.append({"position": position, "set": n, "median_s": float(np.median(times)),
                            "speedup_vs_first": float(np.median(ratios)), "speedup_min": float(ratios.min()),
                            "speedup_max": float(ratios.max())})
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="JSON file for every figure")
    parser.add_argument("--variant", choices=VARIANTS, default="dataflow_splitk_o")
    parser.add_argument("--positions", type=int, nargs="+", default=[1, 200, 1000])
    parser.add_argument("--set", dest="sets", action="append", type=parse_set, required=True,
                        metavar="NAME=DEFINES", help="a build to compare (repeatable; the first is the reference)")
    parser.add_argument("--probe", action="append", default=[], metavar="NAME",
                        help="a --set timed even where its check fails (a timing probe with known-wrong values)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    names = [n for n, _ in args.sets]
    if len(set(names)) != len(names):
        parser.error(f"--set names must differ, got {names}")
    unknown = sorted(set(args.probe) - set(names))
    if unknown or names[0] in args.probe:
        parser.error(f"--probe wants the names of --sets other than the first (the reference), got {args.probe}")
    positions = tuple(args.positions)

    t0 = time.time()
    prebuild(args.sets)
    import cupy  # after the workers: this process's CUDA context is not inherited

    from kernels.megakernel.launch import Megakernel

    config = QWEN3_0_6B
    weights = make_weights(config, args.seed)
    k, v = random_kv_cache(config, MAX_SEQ, args.seed + 1)
    reference = ReferenceModel(config, weights, MAX_SEQ)
    out: dict[str, Any] = {"variant": args.variant, "positions": list(positions), "rounds": args.rounds,
                           "sets": {n: list(d) for n, d in args.sets}, "checks": [], "timings": [],
                           "device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()}
    builds = {}
    ok = True
    for name, defines in args.sets:
        t1 = time.time()
        compile_defines, grid_blocks = split_grid(defines)
        mk = Megakernel(config, weights, max_seq=MAX_SEQ, defines=compile_defines, grid_blocks=grid_blocks)
        print(f"{name}: loaded in {time.time() - t1:.0f} s", flush=True)
        checks: dict[str, Any] = {"checks": []}
        passed = check_variants(mk, reference, k, v, checks, (args.variant,))
        out["checks"] += [{"set": name, "probe": name in args.probe, **c} for c in checks["checks"]]
        if name in args.probe:  # timed whatever its values: it only answers what a change would cost
            print(f"{name}: a probe, its check {'passed' if passed else 'failed'} (values not trusted); timed",
                  flush=True)
            passed = True
        else:
            ok &= passed
            print(f"{name}: {'checked' if passed else 'FAILED its check, not timed'}", flush=True)
        if passed:  # never time a wrong build, unless it is a declared probe
            mk.set_kv_cache(k, v)
            builds[name] = mk
    timed = [n for n in names if n in builds]
    for round_ in range(args.rounds):
        for position in positions:
            for name in timed:
                m = _time(builds[name].launcher(args.variant, TOKEN, position), f"{name}@{position}")
                out["timings"].append({"set": name, "position": position, "round": round_, "median_s": m.median_s,
                                       "ci_low_s": m.ci_low_s, "ci_high_s": m.ci_high_s})
    if timed:
        out["summary"] = summarize(out["timings"], timed, positions)
        print(f"{args.variant} on {out['device']}, {args.rounds} interleaved rounds; speedup = {timed[0]} / set"
              + (f"; probes (values wrong): {', '.join(args.probe)}" if args.probe else ""))
        for row in out["summary"]:
            print(f"p={row['position']:4d} {row['set']:>12s} {row['median_s'] * 1e3:7.3f} ms  "
                  f"x{row['speedup_vs_first']:.4f} [{row['speedup_min']:.4f}, {row['speedup_max']:.4f}]", flush=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    verdict = "all checks passed" if ok else "SOME CHECKS FAILED"
    print(f"wrote {args.out}; {verdict}{' (probes not counted)' if args.probe else ''}; {time.time() - t0:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
