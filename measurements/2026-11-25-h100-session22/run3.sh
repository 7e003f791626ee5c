#!/usr/bin/env bash
# Session 22 run 3 (H100): narrower catch-ups than run 1's (which cut the down sums' straggler lag
# from 1.73 to 0.60 us but slowed every exchange): only for down pages (MK_RING_CATCH_UP_DOWN), and
# counting pages issued ahead of consumption instead of landed ones (MK_RING_CATCH_UP_ISSUED).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=${RUN:-3}
A=$OUT/run$R-ab-catch-up.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 200 1000 --rounds 3 \
    --set base= --set cu1=MK_RING_CATCH_UP=1 --set cu1d=MK_RING_CATCH_UP=1,MK_RING_CATCH_UP_DOWN=1 \
    --set cu2d=MK_RING_CATCH_UP=2,MK_RING_CATCH_UP_DOWN=1 --set cu2i=MK_RING_CATCH_UP=2,MK_RING_CATCH_UP_ISSUED=1 \
    --set cu2id=MK_RING_CATCH_UP=2,MK_RING_CATCH_UP_ISSUED=1,MK_RING_CATCH_UP_DOWN=1 \
    --out $OUT/run$R-ab-catch-up.json 2>&1 | tee -a $A | grep -E "^p=|checks|wrote|NVIDIA|FAIL|built|rror"
date -u >> $A
python -m kernels.megakernel.trace --variants dataflow_splitk_o --positions 1 \
    --define MK_RING_CATCH_UP=2 --define MK_RING_CATCH_UP_DOWN=1 > $OUT/run$R-trace-cu2d.txt 2>&1
grep -i -E 'rmsnorm|lag|ring wait|down gemv|layer \(|per step' $OUT/run$R-trace-cu2d.txt | head -14
