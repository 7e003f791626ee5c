#!/usr/bin/env bash
# Session 23 run 13 (H100): run 12 found the A/B's new check at position 0 failing with the warps' unit
# off too (MK_UNIT_WARP_KEYS=0, the k_cache row). Which change brought it: the checks (p = 0 / 7 / 600)
# of session 22's kernel (MK_UNIT_KEYS_SHARED=0), of no K/V prefetch either, and of the current defaults;
# then the GPU correctness tests of dataflow_splitk_o through tools/device_session.sh.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=${RUN:-13}
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 --rounds 1 \
    --set s22=MK_UNIT_KEYS_SHARED=0 --set nopf=MK_UNIT_KEYS_SHARED=0,MK_UNIT_KV_PREFETCH=0 --set cur= \
    --out $OUT/run$R-ab-checks.json 2>&1 | tee $OUT/run$R-ab-checks.txt | grep -E "^p=|PASS|FAIL|checks|wrote|rror"
MK_SELECT=dataflow_splitk_o TAIL=12 bash tools/device_session.sh mkcorrect 2>&1 | tee $OUT/run$R-correctness.txt | tail -8
