#!/usr/bin/env bash
# Session 20 run 9 (H200): the claimed LM-head chunks copied with an L2 evict_first policy
# (MK_LM_EVICT_FIRST=1). Session 19's trace: layer 0 takes 5 us longer than the others, every one of
# its GEMVs 1-2 us longer, as if its code and buffers came from HBM after the LM head's 311 MB went
# through L2. With the LM head's lines evicted first, what the next step starts with may stay. A/B.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
A=$OUT/run9-ab-lm-evict-first.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 200 1000 --rounds 3 \
    --set base= --set lmef=MK_LM_EVICT_FIRST=1 \
    --out $OUT/run9-ab-lm-evict-first.json 2>&1 | tee -a $A | grep -E "^p=|checks|wrote|NVIDIA|FAIL"
