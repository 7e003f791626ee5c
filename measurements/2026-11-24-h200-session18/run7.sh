#!/usr/bin/env bash
# Session 18 run 7 (H200, another machine): the perf suite against the baselines and margins of runs 5-6.
set -uo pipefail
FAMILIES=tests/megakernel/test_perf.py bash tools/device_session.sh env perf 2>&1 | tee $OUT/run7-perf-verify-log.txt | tail -45
