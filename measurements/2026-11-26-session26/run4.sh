#!/usr/bin/env bash
# Session 26 run 4 (H100; RUN=5 on an H200): the committed kernel (e6d19c8's fold: the same sm_90
# instructions as session 24's but for two independent register zeroings swapped) as a user runs it:
# GPU correctness of the dataflow variants, then `pytest --gpu-perf` of the megakernel's perf suite
# against the stored baselines (tools/device_session.sh; $OUT/results.tgz holds the reports).
set -uo pipefail
MK_SELECT=dataflow FAMILIES=tests/megakernel/test_perf.py bash tools/device_session.sh env mkcorrect perf 2>&1 \
    | tee $OUT/run${RUN:-4}-perf-verify-log.txt | tail -3
