#!/usr/bin/env bash
# Session 24 run 1 (H100; RUN=2 TRACE=0: the same after the merge of the warps was unrolled): A/B at p = 1 / 50 / 200 / 1000 of
#   old:  session 23's kernel (ef3fe16, its source copied into build/old/ by the session's script),
#   base: the working tree's defaults (unit_record / unit_on_warps folded, MK_UNIT_WARP_SOFTMAX=1),
#   ws0:  the folds alone (MK_UNIT_WARP_SOFTMAX=0);
# then the traced step of base and ws0 at p = 200 and 1000.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=${RUN:-1}
A=$OUT/run$R-ab-warp-softmax.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python3 measurements/2026-11-25-session24/ab_sources.py --variant dataflow_splitk_o --positions 1 50 200 1000 \
    --rounds 3 --set old=MK_SOURCE_OLD=1 --set base= --set ws0=MK_UNIT_WARP_SOFTMAX=0 \
    --out $OUT/run$R-ab-warp-softmax.json 2>&1 | tee -a $A | grep -E "^p=|checks|wrote|NVIDIA|FAIL|built|rror"
date -u >> $A
[ "${TRACE:-1}" = 1 ] || exit 0
for k in 1 0; do
  python3 -m kernels.megakernel.trace --variants dataflow_splitk_o --positions 200 1000 \
      --define MK_UNIT_WARP_SOFTMAX=$k > $OUT/run$R-trace-ws$k.txt 2>&1
  echo "== warp softmax $k"; grep -i -E 'unit|records|load attn|layer \(|per step' $OUT/run$R-trace-ws$k.txt | head -24
done
