#!/usr/bin/env bash
# Session 21 run 11 (H100): the committed defaults (the LM head in groups of 2 pages): GPU correctness of
# the dataflow variants and the perf suite re-recording the H100 baselines ($OUT/results.tgz).
# With VERIFY=1 (runs 12, 13): the perf suite against the stored baselines instead, on another machine.
set -uo pipefail
STEPS="env mkcorrect update"; NAME=perf-update
if [ "${VERIFY:-0}" = 1 ]; then STEPS="env perf"; NAME=perf-verify; fi
MK_SELECT=dataflow FAMILIES=tests/megakernel/test_perf.py bash tools/device_session.sh $STEPS 2>&1 \
    | tee $OUT/run${RUN:-11}-$NAME-log.txt | tail -3
