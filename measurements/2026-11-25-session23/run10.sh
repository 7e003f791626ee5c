#!/usr/bin/env bash
# Session 23 run 10 (H200; RUN=11 on an H100): the committed defaults (the unit's keys in shared memory,
# and units of at most 8 keys computed by one warp per q head, MK_UNIT_WARP_KEYS=8): GPU correctness of
# the dataflow variants and the perf suite re-recording the baselines ($OUT/results.tgz); session 21's
# run10.sh. VERIFY=1 (runs 12, 13): the perf suite against the stored baselines instead, on another machine.
RUN=${RUN:-10} bash measurements/2026-11-25-h200-session21/run10.sh
