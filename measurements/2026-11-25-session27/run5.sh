#!/usr/bin/env bash
# Session 27 run 5 (H100): after the level-shift rule (every comparison) and qkv's accumulation check
# (run 4's two hypothesis failures): qkv's GPU correctness, the megakernel's dataflow correctness,
# then `pytest --gpu-perf` of the qkv and megakernel perf suites against the stored H100 baselines.
set -uo pipefail
MK_SELECT=dataflow FAMILIES="tests/qkv tests/megakernel/test_perf.py" PYTEST_TIMEOUT=480 TAIL=40 \
    bash tools/device_session.sh env mkcorrect perf 2>&1 | tee $OUT/run${RUN:-5}-log.txt | grep -E '^===|passed|failed|FAILED|XPASS|moved between|  tests/'
