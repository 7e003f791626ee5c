#!/usr/bin/env bash
# Session 20 run 4 (H200): the committed defaults (half loop and shared GEMV on; the one-call-site q/k/v
# tasks removed after run 3): GPU correctness of the dataflow variants and the perf suite re-recording
# the H200 baselines ($OUT/results.tgz).
set -uo pipefail
MK_SELECT=dataflow FAMILIES=tests/megakernel/test_perf.py bash tools/device_session.sh env mkcorrect update 2>&1 \
    | tee $OUT/run4-perf-update-log.txt | tail -3
