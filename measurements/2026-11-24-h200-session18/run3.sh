#!/usr/bin/env bash
# Session 18 run 3 (H200): half O slices for the unit blocks, the rest on the 4 spare blocks, while one
# unit per kv head runs (MK_O_LIGHT), and the down slice asked for in L2 after the QKV (pf1) or O (pf2)
# projection (MK_DOWN_L2_PREFETCH): A/B against the default (O light on, no prefetch), the trace with
# raw cycles, the GPU correctness of the dataflow variants.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
A=$OUT/run3-ab-olight-downpf.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 10 50 200 1000 --rounds 3 \
    --set base= --set olight0=MK_O_LIGHT=0 --set pf1=MK_DOWN_L2_PREFETCH=1 --set pf2=MK_DOWN_L2_PREFETCH=2 \
    --out $OUT/run3-ab-olight-downpf.json 2>&1 | tee -a $A
python -m kernels.megakernel.trace --variants dataflow_splitk_o --positions 1 200 --subphases qkv \
    --out $OUT/run3-trace.json --raw $OUT/run3-trace-raw.npz 2>&1 | tee $OUT/run3-trace.txt
python -m kernels.megakernel.trace --variants dataflow_splitk_o --positions 1 200 --subphases qkv \
    --define MK_DOWN_L2_PREFETCH=2 --out $OUT/run3-trace-pf2.json --raw $OUT/run3-trace-pf2-raw.npz 2>&1 | tee $OUT/run3-trace-pf2.txt
MK_SELECT=dataflow OUT=/tmp/o timeout 240 bash tools/device_session.sh mkcorrect 2>&1 | tail -30 | tee $OUT/run3-correctness-log.txt
