#!/usr/bin/env bash
# Session 25 run 1 (H100): A/B at p = 1 / 200 / 1000 of
#   base:  the working tree (session 24's kernel with `keys_shared && u == b` folded into one lambda),
#   old:   session 24's kernel (d06f446, copied into build/old/ before the run),
#   pairs: a timing probe, MK_PROBE_PAIR_ADDERS=1: the odd blocks do not publish their accumulator
#          words and the even ones add twice the count, 66 adders instead of 132 (the sums are wrong,
#          so ab times it as a --probe). What clusters of 2 combining their words over distributed
#          shared memory could gain at most, before the pair's own handshake.
set -uo pipefail
git apply measurements/2026-11-25-session25/probes.patch || exit 1  # MK_PROBE_PAIR_ADDERS, MK_ACC_ROTATE (removed after the runs)
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=${RUN:-1}
A=$OUT/run$R-ab-pairs.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python3 measurements/2026-11-25-session24/ab_sources.py --variant dataflow_splitk_o --positions 1 200 1000 \
    --rounds 3 --set base= --set old=MK_SOURCE_OLD=1 --set pairs=MK_PROBE_PAIR_ADDERS=1 --probe pairs \
    --out $OUT/run$R-ab-pairs.json 2>&1 | tee -a $A | grep -E "^p=|checks|probe|wrote|NVIDIA|FAIL|built|rror"
date -u >> $A
