#!/usr/bin/env bash
# Session 19 run 4 (H200): run 3 again with the LM head's claims issued only from the LM head's own
# GEMV (run 3 inlined them into every ring issue: variant 9 grew from 11,744 to 16,080 SASS
# instructions and every layer took 1 us longer). Block b first streams its static 96 rows.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
A=$OUT/run4-ab-lm-dynamic.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 10 50 100 200 1000 --rounds 3 \
    --set static=MK_LM_DYNAMIC=0 --set dynamic=MK_LM_DYNAMIC=1 --out $OUT/run4-ab-lm-dynamic.json 2>&1 | tee -a $A
for d in 0 1; do
  python -m kernels.megakernel.trace --variants dataflow_splitk_o --positions 1 200 --subphases qkv \
      --define MK_LM_DYNAMIC=$d --out $OUT/run4-trace-dyn$d.json --raw $OUT/run4-trace-dyn$d-raw.npz 2>&1 \
      | grep -E "per step|lm head|layer \(|final" | tee $OUT/run4-trace-dyn$d.txt
done
