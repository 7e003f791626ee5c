#!/usr/bin/env bash
# Session 23 run 1: the unit's keys copied into shared memory at their layer's start (MK_UNIT_KEYS_SHARED,
# one bulk copy; the values still asked for in L2 and loaded during the q/k/v wait), A/B against the
# session-22 kernel (MK_UNIT_KEYS_SHARED=0) at p = 1 / 200 / 1000, then the traced step of both at p=1000.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=${RUN:-1}
A=$OUT/run$R-ab-unit-keys-shared.txt
(date -u; git log -1 --format=%H 2>/dev/null; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 200 1000 --rounds 3 \
    --set base=MK_UNIT_KEYS_SHARED=0 --set keys=MK_UNIT_KEYS_SHARED=1 ${EXTRA_SETS:-} \
    --out $OUT/run$R-ab-unit-keys-shared.json 2>&1 | tee -a $A | grep -E "^p=|checks|wrote|NVIDIA|FAIL|built|rror"
date -u >> $A
for k in 0 1; do
  python -m kernels.megakernel.trace --variants dataflow_splitk_o --positions 1000 \
      --define MK_UNIT_KEYS_SHARED=$k > $OUT/run$R-trace-keys$k.txt 2>&1
  echo "== keys shared $k"; grep -i -E 'unit|records|layer \(|per step' $OUT/run$R-trace-keys$k.txt | head -14
done
