#!/usr/bin/env bash
# Session 26 run 6 (H100): local attention without its code's duplicate. local-attention-3.patch (against
# e6d19c8) makes MK_LOCAL_ATTENTION a key count (local at p < it) and lets it run with the warp units
# compiled out (MK_UNIT_WARP_KEYS=0), so the step carries one short-unit path instead of two.
# A/B at p = 1 / 5 / 200 / 1000 of
#   old:    the committed kernel (e6d19c8, its source in build/old/, carried),
#   base:   the patched source with its defaults (local off; its SASS is not e6d19c8's: register allocation),
#   w0:     MK_UNIT_WARP_KEYS=0 (no warp units, no local attention: the control for lw0 at p >= 8),
#   local:  MK_LOCAL_ATTENTION=8 (run 2's form, the warp units kept),
#   lw0:    MK_LOCAL_ATTENTION=8 with MK_UNIT_WARP_KEYS=0.
set -uo pipefail
git apply measurements/2026-11-26-session26/local-attention-3.patch || exit 1
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=${RUN:-6}
A=$OUT/run$R-ab-local-w0.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python3 measurements/2026-11-25-session24/ab_sources.py --variant dataflow_splitk_o --positions 1 5 200 1000 \
    --rounds 3 --set old=MK_SOURCE_OLD=1 --set base= --set w0=MK_UNIT_WARP_KEYS=0 \
    --set local=MK_LOCAL_ATTENTION=8 --set lw0=MK_LOCAL_ATTENTION=8,MK_UNIT_WARP_KEYS=0 \
    --out $OUT/run$R-ab-local-w0.json 2>&1 | tee -a $A | grep -E "^p=|checks|wrote|NVIDIA|FAIL|built|rror"
date -u >> $A
