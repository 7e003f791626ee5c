"""The note's hw01 table for the qkv kernels, from Nsight Compute counters, beside the note's rows.

    python -m kernels.qkv.hw01_table --out hw01_qkv.json

Profiles every variant on both layers at its best launch (family.BEST_CONFIGS for this GPU's
architecture) and at the default launch (8 warps, one block per SM, 8 words per thread; the
note's launches are one block per SM too), one launch each, all in one ncu run (a few tens
of seconds of GPU time on an H200). Prints the columns /itr % SW BXW N-Rd N-Wr GB/s t/us
(``CounterResult.derived`` computes them) plus SW/128B, SBXW and DRAM GB/s, and under each
profiled kernel the note's fastest row for it. Writes every metric, the derived columns and
the note's rows to --out. Exit status 2 when counters cannot be read here (the reason is
printed), 1 when the profile fails.

Differences to keep in mind when reading the two side by side: the note's figures are from
an RTX 4090 (problem 1) and an unstated GPU (problem 2), with warps per block swept and one
block per SM; its kernels are instantiated per d_model and use scalar loads, the strip
kernels here use float4 loads (their SW counts 16 for a fully used request: compare
SW/128B); under ncu every launch starts with flushed caches (t/us is one cold launch).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from kernels.qkv.counters import KERNEL_REGEX, TARGET, case, check_order, ideal
from kernels.qkv.family import LAYERS, VARIANTS, best_config
from kernels.qkv.launch import LaunchConfig
from pytest_gpuperf.bench import CounterError, CountersUnavailable, profile_launches

# The note's hw01 columns in its order (CounterResult.derived names them so), then three more.
HW01_COLUMNS = ("/itr", "%", "SW", "BXW", "N-Rd", "N-Wr", "GB/s", "t/us")
EXTRA_COLUMNS = ("SW/128B", "SBXW", "DRAM GB/s")


def _fmt(value: float | None, column: str) -> str:
    if value is None:
        return "-"
    if column in ("%", "GB/s", "DRAM GB/s", "t/us") or abs(value) >= 100:
        return f"{value:.0f}" if abs(value) >= 10 else f"{value:.1f}"
    return f"{value:.2f}" if abs(value) < 10 else f"{value:.1f}"


def format_table(
    rows: Sequence[tuple[str, Mapping[str, float | None]]], columns: Sequence[str] = HW01_COLUMNS + EXTRA_COLUMNS
) -> str:
    """A plain-text table: one row per ``(label, derived columns)``."""
    table = [["", *columns]] + [[label, *(_fmt(values.get(c), c) for c in columns)] for label, values in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    return "\n".join(
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(r, widths, strict=False))
        ).rstrip()
        for r in table
    )


# The note's fastest row per kernel and layer: "wp" warps per block, one block per SM.
# Problem 1 (qkv_base, qkv_base_w2): RTX 4090; problem 2 (strip kernels, layer1 only): GPU
# not stated. The note has no strip rows for layer0.
NOTE_ROWS: dict[tuple[str, str], dict[str, float]] = {
    ("qkv_base", "layer0"): {"wp": 8, "/itr": 3.5, "%": 4, "SW": 16, "BXW": 15.3, "N-Rd": 2, "N-Wr": 1.0, "GB/s": 75, "t/us": 236},
    ("qkv_base_w2", "layer0"): {"wp": 16, "/itr": 3.5, "%": 31, "SW": 3, "BXW": 0.0, "N-Rd": 2, "N-Wr": 1.0, "GB/s": 558, "t/us": 31},
    ("qkv_base", "layer1"): {"wp": 4, "/itr": 3.7, "%": 4, "SW": 16, "BXW": 13.3, "N-Rd": 1020, "N-Wr": 1.0, "GB/s": 1564, "t/us": 6032},
    ("qkv_base_w2", "layer1"): {"wp": 32, "/itr": 4.6, "%": 15, "SW": 3, "BXW": 0.0, "N-Rd": 1014, "N-Wr": 1.0, "GB/s": 6016, "t/us": 1558},
    ("qkv_strip", "layer1"): {"wp": 16, "/itr": 3.5, "%": 11, "SW": 6, "BXW": 4.9, "N-Rd": 260, "N-Wr": 1.0, "GB/s": 1084, "t/us": 2228},
    ("qkv_strip_w2", "layer1"): {"wp": 32, "/itr": 3.5, "%": 24, "SW": 3, "BXW": 1.5, "N-Rd": 257, "N-Wr": 1.0, "GB/s": 2415, "t/us": 991},
}
NOTE_GPU = {"qkv_base": "RTX 4090", "qkv_base_w2": "RTX 4090", "qkv_strip": "GPU not stated", "qkv_strip_w2": "GPU not stated"}


def plan(arch: str, configs: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
    """``(which launch, case)`` for every variant and layer; the default launch is skipped where it is the best one."""
    out: list[tuple[str, dict[str, Any]]] = []
    for layer in sorted(LAYERS):
        for variant in VARIANTS:
            seen: set[LaunchConfig] = set()
            for which in configs:
                config = best_config(arch, variant, layer) if which == "best" else LaunchConfig()
                if config in seen:
                    continue
                seen.add(config)
                out.append((which, case(variant, layer, config)))
    return out


def _arch() -> str:
    from pytest_gpuperf import GpuPerfError
    from pytest_gpuperf.bench import device

    try:
        return device(0).arch
    except GpuPerfError as exc:
        raise CountersUnavailable(str(exc)) from None


def _arch_key(text: str) -> str:
    """nvcc's spelling, the one BEST_CONFIGS is keyed by: ``sm_90`` for ``sm_90`` or ``sm90``."""
    text = text.strip().lower()
    return "sm_" + text[2:] if text.startswith("sm") and text[2:3].isdigit() else text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="hw01 counter table for the qkv kernels (needs ncu and a GPU)")
    parser.add_argument("--out", type=Path, help="write all metrics and derived columns as JSON here")
    parser.add_argument("--configs", default="best,default", help="comma-separated: best, default (default: both)")
    parser.add_argument("--arch", help="architecture key for BEST_CONFIGS (default: GPU 0's, e.g. sm_90; sm90 is read as sm_90)")
    ns = parser.parse_args(argv)
    configs = [c.strip() for c in ns.configs.split(",") if c.strip()]
    if not configs or any(c not in ("best", "default") for c in configs):
        parser.error("--configs: expected a comma-separated list of best, default")
    started = time.monotonic()
    try:
        arch = _arch_key(ns.arch) if ns.arch else _arch()
        planned = plan(arch, configs)
        cases = [c for _, c in planned]
        results = profile_launches(TARGET, {"cases": cases}, kernel_regex=KERNEL_REGEX, launch_count=len(cases))
        check_order(cases, [r.kernel for r in results])
    except CountersUnavailable as exc:
        print(f"hw01_table: counters unavailable: {exc.reason}", file=sys.stderr)
        return 2
    except (CounterError, AssertionError) as exc:
        print(f"hw01_table: profile failed: {exc}", file=sys.stderr)
        return 1
    elapsed = time.monotonic() - started

    rows: list[tuple[str, dict[str, Any]]] = []
    records = []
    for (which, c), raw in zip(planned, results):
        r = raw.with_ideal(**ideal(c["layer"]))
        config = LaunchConfig(**c["config"])
        derived = r.derived()
        rows.append((f"{c['layer']} {c['variant']} {which}: {config.label(c['variant'])}", derived))
        note = NOTE_ROWS.get((c["variant"], c["layer"]))
        if note and which == configs[0]:
            rows.append((f"  note ({NOTE_GPU[c['variant']]}, {note['wp']:g} warps x 1 block/SM)", {k: note.get(k) for k in HW01_COLUMNS}))
        records.append({"which": which, **c, "label": config.label(c["variant"]), "note": note, **r.to_json()})
    print(f"hw01 columns on {arch} ({len(results)} launches profiled in {elapsed:.0f} s; ncu replays each launch, caches flushed)")
    print(format_table(rows, HW01_COLUMNS + EXTRA_COLUMNS))
    missing = sorted({m for r in results for m in r.missing})
    if missing:
        print(f"metrics this ncu/GPU could not collect (their columns show '-'): {', '.join(missing)}")
    if ns.out:
        ns.out.parent.mkdir(parents=True, exist_ok=True)
        ns.out.write_text(json.dumps({"arch": arch, "elapsed_s": elapsed, "rows": records}, indent=2) + "\n")
        print(f"written: {ns.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
