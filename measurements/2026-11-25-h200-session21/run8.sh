#!/usr/bin/env bash
# Session 21 run 8 (H200; RUN=9 on an H100): the LM head in page groups of 2 or 1 instead of 3 (MK_LM_GROUP): with groups
# of 3 of the ring's 5 slots, the next group's third page is issued only once the group before it is
# computed, so every group waits for one just-issued page (the traced LM head streams ~4.25 TB/s; the
# probe streams 4.6 TB/s with 64 KB in flight per SM). Then the traced LM head of both builds, and the
# exchange probe on this H200 (its final version).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=${RUN:-8}
A=$OUT/run$R-ab-lm-group.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 200 1000 --rounds 3 \
    --set base= --set lmg2=MK_LM_GROUP=2 --set lmg1=MK_LM_GROUP=1 --set lmg2s3=MK_LM_GROUP=2,MK_LM_STATIC_CHUNKS=3 \
    --out $OUT/run$R-ab-lm-group.json 2>&1 | tee -a $A | grep -E "^p=|checks|wrote|NVIDIA|FAIL|built|rror"
date -u >> $A
for g in 3 2; do
  python -m kernels.megakernel.trace --variants dataflow_splitk_o --positions 1 --define MK_LM_GROUP=$g \
      > $OUT/run$R-trace-lm-group$g.txt 2>&1
  grep -i -E 'lm head|one layer|step' $OUT/run$R-trace-lm-group$g.txt | head -8
done
if [ "$R" = 8 ]; then RUN=8 bash measurements/2026-11-25-session21-exchange-probe/run.sh | grep -E 'bulk add|others:|cluster' ; fi
