#!/usr/bin/env bash
# Session 26 runs 1 and 2 (H100): A/B at p = 1 / 5 / 7 / 200 of
#   base:  the committed kernel (MK_LOCAL_ATTENTION=0, its SASS bitwise e6d19c8's),
#   local: MK_LOCAL_ATTENTION=1: up to 8 keys, every block computes its own attention outputs and no
#          unit leaves a record (p=200 is a control: the same build path as base there);
# then the trace of both at p=1. The code measured is kept as patches against e6d19c8: run 1 (commit
# 5a89e68) FORM=1, the tasks pumping only while the q/k/v are outstanding; run 2 (ffd044d) RUN=2 FORM=2,
# the issuing warp pumping through the whole local attention.
set -uo pipefail
git apply measurements/2026-11-26-session26/local-attention-${FORM:-1}.patch || exit 1
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=${RUN:-1}
A=$OUT/run$R-ab-local.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python3 -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 5 7 200 --rounds 3 \
    --set base= --set local=MK_LOCAL_ATTENTION=1 \
    --out $OUT/run$R-ab-local.json 2>&1 | tee -a $A | grep -E "^p=|checks|wrote|NVIDIA|FAIL|built|rror"
date -u >> $A
for d in 0 1; do
  python3 -m kernels.megakernel.trace --variants dataflow_splitk_o --positions 1 --define MK_LOCAL_ATTENTION=$d \
      > $OUT/run$R-trace-local$d.txt 2>&1
  echo "== local $d"; grep -E 'per step|layer \(|rmsnorm|records|load attn|o gemv|lm head' $OUT/run$R-trace-local$d.txt | head -20
done
