#!/usr/bin/env bash
# Session 20 run 1 (H200): dataflow_splitk_o by half layers (MK_HALF_LOOP=1), so that the split-K
# projection, its publication and the RMSNorm reading it are emitted once: variant 9 goes from 11,840
# to 10,112 SASS instructions (per-layer code from about 7,300 to 5,600). A/B interleaved.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
A=$OUT/run1-ab-half-loop.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 10 100 200 1000 --rounds 3 \
    --set loop=MK_HALF_LOOP=0 --set half=MK_HALF_LOOP=1 \
    --out $OUT/run1-ab-half-loop.json 2>&1 | tee -a $A
