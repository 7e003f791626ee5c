#!/usr/bin/env bash
# Session 23 run 18 (H100): the traced step of the final kernel at p = 1 / 200 / 1000, for the next session.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
R=${RUN:-18}
python -m kernels.megakernel.trace --variants dataflow_splitk_o --positions 1 200 1000 > $OUT/run$R-trace.txt 2>&1
grep -E 'per step|^phase|rmsnorm|gemv|attention|load attn|unit:|records|lag|layer \(|lm head' $OUT/run$R-trace.txt | head -80
