#!/usr/bin/env bash
# Session 22 run 6 (H100; RUN=7 on an H200): the units' keys and values asked for in L2 at their layer's
# start (MK_UNIT_KV_PREFETCH=2, run 5: 1.009x / 1.019x / 1.015x) or half a layer earlier (3), against the
# committed code; then the traced step of 2 at p = 200 and 1000.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=${RUN:-6}
A=$OUT/run$R-ab-unit-kv-prefetch.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 200 1000 --rounds 3 \
    --set base= --set pf2=MK_UNIT_KV_PREFETCH=2 --set pf3=MK_UNIT_KV_PREFETCH=3 \
    --out $OUT/run$R-ab-unit-kv-prefetch.json 2>&1 | tee -a $A | grep -E "^p=|checks|wrote|NVIDIA|FAIL|built|rror"
date -u >> $A
for p in 200 1000; do
  python -m kernels.megakernel.trace --variants dataflow_splitk_o --positions $p \
      --define MK_UNIT_KV_PREFETCH=2 > $OUT/run$R-trace-pf2-p$p.txt 2>&1
  grep -i -E 'unit: q|unit: scores|unit: P|records|layer \(|per step' $OUT/run$R-trace-pf2-p$p.txt | head -14
done
