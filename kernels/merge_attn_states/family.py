"""merge_attn_states: variants, the perf shape grid, the gates' margins, the sources."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

SOURCES = (Path(__file__).with_name("merge_attn_states.cu"),)

VARIANTS = ("baseline", "reordered", "vectorized")
DTYPES = ("fp16", "bf16")
HEAD_SIZES = (64, 128, 256)
ELEMENT_BYTES = 2  # fp16 and bf16


def bytes_moved(num_tokens: int, num_heads: int, head_size: int, output_lse: bool) -> int:
    """The fewest bytes a call moves: read prefix and suffix, write output (16-bit values), read
    two float32 LSEs per (token, head) and write a third when ``output_lse``."""
    rows = num_tokens * num_heads
    return 3 * rows * head_size * ELEMENT_BYTES + (3 if output_lse else 2) * rows * 4


@dataclass(frozen=True)
class PerfCase:
    """One fixed perf shape. ``cache`` is the timing mode: "hot" re-reads buffers left in L2,
    "cold" flushes L2 before each launch."""

    size: str
    num_tokens: int
    num_heads: int
    head_size: int
    dtype: str
    output_lse: bool
    cache: Literal["cold", "hot"]

    @property
    def id(self) -> str:
        return f"{self.size}-{self.dtype}-d{self.head_size}" + ("" if self.output_lse else "-nolse")

    @property
    def bytes(self) -> int:
        return bytes_moved(self.num_tokens, self.num_heads, self.head_size, self.output_lse)


# (tokens, heads, cache mode). tiny: 16 x 32 x 128 moves 0.4 MB, launch-bound. l2: 512 x 32 x 128
# moves 12.8 MB, timed hot so it is served from L2 (50 MB on H100, 60 MB on H200). dram: 8192 x 32
# moves 104 MB (head size 64) to 406 MB (256), far over L2, timed cold.
SIZES: dict[str, tuple[int, int, Literal["cold", "hot"]]] = {
    "tiny": (16, 32, "hot"),
    "l2": (512, 32, "hot"),
    "dram": (8192, 32, "cold"),
}


def _case(size: str, dtype: str, head_size: int = 128, output_lse: bool = True) -> PerfCase:
    tokens, heads, cache = SIZES[size]
    return PerfCase(size, tokens, heads, head_size, dtype, output_lse, cache)


PERF_CASES: tuple[PerfCase, ...] = (
    *(_case(size, dtype) for dtype in DTYPES for size in SIZES),
    *(_case("dram", dtype, head_size) for dtype in DTYPES for head_size in (64, 256)),
    _case("dram", "fp16", output_lse=False),
)
DRAM_CASES = tuple(case for case in PERF_CASES if case.size == "dram")

# Gated comparisons, each keyed "<comparison>/<case id>". None = not yet measured on that
# architecture: the test then measures and records the ratio without gating. Each measured value
# carries a comment giving the speedup (and CI) it was derived from.
SPEEDUP_MARGINS: dict[str, dict[str, float | None]] = {
    "sm90": {
        "reordered_vs_baseline/tiny-fp16-d128": None,
        "reordered_vs_baseline/l2-fp16-d128": None,
        "reordered_vs_baseline/dram-fp16-d128": None,
        "reordered_vs_baseline/tiny-bf16-d128": None,
        "reordered_vs_baseline/l2-bf16-d128": None,
        "reordered_vs_baseline/dram-bf16-d128": None,
        "reordered_vs_baseline/dram-fp16-d64": None,
        "reordered_vs_baseline/dram-fp16-d256": None,
        "reordered_vs_baseline/dram-bf16-d64": None,
        "reordered_vs_baseline/dram-bf16-d256": None,
        "reordered_vs_baseline/dram-fp16-d128-nolse": None,
        "vectorized_vs_baseline/tiny-fp16-d128": None,
        "vectorized_vs_baseline/l2-fp16-d128": None,
        "vectorized_vs_baseline/dram-fp16-d128": None,
        "vectorized_vs_baseline/tiny-bf16-d128": None,
        "vectorized_vs_baseline/l2-bf16-d128": None,
        "vectorized_vs_baseline/dram-bf16-d128": None,
        "vectorized_vs_baseline/dram-fp16-d64": None,
        "vectorized_vs_baseline/dram-fp16-d256": None,
        "vectorized_vs_baseline/dram-bf16-d64": None,
        "vectorized_vs_baseline/dram-bf16-d256": None,
        "vectorized_vs_baseline/dram-fp16-d128-nolse": None,
    },
}

# The target for the vectorized variant on DRAM-sized shapes: achieved bandwidth (bytes_moved
# over the median time) at least this fraction of the device's measured copy bandwidth.
BANDWIDTH_FRACTION_TARGET = 0.85
# The floor each DRAM case is gated at, per architecture; None = not yet measured (recorded only).
BANDWIDTH_FRACTION_FLOORS: dict[str, dict[str, float | None]] = {
    "sm90": {case.id: None for case in DRAM_CASES},
}

# Launch-parameter sweep of the vectorized kernel (block threads, 16-byte packs per thread).
# (128, 1) is vLLM's launch shape: 128-thread blocks, one pack per thread.
VECTORIZED_SWEEP = tuple((block, packs) for block in (128, 256, 512) for packs in (1, 2, 4))


def speedup_margin(arch: str, comparison: str, case: PerfCase) -> float | None:
    """The measured margin for ``comparison`` on ``case`` on ``arch``, or None if unmeasured."""
    return SPEEDUP_MARGINS.get(arch, {}).get(f"{comparison}/{case.id}")


def bandwidth_floor(arch: str, case: PerfCase) -> float | None:
    """The gated bandwidth fraction for ``case`` on ``arch``, or None if unmeasured."""
    return BANDWIDTH_FRACTION_FLOORS.get(arch, {}).get(case.id)
