#!/usr/bin/env bash
# Session 22 run 4 (H100): why a unit's q/k/v wait takes 3.0 us at p=1000 against 1.6 at p=1 (run 2's
# trace): the unit's 32 KB of keys and values loaded after its q/k/v are in (MK_UNIT_KV_LATE), the unit
# blocks at pace 1 (MK_ATTN_BLOCK_PACE=1), both; then the traced step of MK_UNIT_KV_LATE at p=1000.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=${RUN:-4}
A=$OUT/run$R-ab-unit-kv.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 200 1000 --rounds 3 \
    --set base= --set kvlate=MK_UNIT_KV_LATE=1 --set ap1=MK_ATTN_BLOCK_PACE=1 \
    --set kvlate_ap1=MK_UNIT_KV_LATE=1,MK_ATTN_BLOCK_PACE=1 \
    --out $OUT/run$R-ab-unit-kv.json 2>&1 | tee -a $A | grep -E "^p=|checks|wrote|NVIDIA|FAIL|built|rror"
date -u >> $A
python -m kernels.megakernel.trace --variants dataflow_splitk_o --positions 1000 \
    --define MK_UNIT_KV_LATE=1 > $OUT/run$R-trace-kvlate.txt 2>&1
grep -i -E 'unit|records|layer \(|per step' $OUT/run$R-trace-kvlate.txt | head -14
