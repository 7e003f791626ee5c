#!/usr/bin/env bash
# Session 17 run 6 (H200): P.V of both q heads with one half-warp exchange (MK_UNIT_PV_RS) against
# one head at a time; the trace; the whole GPU correctness suite of the megakernel.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
A=$OUT/run6-ab-pv-rs.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 50 200 1000 --rounds 3 \
    --set pv= --set pv0=MK_UNIT_PV_RS=0 --out $OUT/run6-ab-pv-rs.json 2>&1 | tee -a $A
python -m kernels.megakernel.trace --variants dataflow_splitk_o --positions 200 --subphases qkv \
    --out $OUT/run6-trace.json 2>&1 | tee $OUT/run6-trace.txt
FAMILIES=tests/megakernel/test_correctness.py OUT=/tmp/o bash tools/device_session.sh env correctness 2>&1 | tee $OUT/run6-correctness-log.txt
