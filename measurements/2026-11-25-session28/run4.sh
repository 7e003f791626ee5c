#!/usr/bin/env bash
# Session 28 run 4 (H100): after the sampler computes a comparison's paired ratios once
# (stats.paired_ratios; values unchanged), the timing engine's own GPU tests and the README example:
# `pytest --gpu-perf tests/timing tests/examples`.
set -uo pipefail
rm -rf /tmp/gpuperf-results
FAMILIES="tests/timing tests/examples" PYTEST_TIMEOUT=240 TAIL=15 \
    bash tools/device_session.sh env perf 2>&1 | tee $OUT/run${RUN:-4}-log.txt | tail -20
cp /tmp/gpuperf-results/perf.json $OUT/run${RUN:-4}-perf-report.json
