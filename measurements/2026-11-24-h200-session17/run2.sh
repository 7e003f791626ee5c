#!/usr/bin/env bash
# Session 17 run 2 (H200): is the megakernel's per-layer code fetched from L2 again every layer?
# a) the unit probe (MK_TRACE_UNIT_PROBE): the attention unit's scores/softmax/P.V timed twice in a
#    row, after its K/V loads landed: pass 1 runs code last run a layer ago, pass 2 the same code again;
# b) ncu warp-state sampling and executed instructions per SASS instruction of one step, and the cubin
#    (for nvdisasm's line table), to find the per-layer code footprint and where no_instruction stalls fall.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache CUPY_CACHE_DIR=/tmp/cupycache
pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
(date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; ncu --version | tail -1) | tee $OUT/run2-log.txt
python -m kernels.megakernel.trace --variants dataflow_splitk_o --positions 1 200 --subphases qkv \
    --define MK_TRACE_UNIT_PROBE=1 --out $OUT/run2-trace-unit-probe.json 2>&1 | tee $OUT/run2-trace-unit-probe.txt
touch /tmp/marker
ncu --section SourceCounters --section WarpStateStats -k regex:megakernel_decode --launch-skip 4 --launch-count 1 \
    -o /tmp/r python3 tools/profile_megakernel_step.py dataflow_splitk_o 1 2>&1 | tail -5 | tee -a $OUT/run2-log.txt
ncu --import /tmp/r.ncu-rep --page source --csv --print-source sass > /tmp/src.csv 2>>$OUT/run2-log.txt
gzip -c /tmp/src.csv > $OUT/run2-ncu-source.csv.gz
ncu --import /tmp/r.ncu-rep --page details --csv > $OUT/run2-ncu-details.csv 2>>$OUT/run2-log.txt
find /tmp/cupycache -type f -newer /tmp/marker -size +500k -printf '%s %p\n' | sort -n | tee -a $OUT/run2-log.txt
cp "$(find /tmp/cupycache -type f -newer /tmp/marker -size +500k -printf '%s %p\n' | sort -n | tail -1 | cut -d' ' -f2)" $OUT/run2-lineinfo.cubin
head -c 1500 /tmp/src.csv; echo; ls -la $OUT
