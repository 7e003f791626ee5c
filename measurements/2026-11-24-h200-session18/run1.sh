#!/usr/bin/env bash
# Session 18 run 1 (H200): LL words waited for together (ll_wait_words; MK_LL_WAIT_SERIAL keeps the
# old one-after-another polls) and ring_gemv's row sums by one reduce-scatter (MK_RING_GEMV_SCATTER):
# A/B of each off against both on, the trace with both on, the GPU correctness of the dataflow variants.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
A=$OUT/run1-ab-wait-scatter.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 10 50 100 200 1000 --rounds 3 \
    --set both= --set serial=MK_LL_WAIT_SERIAL=1 --set gemv0=MK_RING_GEMV_SCATTER=0 \
    --set off=MK_LL_WAIT_SERIAL=1,MK_RING_GEMV_SCATTER=0 --out $OUT/run1-ab-wait-scatter.json 2>&1 | tee -a $A
python -m kernels.megakernel.trace --variants dataflow_splitk_o --positions 1 200 --subphases qkv \
    --out $OUT/run1-trace.json 2>&1 | tee $OUT/run1-trace.txt
MK_SELECT=dataflow OUT=/tmp/o timeout 240 bash tools/device_session.sh mkcorrect 2>&1 | tail -30 | tee $OUT/run1-correctness-log.txt
