#!/usr/bin/env bash
# Session 20 run 12 (H100): the LM head's claimed chunks with an L2 evict_first policy (the default
# since run 9 on the H200) against without, A/B; then, on the committed defaults, the GPU correctness
# of the dataflow variants and the perf suite re-recording the H100 baselines ($OUT/results.tgz).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
A=$OUT/run12-ab-lm-evict-first.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 200 1000 --rounds 3 \
    --set noef=MK_LM_EVICT_FIRST=0 --set lmef= \
    --out $OUT/run12-ab-lm-evict-first.json 2>&1 | tee -a $A | grep -E "^p=|checks|wrote|NVIDIA|FAIL"
MK_SELECT=dataflow FAMILIES=tests/megakernel/test_perf.py bash tools/device_session.sh env mkcorrect update 2>&1 \
    | tee $OUT/run12-perf-update-log.txt | tail -3
