#!/usr/bin/env bash
# Session 19 run 9 (H200): run 6's A/B (the dynamic LM head with 2 and 8 static chunks against the
# static split), then the GPU correctness of the dataflow variants and the perf suite re-recording
# the H200 baselines on the committed kernel (the dynamic LM head on by default, 2 static chunks).
# $OUT/results.tgz holds the reports and the re-recorded baselines.
set -uo pipefail
RUN=run9 bash measurements/2026-11-24-h200-session19/run6.sh 2>&1 | grep -E "^p=|checks|wrote|NVIDIA"
MK_SELECT=dataflow FAMILIES=tests/megakernel/test_perf.py bash tools/device_session.sh env mkcorrect update 2>&1 \
    | tee $OUT/run9-perf-update-log.txt | tail -3
