#!/usr/bin/env bash
# Session 25 run 4 (H100; RUN=5 on an H200): the grid's size, never A/B'd for the split-K variants.
# Fewer blocks mean fewer accumulator adders (runs 1-2: halving them is worth 1.3-3.0%) and, at 128,
# 8 groups of 16 O blocks with none left over, against fewer SMs streaming weights. A/B at
# p = 1 / 200 / 1000 of session 24's kernel on 132 blocks (one per SM) against 128, 124 and 120.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=${RUN:-4}
A=$OUT/run$R-ab-grid.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python3 -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 200 1000 --rounds 3 \
    --set base= --set g128=grid_blocks=128 --set g124=grid_blocks=124 --set g120=grid_blocks=120 \
    --out $OUT/run$R-ab-grid.json 2>&1 | tee -a $A | grep -E "^p=|checks|wrote|NVIDIA|FAIL|built|rror"
date -u >> $A
