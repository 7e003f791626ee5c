#!/usr/bin/env bash
# Session 25 run 3 (H100; RUN=4 on an H200): the accumulators' L2 contention, which runs 1-2's probe
# (half the adders: 1.3-3.0% faster) showed to be worth having. A/B at p = 1 / 200 / 1000 of session
# 24's kernel (base, 2 copies) against 3 and 4 copies (MK_ACC_COPIES, last measured in session 13:
# 0.997x / 0.984x of 2 at p=1, H200) and MK_ACC_ROTATE=1 (a copy's adders start their bulk reductions
# one 128-byte line apart, in two reductions, instead of all at the vector's first line).
set -uo pipefail
git apply measurements/2026-11-25-session25/probes.patch || exit 1  # MK_PROBE_PAIR_ADDERS, MK_ACC_ROTATE (removed after the runs)
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=${RUN:-3}
A=$OUT/run$R-ab-copies.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python3 -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 200 1000 --rounds 3 \
    --set base= --set copies3=MK_ACC_COPIES=3 --set copies4=MK_ACC_COPIES=4 --set rotate=MK_ACC_ROTATE=1 \
    --out $OUT/run$R-ab-copies.json 2>&1 | tee -a $A | grep -E "^p=|checks|wrote|NVIDIA|FAIL|built|rror"
date -u >> $A
