#!/usr/bin/env bash
# Session 19 run 12 (H200): more pages issued at the start of the step, before any exchange
# (MK_RING_START_PAGES 3 and 5 against the pace's 1): layer 0 took 5 us longer than the others in
# run 4's trace, its QKV waiting 1.6 us for its first pages. A/B interleaved.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
A=$OUT/run12-ab-start-pages.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 100 200 1000 --rounds 3 \
    --set pace= --set start3=MK_RING_START_PAGES=3 --set start5=MK_RING_START_PAGES=5 \
    --out $OUT/run12-ab-start-pages.json 2>&1 | tee -a $A
