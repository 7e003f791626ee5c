#!/usr/bin/env bash
# Session 22 run 5 (H100): run 4 found the unit's keys and values taking ~2 us to load at p=1000 (loaded
# after the q/k/v, the q/k/v wait fell from 3.0 to 1.5 us and the scores rose from 0.5 to 2.3 us). Here
# they are asked for in L2 first (MK_UNIT_KV_PREFETCH: 1 at the unit's start, 2 at its layer's start),
# with the loads before or after the q/k/v wait; then the traced step of 2 + late loads at p=1000.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=${RUN:-5}
A=$OUT/run$R-ab-unit-kv-prefetch.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 200 1000 --rounds 3 \
    --set base= --set pf1late=MK_UNIT_KV_PREFETCH=1,MK_UNIT_KV_LATE=1 --set pf2=MK_UNIT_KV_PREFETCH=2 \
    --set pf2late=MK_UNIT_KV_PREFETCH=2,MK_UNIT_KV_LATE=1 \
    --out $OUT/run$R-ab-unit-kv-prefetch.json 2>&1 | tee -a $A | grep -E "^p=|checks|wrote|NVIDIA|FAIL|built|rror"
date -u >> $A
python -m kernels.megakernel.trace --variants dataflow_splitk_o --positions 1000 \
    --define MK_UNIT_KV_PREFETCH=2 --define MK_UNIT_KV_LATE=1 > $OUT/run$R-trace-pf2late.txt 2>&1
grep -i -E 'unit|records|layer \(|per step' $OUT/run$R-trace-pf2late.txt | head -14
