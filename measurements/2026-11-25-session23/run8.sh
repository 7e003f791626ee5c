#!/usr/bin/env bash
# Session 23 run 8 (H100; RUN=9 on an H200): units of at most MK_UNIT_WARP_KEYS keys (keys and values
# copied into shared memory at the layer's start) computed by one warp per q head, no block barrier
# between scores, softmax and P.V; A/B of 8 / 16 / 32 against 0 (the 16-warp unit) at p = 1 / 10 / 200 /
# 1000 (units of 2, 11, 9 (the last of 4), 41 (the last of 16) keys), then the traced step of 0 and 16 at p=1.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=${RUN:-8}
A=$OUT/run$R-ab-unit-warps.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 10 200 1000 --rounds 3 \
    --set base=MK_UNIT_WARP_KEYS=0 --set w8=MK_UNIT_WARP_KEYS=8 --set w16=MK_UNIT_WARP_KEYS=16 \
    --set w32=MK_UNIT_WARP_KEYS=32 \
    --out $OUT/run$R-ab-unit-warps.json 2>&1 | tee -a $A | grep -E "^p=|checks|wrote|NVIDIA|FAIL|built|rror"
date -u >> $A
for k in 0 16; do
  python -m kernels.megakernel.trace --variants dataflow_splitk_o --positions 1 \
      --define MK_UNIT_WARP_KEYS=$k > $OUT/run$R-trace-w$k.txt 2>&1
  echo "== warp keys $k"; grep -i -E 'unit|records|load attn|layer \(|per step' $OUT/run$R-trace-w$k.txt | head -14
done
