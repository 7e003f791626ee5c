#!/usr/bin/env bash
# Session 20 run 8 (H200): the tuning macros again on the half loop (the step's code changed shape):
# splitk pace 2, the unit blocks' pace 3, 4 merge lanes, the units' pumping layout from 15% of the grid.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
A=$OUT/run8-ab-retune.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 200 1000 --rounds 3 \
    --set base= --set pace2=MK_SPLITK_PACED_IN_FLIGHT=2 --set attnpace3=MK_ATTN_BLOCK_PACE=3 \
    --set merge4=MK_MERGE_LANES=4 --set unitpump15=MK_UNIT_PUMP=15 \
    --out $OUT/run8-ab-retune.json 2>&1 | tee -a $A | grep -E "^p=|checks|wrote|NVIDIA|FAIL"
