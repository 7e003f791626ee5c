#!/usr/bin/env bash
# Session 26 run 3 (H100): what the step's cold code costs. A/B at p = 1 / 200 / 1000 of
#   base: the committed kernel (MK_LONG_UNITS=0: attention_unit, the path of units longer than 64 keys,
#         inlined: used only past 1024 keys on 132 blocks, 1432 of variant 9's 9960 sm_90 instructions),
#   call: MK_LONG_UNITS=1, that path a __noinline__ call (the kernel then has a 128-byte stack frame),
#   none: MK_LONG_UNITS=2, that path removed (a trap; every position here is under 1024).
# Ran at commit 2a93f68; the probe is kept as long-units.patch against e6d19c8.
set -uo pipefail
git apply measurements/2026-11-26-session26/long-units.patch || exit 1
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=${RUN:-3}
A=$OUT/run$R-ab-cold-code.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python3 -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 200 1000 --rounds 3 \
    --set base= --set call=MK_LONG_UNITS=1 --set none=MK_LONG_UNITS=2 \
    --out $OUT/run$R-ab-cold-code.json 2>&1 | tee -a $A | grep -E "^p=|checks|wrote|NVIDIA|FAIL|built|rror"
date -u >> $A
