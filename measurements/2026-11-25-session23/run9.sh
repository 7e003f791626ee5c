#!/usr/bin/env bash
# Session 23 run 9 (H200; RUN=10 on an H100): the warps' unit (MK_UNIT_WARP_KEYS) as loops (run 8) or
# unrolled over its most keys (MK_UNIT_WARP_UNROLL=1, a probe), at 8 and 16 keys, against 0 (the
# 16-warp unit) at p = 1 / 10 / 200 / 1000; then the traced step of 0 and 8 (loops) at p=1.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=${RUN:-9}
A=$OUT/run$R-ab-unit-warps.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 10 200 1000 --rounds 3 \
    --set base=MK_UNIT_WARP_KEYS=0 --set loop8=MK_UNIT_WARP_KEYS=8,MK_UNIT_WARP_UNROLL=0 \
    --set unr8=MK_UNIT_WARP_KEYS=8,MK_UNIT_WARP_UNROLL=1 --set unr16=MK_UNIT_WARP_KEYS=16,MK_UNIT_WARP_UNROLL=1 \
    --out $OUT/run$R-ab-unit-warps.json 2>&1 | tee -a $A | grep -E "^p=|checks|wrote|NVIDIA|FAIL|built|rror"
date -u >> $A
for k in 0 8; do
  python -m kernels.megakernel.trace --variants dataflow_splitk_o --positions 1 \
      --define MK_UNIT_WARP_KEYS=$k > $OUT/run$R-trace-w$k.txt 2>&1
  echo "== warp keys $k"; grep -i -E 'unit|records|load attn|layer \(|per step' $OUT/run$R-trace-w$k.txt | head -14
done
