#!/usr/bin/env bash
# Session 19 run 3 (H200): the LM head shared out at run time (MK_LM_DYNAMIC: block b takes chunk b
# of 48 rows, then claims the next free chunk a chunk ahead through an atomic counter) against the
# static split (each block its 1/132 of the rows), A/B interleaved; then the trace of both.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
A=$OUT/run3-ab-lm-dynamic.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 10 50 100 200 1000 --rounds 3 \
    --set static=MK_LM_DYNAMIC=0 --set dynamic=MK_LM_DYNAMIC=1 --out $OUT/run3-ab-lm-dynamic.json 2>&1 | tee -a $A
for d in 0 1; do
  python -m kernels.megakernel.trace --variants dataflow_splitk_o --positions 1 200 --subphases qkv \
      --define MK_LM_DYNAMIC=$d --out $OUT/run3-trace-dyn$d.json --raw $OUT/run3-trace-dyn$d-raw.npz 2>&1 \
      | grep -E "per step|lm head|layer \(|final" | tee $OUT/run3-trace-dyn$d.txt
done
