"""The qkv family: variants, the perf shape grid, launch configurations and measured margins."""
from __future__ import annotations

from pathlib import Path

from kernels.qkv.launch import VARIANTS, LaunchConfig
from kernels.qkv.reference import QkvShape

__all__ = [
    "VARIANTS", "LAYERS", "SOURCES", "GATES", "SPEEDUP_MARGINS", "BEST_CONFIGS", "best_config", "gate_key", "margin",
]

SOURCES = (Path(__file__).with_name("qkv.cu"),)

# The two layer shapes of the note (LSU hw01): 300 samples x 99 words, 4 heads of 8, and
# 30 samples x 99 words, 8 heads of 64.
LAYERS: dict[str, QkvShape] = {
    "layer0": QkvShape(d_model=32, d_qkv=96, d_ws=29700),
    "layer1": QkvShape(d_model=512, d_qkv=1536, d_ws=2970),
}

# The comparisons the note claims, gated by the perf tests: (fast, baseline, layer). Problem 1
# (w2 coalesces the weight loads) on both layers; problem 2 (the strip assignment cuts the
# L1<->L2 re-reads of w_qkv) on the larger layer, where the note says it matters.
GATES: tuple[tuple[str, str, str], ...] = (
    ("qkv_base_w2", "qkv_base", "layer0"),
    ("qkv_base_w2", "qkv_base", "layer1"),
    ("qkv_strip_w2", "qkv_base_w2", "layer1"),
)


def gate_key(fast: str, baseline: str, layer: str) -> str:
    """The SPEEDUP_MARGINS key of one gate: ``"<fast>_vs_<baseline>/<layer>"``."""
    return f"{fast}_vs_{baseline}/{layer}"


# Gated speedups per architecture, keyed by gate_key. None = not measured yet: the perf test
# then measures and records the ratio without gating. Margins are derived from the
# interleaved perf tests, not from the sweep; each gets a comment with the speedup and CI it
# came from. Sweep ratios on the H200, 2026-11-21 (best launches, separately timed, cold L2),
# for orientation only: 9.14x, 9.02x, 3.73x in the order below.
SPEEDUP_MARGINS: dict[str, dict[str, float | None]] = {
    "sm90": {
        "qkv_base_w2_vs_qkv_base/layer0": None,
        "qkv_base_w2_vs_qkv_base/layer1": None,
        "qkv_strip_w2_vs_qkv_base_w2/layer1": None,
    },
}

# Launch configuration per architecture, "<variant>/<layer>": the fastest of kernels/qkv/sweep.py
# on an NVIDIA H200 (132 SMs), 2026-11-21, measurements/2026-11-21-h200-session1/sweep_qkv.json
# (cold L2, median and 99% CI). Missing entries use LaunchConfig() (8 warps, one block per SM,
# 8 words per thread). Resident warps per SM follow from registers per thread (offline nvcc 13.0
# -arch=sm_90; the NVRTC build may differ slightly): base kernels 30-32 (64 warps), strip_w2 WPT 4
# 64 (32 warps), strip WPT 4 79 (24 warps in 8-warp blocks), strip* WPT 16 197-206 (8 warps in
# 4-warp blocks).
BEST_CONFIGS: dict[str, dict[str, LaunchConfig]] = {
    "sm90": {
        # 371.44 us [370.18, 371.80]; every launch with 8+ warps per SM is within 3.1% (371-383 us).
        "qkv_base/layer0": LaunchConfig(warps_per_block=8, blocks_per_sm=4),
        # 9369.86 us [9368.67, 9370.85] (the default launch); 8+ warps per SM: 9370-9712 us.
        "qkv_base/layer1": LaunchConfig(warps_per_block=8, blocks_per_sm=1),
        # 40.62 us [40.39, 40.83]; 32 warps per SM, the most swept (8 per SM: 123.68 us).
        "qkv_base_w2/layer0": LaunchConfig(warps_per_block=8, blocks_per_sm=4),
        # 1039.22 us [1037.30, 1040.35]; 32 warps per SM, the most swept (8 per SM: 3874.05 us).
        "qkv_base_w2/layer1": LaunchConfig(warps_per_block=8, blocks_per_sm=4),
        # 18.42 us [18.21, 18.55]; within 1% of 4w 4xSM and 8w 1xSM at 16 words per thread.
        "qkv_strip/layer0": LaunchConfig(warps_per_block=4, blocks_per_sm=2, words_per_thread=16),
        # 344.77 us [343.49, 345.37]; next 384.09 us (4w 4xSM, 16 words per thread).
        "qkv_strip/layer1": LaunchConfig(warps_per_block=4, blocks_per_sm=2, words_per_thread=16),
        # 15.73 us [15.56, 15.86]; next 17.43 us (4w 2xSM, 16 words per thread).
        "qkv_strip_w2/layer0": LaunchConfig(warps_per_block=8, blocks_per_sm=4, words_per_thread=4),
        # 278.67 us [277.56, 279.33]; next 317.65 us (4w 4xSM, 16 words per thread). Needs all four
        # blocks resident: 64 registers x 1024 threads fill the 65536-register file exactly.
        "qkv_strip_w2/layer1": LaunchConfig(warps_per_block=8, blocks_per_sm=4, words_per_thread=4),
    },
}


def margin(arch: str, key: str) -> float | None:
    """The gated speedup for ``key`` on ``arch``, or None when not measured there."""
    return SPEEDUP_MARGINS.get(arch, {}).get(key)


def best_config(arch: str, variant: str, layer: str) -> LaunchConfig:
    """The launch configuration the perf tests use for ``variant`` on ``layer``."""
    return BEST_CONFIGS.get(arch, {}).get(f"{variant}/{layer}", LaunchConfig())
