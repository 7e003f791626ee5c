#!/usr/bin/env bash
# Session 28 run 1 (H100): the final code as a user runs it, every test directory but the
# megakernel's: `pytest --gpu-perf tests --ignore=tests/megakernel` against the stored baselines
# (tools/device_session.sh; needs the nvidia-cutlass wheel in .whl, carry: [".whl"]).
set -uo pipefail
FAMILIES="tests --ignore=tests/megakernel" PYTEST_TIMEOUT=560 TAIL=60 \
    bash tools/device_session.sh env perf 2>&1 | tee $OUT/run${RUN:-1}-log.txt | tail -70
cp /tmp/gpuperf-results/perf.json $OUT/run${RUN:-1}-perf-report.json
