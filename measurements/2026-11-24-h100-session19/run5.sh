#!/usr/bin/env bash
# Session 19 run 5 (H200): how many of the LM head's chunks each block takes statically before it
# claims (MK_LM_STATIC_CHUNKS 2 / 8 / 16 of about 24 per block) against the static split, A/B
# interleaved at p = 1 / 200 / 1000 (run 4: dynamic 1.006-1.008x at p <= 200, 0.996x at p=1000);
# then the trace at p=1000 of the static split and of 2 static chunks.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
A=$OUT/run5-ab-lm-static-chunks.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 200 1000 --rounds 3 \
    --set static=MK_LM_DYNAMIC=0 --set dyn2=MK_LM_DYNAMIC=1,MK_LM_STATIC_CHUNKS=2 \
    --set dyn8=MK_LM_DYNAMIC=1,MK_LM_STATIC_CHUNKS=8 --set dyn16=MK_LM_DYNAMIC=1,MK_LM_STATIC_CHUNKS=16 \
    --out $OUT/run5-ab-lm-static-chunks.json 2>&1 | tee -a $A
for d in 0 1; do
  python -m kernels.megakernel.trace --variants dataflow_splitk_o --positions 1000 --subphases qkv \
      --define MK_LM_DYNAMIC=$d --out $OUT/run5-trace-p1000-dyn$d.json --raw $OUT/run5-trace-p1000-dyn$d-raw.npz 2>&1 \
      | grep -vE "warning|^\s*$|\^|constexpr" | tail -45 > $OUT/run5-trace-p1000-dyn$d.txt
done
