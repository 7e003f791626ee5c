#!/usr/bin/env bash
# Session 20 run 5 (H100): the half loop (MK_HALF_LOOP) and the shared QKV / gate-up GEMV (MK_HALF_GEMV)
# against session 19's loop, A/B interleaved; then, on the committed defaults (both on), the GPU
# correctness of the dataflow variants and the perf suite re-recording the H100 baselines.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
A=$OUT/run5-ab-half-loop.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 10 100 200 1000 --rounds 3 \
    --set loop=MK_HALF_LOOP=0,MK_HALF_GEMV=0 --set half=MK_HALF_LOOP=1,MK_HALF_GEMV=0 \
    --set gemv=MK_HALF_LOOP=1,MK_HALF_GEMV=1 \
    --out $OUT/run5-ab-half-loop.json 2>&1 | tee -a $A | grep -E "^p=|checks|wrote|NVIDIA|FAIL"
MK_SELECT=dataflow FAMILIES=tests/megakernel/test_perf.py bash tools/device_session.sh env mkcorrect update 2>&1 \
    | tee $OUT/run5-perf-update-log.txt | tail -3
