#!/usr/bin/env bash
# Session 23 run 14 (H200; RUN=15 on an H100): the committed defaults after run 13 (the unit's keys in
# shared memory, units of at most 8 keys computed by one warp per q head with its lanes-past-the-keys fix,
# the KV rows' floor 1e-2): GPU correctness of the dataflow variants and the perf suite re-recording the
# baselines ($OUT/results.tgz); session 21's run10.sh. VERIFY=1 (runs 16, 17): the perf suite against the
# stored baselines instead, on another machine.
RUN=${RUN:-14} bash measurements/2026-11-25-h200-session21/run10.sh
