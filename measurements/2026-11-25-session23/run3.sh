#!/usr/bin/env bash
# Session 23 run 3 (and 4 on the other GPU): MK_UNIT_KEYS_SHARED=1 (keys in shared memory only once
# units are busy, MK_UNIT_PUMP's share: p=1000 here) and =2 (always) against 0 (session 22's kernel).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=${RUN:-3}
A=$OUT/run$R-ab-unit-keys-busy.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 200 1000 --rounds 3 \
    --set base=MK_UNIT_KEYS_SHARED=0 --set busy=MK_UNIT_KEYS_SHARED=1 --set always=MK_UNIT_KEYS_SHARED=2 \
    --out $OUT/run$R-ab-unit-keys-busy.json 2>&1 | tee -a $A | grep -E "^p=|checks|wrote|NVIDIA|FAIL|built|rror"
date -u >> $A
