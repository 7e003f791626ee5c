#!/usr/bin/env bash
# Session 27 run 1 (H100): the four families other than the megakernel, which had only ever run on
# H200s (their sm90 margins and baselines are the H200's), as a user on an H100 runs them: every
# test of tests/timing, tests/examples and the four families' directories (GPU correctness, the
# compile-time tier, the interleaved gates), recording this GPU's baselines
# (`pytest --gpu-perf --gpu-perf-update-baselines`; tools/device_session.sh, $OUT/results.tgz).
# Needs the nvidia-cutlass wheel in .whl (carry: [".whl"]) for the GEMM family's headers.
set -uo pipefail
FAMILIES="tests/timing tests/examples tests/merge_attn_states tests/qkv tests/cluster_reduce tests/gemm_schedules" \
PYTEST_TIMEOUT=${PYTEST_TIMEOUT:-540} TAIL=120 bash tools/device_session.sh env ${STEPS:-update} 2>&1 \
    | tee $OUT/run${RUN:-1}-log.txt | tail -130
