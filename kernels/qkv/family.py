"""The qkv family: variants, the perf shape grid, launch configurations and measured margins."""
from __future__ import annotations

from pathlib import Path

from kernels.qkv.launch import VARIANTS, LaunchConfig
from kernels.qkv.reference import QkvShape

__all__ = ["VARIANTS", "LAYERS", "SOURCES", "SPEEDUP_MARGINS", "BEST_CONFIGS", "best_config", "margin"]

SOURCES = (Path(__file__).with_name("qkv.cu"),)

# The two layer shapes of the note (LSU hw01): 300 samples x 99 words, 4 heads of 8, and
# 30 samples x 99 words, 8 heads of 64.
LAYERS: dict[str, QkvShape] = {
    "layer0": QkvShape(d_model=32, d_qkv=96, d_ws=29700),
    "layer1": QkvShape(d_model=512, d_qkv=1536, d_ws=2970),
}

# Gated speedups per architecture, "<fast>_vs_<baseline>/<layer>". None = not measured yet:
# the perf test then measures and records the ratio without gating. Each measured value
# gets a comment with the speedup and CI it was derived from.
SPEEDUP_MARGINS: dict[str, dict[str, float | None]] = {
    "sm90": {
        "qkv_base_w2_vs_qkv_base/layer0": None,
        "qkv_base_w2_vs_qkv_base/layer1": None,
        "qkv_strip_w2_vs_qkv_base_w2/layer1": None,
    },
}

# Best launch configuration per architecture, "<variant>/<layer>", from kernels/qkv/sweep.py.
# Missing entries use LaunchConfig() (8 warps per block, one block per SM, 8 words per thread).
BEST_CONFIGS: dict[str, dict[str, LaunchConfig]] = {
    "sm90": {},
}


def margin(arch: str, key: str) -> float | None:
    """The gated speedup for ``key`` on ``arch``, or None when not measured there."""
    return SPEEDUP_MARGINS.get(arch, {}).get(key)


def best_config(arch: str, variant: str, layer: str) -> LaunchConfig:
    """The launch configuration the perf tests use for ``variant`` on ``layer``."""
    return BEST_CONFIGS.get(arch, {}).get(f"{variant}/{layer}", LaunchConfig())
