#!/usr/bin/env bash
# Session 24 run 3 (H100; RUN=4 on an H200): the committed defaults after runs 1-2 (unit_record and
# unit_on_warps folded; the per-warp softmax measured and removed, so variant 9's SASS is run 1's ws0):
# GPU correctness of the dataflow variants and the perf suite re-recording the baselines
# ($OUT/results.tgz); session 21's run10.sh. VERIFY=1 (runs 5, 6): the perf suite against the stored
# baselines instead, on another machine.
RUN=${RUN:-3} bash measurements/2026-11-25-h200-session21/run10.sh
