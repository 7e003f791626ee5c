#!/usr/bin/env bash
# Session 23 run 4 (H200; RUN=5 on an H100): the committed defaults (the unit's keys in shared memory,
# MK_UNIT_KEYS_SHARED=1): GPU correctness of the dataflow variants and the perf suite re-recording the
# baselines ($OUT/results.tgz); session 21's run10.sh. VERIFY=1 (runs 6, 7): the perf suite against the
# stored baselines instead, on another machine.
RUN=${RUN:-4} bash measurements/2026-11-25-h200-session21/run10.sh
