#!/usr/bin/env bash
# Session 20 run 11 (H200): the committed defaults (half loop, shared GEMV, the LM head's claimed
# chunks evicted first): GPU correctness of the dataflow variants and the perf suite re-recording the
# H200 baselines ($OUT/results.tgz).
set -uo pipefail
MK_SELECT=dataflow FAMILIES=tests/megakernel/test_perf.py bash tools/device_session.sh env mkcorrect update 2>&1 \
    | tee $OUT/run11-perf-update-log.txt | tail -3
