#!/usr/bin/env bash
# Session 24 run 7 (H200): the tuning macros nearest the attention once more, on the committed kernel
# (their last sweeps: H200 sessions 12-14, H100 session 21 run 1, before sessions 22-23 moved the unit's
# K/V into L2 and shared memory): 16 merge lanes, the unit blocks' pace 3, the units' pumping from half
# the grid; A/B at p = 1 / 200 / 1000 against the defaults.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=${RUN:-7}
A=$OUT/run$R-ab-macros.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python3 -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 200 1000 --rounds 3 \
    --set base= --set merge16=MK_MERGE_LANES=16 --set pace3=MK_ATTN_BLOCK_PACE=3 \
    --set pump50=MK_UNIT_PUMP=50 \
    --out $OUT/run$R-ab-macros.json 2>&1 | tee -a $A | grep -E "^p=|checks|wrote|NVIDIA|FAIL|built|rror"
date -u >> $A
