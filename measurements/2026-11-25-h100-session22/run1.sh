#!/usr/bin/env bash
# Session 22 run 1 (H100; RUN=N on another machine): the ring's catch-up pace (MK_RING_CATCH_UP = n: a
# block with fewer than n landed pages waiting for its GEMVs may have one page more in flight). Session
# 21's H100 trace has the down sums waiting 1.67 us per layer for their last publisher, a block whose
# down pages landed late; then the traced step of the base and of catch-up 2 (p=1).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=${RUN:-1}
A=$OUT/run$R-ab-catch-up.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 200 1000 --rounds 3 \
    --set base= --set cu1=MK_RING_CATCH_UP=1 --set cu2=MK_RING_CATCH_UP=2 --set cu3=MK_RING_CATCH_UP=3 \
    --set cu2ap1=MK_RING_CATCH_UP=2,MK_ATTN_BLOCK_PACE=1 \
    --out $OUT/run$R-ab-catch-up.json 2>&1 | tee -a $A | grep -E "^p=|checks|wrote|NVIDIA|FAIL|built|rror"
date -u >> $A
for c in 0 2; do
  python -m kernels.megakernel.trace --variants dataflow_splitk_o --positions 1 --define MK_RING_CATCH_UP=$c \
      > $OUT/run$R-trace-catch-up$c.txt 2>&1
  grep -i -E 'lag|ring wait|layer \(|lm head|per step' $OUT/run$R-trace-catch-up$c.txt | head -12
done
