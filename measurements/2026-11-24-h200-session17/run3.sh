#!/usr/bin/env bash
# Session 17 run 3 (H200): MK_UNIT_KEY_WARPS (only the warps holding keys compute a unit's scores
# and P.V): A/B against all warps, the trace with it, and the GPU correctness of the dataflow variants.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
A=$OUT/run3-ab-key-warps.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 10 50 100 200 1000 --rounds 3 \
    --set key= --set all=MK_UNIT_KEY_WARPS=0 --out $OUT/run3-ab-key-warps.json 2>&1 | tee -a $A
python -m kernels.megakernel.trace --variants dataflow_splitk_o --positions 1 50 200 --subphases qkv \
    --out $OUT/run3-trace.json 2>&1 | tee $OUT/run3-trace.txt
MK_SELECT=dataflow OUT=/tmp/o bash tools/device_session.sh mkcorrect 2>&1 | tee $OUT/run3-correctness-log.txt
