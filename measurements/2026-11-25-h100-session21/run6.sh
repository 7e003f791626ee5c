#!/usr/bin/env bash
# Session 21 run 6 (H100): smaller weight pages (MK_PAGE_BYTES), so fewer bytes are in flight per block
# while blocks exchange. The cluster probe (runs 2-5) found an L2 round trip between two blocks of
# 1.18 us on the H100 while every other SM has one 32 KB bulk copy in flight (0.54 us idle), 0.81 us
# at 16 KB and 0.74 us at 3 x 8 KB; on the H200 0.54 us up to 48 KB.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
A=$OUT/run${RUN:-6}-ab-page-bytes.txt
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
python -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 200 1000 --rounds 3 \
    --set base= --set p16=MK_PAGE_BYTES=16384 --set p16pace2=MK_PAGE_BYTES=16384,MK_SPLITK_PACED_IN_FLIGHT=2 \
    --set p8pace3=MK_PAGE_BYTES=8192,MK_SPLITK_PACED_IN_FLIGHT=3 --set p8pace4=MK_PAGE_BYTES=8192,MK_SPLITK_PACED_IN_FLIGHT=4 \
    --out $OUT/run${RUN:-6}-ab-page-bytes.json 2>&1 | tee -a $A | grep -E "^p=|checks|wrote|NVIDIA|FAIL|built|rror"
date -u >> $A
