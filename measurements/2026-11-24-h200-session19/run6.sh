#!/usr/bin/env bash
# Session 19 run 6 (H200; run 7 the same on an H100): the dynamic LM head with its whole issuing in
# one place (LmIssue::refill at the top of each page group; variant 9 is 96 SASS instructions
# longer than the static build instead of 552 in run 4), 2 and 8 static chunks per block, against
# the static split, A/B interleaved.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=${RUN:-run6}
A=$OUT/$R-ab-lm-dynamic.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 100 200 1000 --rounds 3 \
    --set static=MK_LM_DYNAMIC=0 --set dyn2=MK_LM_DYNAMIC=1,MK_LM_STATIC_CHUNKS=2 \
    --set dyn8=MK_LM_DYNAMIC=1,MK_LM_STATIC_CHUNKS=8 --out $OUT/$R-ab-lm-dynamic.json 2>&1 | tee -a $A
