#!/usr/bin/env bash
# Session 25 run 2 (H200; RUN=3 on an H100): A/B at p = 1 / 200 / 1000 of session 24's kernel (base)
# against timing probes (their sums are wrong; ab times them as --probe):
#   pairs:     MK_PROBE_PAIR_ADDERS=1, 66 accumulator adders instead of 132 (as run 1);
#   pairs400:  the same, the even block waiting 400 cycles (about 0.2 us) before it adds, as a pair's
#              handshake over distributed shared memory would make it wait at worst;
#   pairs800:  800 cycles (about 0.4 us).
set -uo pipefail
git apply measurements/2026-11-25-session25/probes.patch || exit 1  # MK_PROBE_PAIR_ADDERS, MK_ACC_ROTATE (removed after the runs)
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=${RUN:-2}
A=$OUT/run$R-ab-pairs.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python3 -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 200 1000 --rounds 3 \
    --set base= --set pairs=MK_PROBE_PAIR_ADDERS=1 --set pairs400=MK_PROBE_PAIR_ADDERS=400 \
    --set pairs800=MK_PROBE_PAIR_ADDERS=800 --probe pairs --probe pairs400 --probe pairs800 \
    --out $OUT/run$R-ab-pairs.json 2>&1 | tee -a $A | grep -E "^p=|probe|wrote|NVIDIA|FAIL|built|rror"
date -u >> $A
