#!/usr/bin/env bash
# Session 23 run 19 (H100), for the next session: run 18's longest wait is at p=200 (4 units of 64 keys per
# head). Units of at least 32 keys (MK_ATTN_MIN_CHUNK=32: 7 per head at p=200) against 64, at p = 1 / 50 /
# 200 / 1000. A measurement only; nothing changes with it this session.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
R=${RUN:-19}
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 50 200 1000 --rounds 3 \
    --set base= --set c32=MK_ATTN_MIN_CHUNK=32 \
    --out $OUT/run$R-ab-min-chunk.json 2>&1 | tee $OUT/run$R-ab-min-chunk.txt | grep -E "^p=|PASS|FAIL|checks|wrote|rror"
