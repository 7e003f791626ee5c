#!/usr/bin/env bash
# Session 20 run 14 (H200): the perf suite against the committed baselines (run 11) and margins, on
# whatever H200 of the pool the call gets: does every gate hold on another machine?
set -uo pipefail
FAMILIES=tests/megakernel/test_perf.py bash tools/device_session.sh env perf 2>&1 | tee $OUT/run14-perf-verify-log.txt | tail -3
