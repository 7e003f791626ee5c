#!/usr/bin/env bash
# Session 21 run 16 (H200): no ring pumping during dataflow_splitk_o's accumulator
# waits (MK_ACC_WAIT_PUMP: 0 none, 1 only the input RMSNorm's, 2 only the post-attention one's; 3, the
# default, both; the macro was removed after this run). The pair probe (runs 14-15) found the accumulator exchange 1.3-1.7 us slower while
# every SM streams one page than idle.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=${RUN:-16}
A=$OUT/run$R-ab-acc-wait-pump.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 200 1000 --rounds 3 \
    --set base= --set nopump=MK_ACC_WAIT_PUMP=0 --set inputonly=MK_ACC_WAIT_PUMP=1 --set postonly=MK_ACC_WAIT_PUMP=2 \
    --out $OUT/run$R-ab-acc-wait-pump.json 2>&1 | tee -a $A | grep -E "^p=|checks|wrote|NVIDIA|FAIL|built|rror"
date -u >> $A
