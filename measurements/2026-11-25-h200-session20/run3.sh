#!/usr/bin/env bash
# Session 20 run 3 (H200): the unit's q/k/v tasks from one call site (MK_UNIT_ONE_QK, 9,208 -> 8,504
# SASS instructions in variant 9) on top of runs 1-2's half loop and shared GEMV, against the loop
# of session 19 (all three off); then, on the committed defaults (all three on), the GPU correctness
# of the dataflow variants and the perf suite re-recording the H200 baselines ($OUT/results.tgz).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
RUN=${RUN:-run3}
A=$OUT/$RUN-ab-one-qk.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 10 100 200 1000 --rounds 3 \
    --set loop=MK_HALF_LOOP=0,MK_HALF_GEMV=0,MK_UNIT_ONE_QK=0 --set gemv=MK_HALF_LOOP=1,MK_HALF_GEMV=1,MK_UNIT_ONE_QK=0 \
    --set oneqk=MK_HALF_LOOP=1,MK_HALF_GEMV=1,MK_UNIT_ONE_QK=1 \
    --out $OUT/$RUN-ab-one-qk.json 2>&1 | tee -a $A | grep -E "^p=|checks|wrote|NVIDIA|FAIL"
MK_SELECT=dataflow FAMILIES=tests/megakernel/test_perf.py bash tools/device_session.sh env mkcorrect update 2>&1 \
    | tee $OUT/$RUN-perf-update-log.txt | tail -3
