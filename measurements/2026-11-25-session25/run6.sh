#!/usr/bin/env bash
# Session 25 run 6 (H100): what launching the grid in clusters of 2 costs by itself, before any pair
# combines its accumulator words over distributed shared memory (runs 1-2 bound that combine's gain).
# cluster-probe.patch adds MK_CLUSTER_DIMS (a __cluster_dims__ attribute on the kernel, nothing else
# changed) and MK_PROBE_NONCOOP=1 (launch.py without the cooperative flag). A/B at p = 1 / 200 / 1000:
#   1. cooperative launches (the project's): base against cl2=MK_CLUSTER_DIMS=2;
#   2. if CuPy's cooperative launch refuses a kernel with a cluster dimension: the same, both
#      launched without the cooperative flag.
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD GPU_PERF_CACHE_DIR=$PWD/.build-cache
git apply measurements/2026-11-25-session25/cluster-probe.patch || exit 1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
R=${RUN:-6}
for mode in coop noncoop; do
  A=$OUT/run$R-ab-cluster-$mode.txt
  (date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,temperature.gpu --format=csv) > $A
  [ $mode = noncoop ] && export MK_PROBE_NONCOOP=1
  echo "== $mode launches"
  python3 -m kernels.megakernel.ab --variant dataflow_splitk_o --positions 1 200 1000 --rounds 3 \
      --set base= --set cl2=MK_CLUSTER_DIMS=2 \
      --out $OUT/run$R-ab-cluster-$mode.json 2>&1 | tee -a $A | grep -E "^p=|checks|wrote|NVIDIA|FAIL|built|rror|cluster" | tail -12
  rc=${PIPESTATUS[0]}
  date -u >> $A
  [ $rc = 0 ] && break
done
