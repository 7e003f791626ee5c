#!/usr/bin/env bash
# Session 19 run 10 (H200): the perf suite on another machine against the baselines re-recorded in
# this session (H200 run 9, H100 run 8), with family.py's margins and shortfalls set from them.
set -uo pipefail
FAMILIES=tests/megakernel/test_perf.py bash tools/device_session.sh env perf 2>&1 \
    | tee $OUT/run10-perf-verify-log.txt | tail -3
