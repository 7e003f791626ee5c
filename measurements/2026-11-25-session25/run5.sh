#!/usr/bin/env bash
# Session 25 run 5 (H200; RUN=6 on an H100): the grid's size on an H200 (run 4 on an H100: 128 blocks
# 0.979x / 1.012x / 0.999x at p = 1 / 200 / 1000, 124 and 120 blocks 0.88-0.93x). A/B of session 24's
# kernel on 132 blocks against 130 and 128; then the traced step at p = 1 and 200 on 132 and 128 blocks.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=${RUN:-5}
A=$OUT/run$R-ab-grid.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python3 -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 200 1000 --rounds 3 \
    --set base= --set g130=grid_blocks=130 --set g128=grid_blocks=128 \
    --out $OUT/run$R-ab-grid.json 2>&1 | tee -a $A | grep -E "^p=|checks|wrote|NVIDIA|FAIL|built|rror"
date -u >> $A
for g in 132 128; do
  python3 -m kernels.megakernel.trace --variants dataflow_splitk_o --positions 1 200 --grid-blocks $g \
      > $OUT/run$R-trace-g$g.txt 2>&1
  echo "== $g blocks"; grep -E 'per step|layer \(|wait|records|lm head' $OUT/run$R-trace-g$g.txt | head -40
done
