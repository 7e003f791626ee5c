#!/usr/bin/env bash
# Session 19 run 8 (H100): the GPU correctness of the dataflow variants and the perf suite re-recording
# the H100 baselines on the committed kernel (the dynamic LM head on by default, 2 static chunks).
# $OUT/results.tgz holds the reports and the re-recorded baselines.
set -uo pipefail
MK_SELECT=dataflow FAMILIES=tests/megakernel/test_perf.py bash tools/device_session.sh env mkcorrect update 2>&1 \
    | tee $OUT/run8-perf-update-log.txt | tail -45
