#!/usr/bin/env bash
# Session 25 runs 7-9: MK_ACC_PAIRS, dataflow_splitk_o's accumulator adders in pairs (the grid in
# clusters of 2; the odd block's partial written into the even block's shared memory, the even block
# publishing both). PATCH=pairs-release (run 7, H100): generic stores, then st.release.cluster of a
# sequence word; PATCH=pairs-st-async (RUN=8 on an H100, RUN=9 on an H200): st.async onto the even
# block's mbarrier. Both patches apply to commit 3336d77 and were removed after these runs. A/B at p = 1 / 200 / 1000: base (pairs, the working tree's
# default) against nopairs (MK_ACC_PAIRS=0: session 24's kernel, its sm_90 SASS bitwise).
set -uo pipefail
git apply measurements/2026-11-25-session25/${PATCH:-pairs-st-async}.patch || exit 1
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=${RUN:-7}
A=$OUT/run$R-ab-pairs.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python3 -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 200 1000 --rounds 3 \
    --set nopairs=MK_ACC_PAIRS=0 --set pairs= \
    --out $OUT/run$R-ab-pairs.json 2>&1 | tee -a $A | grep -E "^p=|checks|wrote|NVIDIA|FAIL|built|rror|p=  *[0-9]+ "
date -u >> $A
