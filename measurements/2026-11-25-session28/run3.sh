#!/usr/bin/env bash
# Session 28 run 3 (the same H100 as runs 1-2): run 2's whole directory ran past its 560 s limit, so
# the megakernel's gates alone, `pytest --gpu-perf tests/megakernel/test_perf.py`. The results folder
# is emptied first: run 2 copied the report run 1 had left on the machine.
set -uo pipefail
rm -rf /tmp/gpuperf-results
FAMILIES="tests/megakernel/test_perf.py" PYTEST_TIMEOUT=400 TAIL=40 \
    bash tools/device_session.sh perf 2>&1 | tee $OUT/run${RUN:-3}-log.txt | grep -E '^===|passed|failed|FAILED|XPASS|XFAIL|moved between|  tests/'
cp /tmp/gpuperf-results/perf.json $OUT/run${RUN:-3}-perf-report.json
