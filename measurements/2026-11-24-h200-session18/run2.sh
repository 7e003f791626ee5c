#!/usr/bin/env bash
# Session 18 run 2 (H200): the merge's threads reordered so that the issuing warp (pumping until the
# records' probes are seen) merges last (MK_MERGE_REMAP): A/B against thread order (the same work
# below 3 units per head, p < 128: the A/B's floor), then the trace with raw cycles per block.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
A=$OUT/run2-ab-merge-remap.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 100 200 400 1000 --rounds 3 \
    --set remap= --set order=MK_MERGE_REMAP=0 --out $OUT/run2-ab-merge-remap.json 2>&1 | tee -a $A
python -m kernels.megakernel.trace --variants dataflow_splitk_o --positions 1 50 200 1000 --subphases qkv \
    --out $OUT/run2-trace.json --raw $OUT/run2-trace-raw.npz 2>&1 | tee $OUT/run2-trace.txt
