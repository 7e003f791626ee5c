#!/usr/bin/env bash
# Session 22 run 8 (H200; RUN=9 on an H100): the committed defaults (the units' keys and values asked for
# in L2 at their layer's start, MK_UNIT_KV_PREFETCH=1): GPU correctness of the dataflow variants and the
# perf suite re-recording the baselines ($OUT/results.tgz); session 21's run10.sh. VERIFY=1: the perf
# suite against the stored baselines instead.
RUN=${RUN:-8} bash measurements/2026-11-25-h200-session21/run10.sh
