"""The cluster_reduce family: variants, the perf grid, speedup margins and sources."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

SOURCE = Path(__file__).with_name("cluster_reduce.cu")
SOURCES = (SOURCE,)

CLUSTER_SIZE = 2  # compiled into the kernel with __cluster_dims__(2, 1, 1)
STAGES = ("linear", "ffn")  # LINEAR: a + b; FFN: relu(a + b)
STAGE_IDS = {"linear": 0, "ffn": 1}  # kLinear / kFfn in the .cu

ELEMENTS_PER_BLOCK = 16384  # the note's shape: 16384 fp16 = 32 KB of shared memory per block
DEFAULT_THREADS = 512
THREAD_SWEEP = (128, 256, 512, 1024)


@dataclass(frozen=True)
class VariantSpec:
    """One instantiation family of the `cluster_reduce` template."""

    name: str
    algo: int  # kGlobal=0, kDsmemNote=1, kDsmem=2, kDsmemSplit=3 in the .cu
    vec: int  # fp16 elements per access: 1 (2 bytes) or 8 (16 bytes)
    batch: int  # loads in flight per thread before the first use
    smem_buffers: int  # shared memory = smem_buffers * size * 2 bytes
    race_free: bool
    summary: str


VARIANTS: dict[str, VariantSpec] = {
    v.name: v
    for v in (
        VariantSpec(
            "baseline", algo=0, vec=1, batch=1, smem_buffers=1, race_free=True,
            summary="the note's baseline: the neighbour's slice is re-read from global memory",
        ),
        VariantSpec(
            "dsmem_note", algo=1, vec=1, batch=1, smem_buffers=1, race_free=False,
            summary="the note's DSMEM kernel: sums written in place, racing with the neighbour's reads",
        ),
        VariantSpec(
            "dsmem", algo=2, vec=1, batch=1, smem_buffers=2, race_free=True,
            summary="the neighbour's slice read through DSMEM, sums written to a second buffer",
        ),
        VariantSpec(
            "baseline_v8", algo=0, vec=8, batch=4, smem_buffers=1, race_free=True,
            summary="baseline with 16-byte accesses and 4 loads in flight per thread",
        ),
        VariantSpec(
            "dsmem_v8", algo=2, vec=8, batch=4, smem_buffers=2, race_free=True,
            summary="dsmem with 16-byte accesses and 4 loads in flight per thread",
        ),
        VariantSpec(
            "dsmem_split_v8", algo=3, vec=8, batch=4, smem_buffers=1, race_free=True,
            summary="each block sums half the slots and stores them to both blocks (reduce-scatter + all-gather)",
        ),
    )
}
RACE_FREE_VARIANTS = tuple(name for name, spec in VARIANTS.items() if spec.race_free)

# Block size each variant is timed with in the perf tests (set from the sweep's best).
PERF_THREADS: dict[str, int] = {name: DEFAULT_THREADS for name in VARIANTS}

# Perf grid: clusters as a function of the multiprocessor count.
PERF_GRIDS: dict[str, Callable[[int], int]] = {
    "one_cluster": lambda sm_count: 1,  # two blocks: the note's measurement, launch-latency sized
    "fill": lambda sm_count: max(1, sm_count // 2),  # one block per SM
    "waves": lambda sm_count: 8 * sm_count,  # 16 blocks per SM, several waves: bandwidth-bound
}

# fast variant, reference variant
COMPARISONS: dict[str, tuple[str, str]] = {
    "dsmem_vs_baseline": ("dsmem", "baseline"),
    "dsmem_v8_vs_baseline_v8": ("dsmem_v8", "baseline_v8"),
    "dsmem_split_v8_vs_dsmem_v8": ("dsmem_split_v8", "dsmem_v8"),
}


def margin_key(comparison: str, stage: str, grid: str) -> str:
    """Key of SPEEDUP_MARGINS for one perf test."""
    return f"{comparison}/{stage}/{grid}"


# None = not yet measured: the perf test measures and records the ratio without gating.
SPEEDUP_MARGINS: dict[str, dict[str, float | None]] = {
    "sm90": {
        "dsmem_vs_baseline/linear/one_cluster": None,
        "dsmem_vs_baseline/linear/fill": None,
        "dsmem_vs_baseline/linear/waves": None,
        "dsmem_vs_baseline/ffn/one_cluster": None,
        "dsmem_vs_baseline/ffn/fill": None,
        "dsmem_vs_baseline/ffn/waves": None,
        "dsmem_v8_vs_baseline_v8/linear/one_cluster": None,
        "dsmem_v8_vs_baseline_v8/linear/fill": None,
        "dsmem_v8_vs_baseline_v8/linear/waves": None,
        "dsmem_v8_vs_baseline_v8/ffn/one_cluster": None,
        "dsmem_v8_vs_baseline_v8/ffn/fill": None,
        "dsmem_v8_vs_baseline_v8/ffn/waves": None,
        "dsmem_split_v8_vs_dsmem_v8/linear/one_cluster": None,
        "dsmem_split_v8_vs_dsmem_v8/linear/fill": None,
        "dsmem_split_v8_vs_dsmem_v8/linear/waves": None,
        "dsmem_split_v8_vs_dsmem_v8/ffn/one_cluster": None,
        "dsmem_split_v8_vs_dsmem_v8/ffn/fill": None,
        "dsmem_split_v8_vs_dsmem_v8/ffn/waves": None,
    },
}


def speedup_margin(arch: str, key: str) -> float | None:
    """The gated margin for `key` on `arch`, or None where none was measured."""
    return SPEEDUP_MARGINS.get(arch, {}).get(key)


def call_bytes(n_elements: int) -> int:
    """Fewest bytes one call must move: read every fp16 input once, write every output once."""
    return 2 * n_elements * 2


def call_flops(n_elements: int) -> int:
    """One fp16 add per output element (the ReLU compare is not counted)."""
    return n_elements
