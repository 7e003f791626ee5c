#!/usr/bin/env bash
# Session 17 run 4 (H200): MK_UNIT_KEY_WARPS with unit_output's sum unrolled (commit 5297a51) against
# all warps, and the trace with the unit's scores, softmax and P.V timed apart (events 28-29).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
A=$OUT/run4-ab-key-warps.txt
(date -u; git log -1 --format=%h; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 10 50 200 1000 --rounds 3 \
    --set key= --set all=MK_UNIT_KEY_WARPS=0 --out $OUT/run4-ab-key-warps.json 2>&1 | tee -a $A
python -m kernels.megakernel.trace --variants dataflow_splitk_o --positions 1 50 200 1000 --subphases qkv \
    --out $OUT/run4-trace.json 2>&1 | tee $OUT/run4-trace.txt
