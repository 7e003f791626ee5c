#!/usr/bin/env bash
# Session 17 run 11 (H200): with the unit's work shorter, do the tuning macros tuned around the old
# unit still hold? Attention-block pace 1 / 3, units pumping from 50% of the grid, 32-key units,
# 4 merge lanes at most, against the committed defaults.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
A=$OUT/run11-ab-retune.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 50 100 200 1000 --rounds 3 \
    --set base= --set pace1=MK_ATTN_BLOCK_PACE=1 --set pace3=MK_ATTN_BLOCK_PACE=3 --set upump50=MK_UNIT_PUMP=50 \
    --set chunk32=MK_ATTN_MIN_CHUNK=32 --set lanes4=MK_MERGE_LANES=4 \
    --out $OUT/run11-ab-retune.json 2>&1 | tee -a $A
