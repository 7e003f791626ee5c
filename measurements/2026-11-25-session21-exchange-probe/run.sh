#!/usr/bin/env bash
# Session 21 runs 2-5 and 7 (RUN=N): the cluster probe (cluster_probe.cu beside this script): resident clusters of the
# megakernel's footprint, cooperative launches with clusters, and a flag's round trip between two
# blocks through L2 and through distributed shared memory, idle and under a bulk-copy weight stream.
set -uo pipefail
D=measurements/2026-11-25-session21-exchange-probe
if [ -z "${PAIRS:-}" ]; then
  nvcc -std=c++17 -arch=sm_90 -O3 $D/cluster_probe.cu -o /tmp/cluster_probe 2>&1 | tail -5
  (date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv; /tmp/cluster_probe) 2>&1 | tee $OUT/run${RUN:-2}-cluster-probe.txt
fi
# Probe 2 (pair_probe.cu, from run 14): the accumulator exchange with 132 adders against pairs that
# combine over distributed shared memory first (66 adders).
if [ -n "${PAIRS:-}" ]; then
  nvcc -std=c++17 -arch=sm_90 -O3 $D/pair_probe.cu -o /tmp/pair_probe 2>&1 | tail -5
  (date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv; timeout 120 /tmp/pair_probe) 2>&1 | tee $OUT/run${RUN:-2}-pair-probe.txt
fi
