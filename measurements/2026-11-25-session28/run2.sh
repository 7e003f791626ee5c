#!/usr/bin/env bash
# Session 28 run 2: the megakernel's whole test directory as a user runs it, `pytest --gpu-perf
# tests/megakernel` (GPU correctness of all ten variants, the gates, the transformers peer).
set -uo pipefail
FAMILIES="tests/megakernel" PYTEST_TIMEOUT=560 TAIL=60 \
    bash tools/device_session.sh env perf 2>&1 | tee $OUT/run${RUN:-2}-log.txt | tail -70
cp /tmp/gpuperf-results/perf.json $OUT/run${RUN:-2}-perf-report.json
