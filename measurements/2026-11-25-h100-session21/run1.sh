#!/usr/bin/env bash
# Session 21 run 1 (H100): the tuning macros, so far tuned on H200s, retuned on an H100 (whose
# 8x target at p=1 is 3% away): the unit blocks' pace 1 and 3, 4 merge lanes, the units' pumping
# layout from 15% and 50% of the grid, 4 static LM-head chunks, splitk pace 2.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
A=$OUT/run1-ab-h100-retune.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 200 1000 --rounds 3 \
    --set base= --set attnpace1=MK_ATTN_BLOCK_PACE=1 --set attnpace3=MK_ATTN_BLOCK_PACE=3 \
    --set merge4=MK_MERGE_LANES=4 --set unitpump15=MK_UNIT_PUMP=15 --set unitpump50=MK_UNIT_PUMP=50 \
    --set lmstatic4=MK_LM_STATIC_CHUNKS=4 --set splitkpace2=MK_SPLITK_PACED_IN_FLIGHT=2 \
    --out $OUT/run1-ab-h100-retune.json 2>&1 | tee -a $A | grep -E "^p=|checks|wrote|NVIDIA|FAIL|built"
date -u >> $A
