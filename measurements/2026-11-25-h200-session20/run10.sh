#!/usr/bin/env bash
# Session 20 run 10 (H200): with the LM head's claimed chunks evicted first (run 9, now the default),
# each block also prefetches into L2 the next step's first 1 / 2 / 4 segments of its slices (layer
# 0's QKV, O, gate/up, down: MK_NEXT_STEP_PREFETCH) once it has claimed its last LM-head chunk. A/B.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
A=$OUT/run10-ab-next-step-prefetch.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 200 1000 --rounds 3 \
    --set lmef= --set noef=MK_LM_EVICT_FIRST=0 --set pf1=MK_NEXT_STEP_PREFETCH=1 --set pf2=MK_NEXT_STEP_PREFETCH=2 \
    --set pf4=MK_NEXT_STEP_PREFETCH=4 \
    --out $OUT/run10-ab-next-step-prefetch.json 2>&1 | tee -a $A | grep -E "^p=|checks|wrote|NVIDIA|FAIL"
