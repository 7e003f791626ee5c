#!/usr/bin/env bash
# Session 20 run 13 (H100): the perf suite against the committed baselines (run 12) and margins, on
# whatever H100 of the pool the call gets: does every gate hold on another machine?
set -uo pipefail
FAMILIES=tests/megakernel/test_perf.py bash tools/device_session.sh env perf 2>&1 | tee $OUT/run13-perf-verify-log.txt | tail -3
