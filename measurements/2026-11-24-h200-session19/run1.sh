#!/usr/bin/env bash
# Session 19 run 1 (H200): the last rows of each block's LM-head slice copied with an L2 evict_last
# hint so they stay in L2 from one step to the next (MK_LM_L2_KEEP_ROWS: 64 / 128 / 160 / 192 rows
# per block = 16.9 / 33.8 / 42.2 / 50.7 MB), and every other weight page with evict_first
# (MK_WEIGHTS_EVICT_FIRST). ab.py returns the kept lines to normal priority after each timing.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
A=$OUT/run1-ab-l2-keep.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 200 1000 --rounds 3 \
    --set base= --set keep64=MK_LM_L2_KEEP_ROWS=64 --set keep128=MK_LM_L2_KEEP_ROWS=128 \
    --set keep160=MK_LM_L2_KEEP_ROWS=160 --set keep192=MK_LM_L2_KEEP_ROWS=192 \
    --set ef=MK_WEIGHTS_EVICT_FIRST=1 --set keep128ef=MK_LM_L2_KEEP_ROWS=128,MK_WEIGHTS_EVICT_FIRST=1 \
    --out $OUT/run1-ab-l2-keep.json 2>&1 | tee -a $A
