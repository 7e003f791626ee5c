#!/usr/bin/env bash
# Session 17 run 5 (H200): the unit's scores by one reduce-scatter (MK_UNIT_SCORE_RS) and its softmax
# as two values per lane (MK_UNIT_SMALL_SOFTMAX), each off against both on; the trace with both on.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
A=$OUT/run5-ab-unit-chain.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 50 200 1000 --rounds 3 \
    --set both= --set rs0=MK_UNIT_SCORE_RS=0 --set sm0=MK_UNIT_SMALL_SOFTMAX=0 \
    --set off=MK_UNIT_SCORE_RS=0,MK_UNIT_SMALL_SOFTMAX=0 --out $OUT/run5-ab-unit-chain.json 2>&1 | tee -a $A
python -m kernels.megakernel.trace --variants dataflow_splitk_o --positions 1 200 --subphases qkv \
    --out $OUT/run5-trace.json 2>&1 | tee $OUT/run5-trace.txt
