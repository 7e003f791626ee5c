#!/usr/bin/env bash
# Session 20 run 2 (H200): more of the per-layer code emitted once. On top of the half loop (run 1):
# the QKV and gate/up GEMVs from one call site (MK_HALF_GEMV, 10,112 -> 9,208 SASS instructions in
# variant 9), and the general attention unit (not run at these positions) out of line
# (MK_UNIT_GENERAL_OUTLINE: a call with a 112-byte stack frame, 128 registers). A/B interleaved.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
A=$OUT/run2-ab-half-gemv.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 10 100 200 1000 --rounds 3 \
    --set loop=MK_HALF_LOOP=0,MK_HALF_GEMV=0 --set half=MK_HALF_LOOP=1,MK_HALF_GEMV=0 \
    --set gemv=MK_HALF_LOOP=1,MK_HALF_GEMV=1 --set outline=MK_HALF_LOOP=1,MK_HALF_GEMV=1,MK_UNIT_GENERAL_OUTLINE=1 \
    --out $OUT/run2-ab-half-gemv.json 2>&1 | tee -a $A
