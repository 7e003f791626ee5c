#!/usr/bin/env bash
# Session 18 run 4 (H200): why the merge of several units' records takes ~0.9 us after the probes are
# seen (0.15 with one unit): its threads wait for the probing warp's post before loading
# (MK_MERGE_WAIT_POST=1), and 16 merge lanes with the remapped merge (MK_MERGE_LANES=16); A/B against
# the default (O light and the down prefetch of run 3 removed), traces with raw cycles.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
A=$OUT/run4-ab-merge-post.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 200 400 1000 --rounds 3 \
    --set base= --set post=MK_MERGE_WAIT_POST=1 --set lanes16=MK_MERGE_LANES=16 \
    --out $OUT/run4-ab-merge-post.json 2>&1 | tee -a $A
for d in 0 1; do
  python -m kernels.megakernel.trace --variants dataflow_splitk_o --positions 200 1000 --subphases qkv \
      --define MK_MERGE_WAIT_POST=$d --out $OUT/run4-trace-post$d.json --raw $OUT/run4-trace-post$d-raw.npz > $OUT/run4-trace-post$d.log 2>&1
done
