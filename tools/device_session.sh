#!/usr/bin/env bash
# One batched session on the lent GPU: set up offline, check the timing engine, sweep the
# kernel families, run the suite. Everything lands in $OUT/log.txt and $OUT/results.tgz.
# Usage (from the repo root on the GPU machine): bash tools/device_session.sh STEP...
#   steps: env timing sweeps correctness perf update megakernel mkquick mkcorrect counters xdist
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/gpuperf-out}
RES=/tmp/gpuperf-results
mkdir -p "$OUT" "$RES"
export GPU_PERF_CACHE_DIR=$PWD/.build-cache
export CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$(command -v nvcc)")")}
PY=python3
T0=$(date +%s)
stamp() { echo "=== [$(( $(date +%s) - T0 ))s] $*"; }

setup() {
  if ls .whl/*.whl >/dev/null 2>&1; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
  fi
  export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
  $PY -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tail -2
}

step_env() {
  stamp env
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.sm,temperature.gpu,power.limit --format=csv
  nvcc --version | tail -2
  $PY - <<'PY'
import importlib
for m in ("cupy", "numpy", "scipy", "pytest", "hypothesis", "filelock", "pynvml", "xdist", "pytest_benchmark", "torch", "transformers"):
    try:
        mod = importlib.import_module(m); print(m, getattr(mod, "__version__", "?"))
    except Exception as e:
        print(m, "MISSING", e)
import cupy; p = cupy.cuda.runtime.getDeviceProperties(0); print(p["name"], p["multiProcessorCount"], p["l2CacheSize"])
PY
}

run_pytest() { # name, args...
  local name=$1; shift
  stamp "pytest $name: $*"
  timeout "${PYTEST_TIMEOUT:-300}" $PY -m pytest -p no:cacheprovider -q -rfEs "$@" --gpu-perf-json "$RES/$name.json" --junitxml "$RES/$name.xml" 2>&1 | tail -n "${TAIL:-60}"
}

step_timing() { run_pytest timing tests/timing --gpu-perf; }

step_sweeps() {
  for fam in ${SWEEP_FAMILIES:-merge_attn_states qkv cluster_reduce gemm_schedules}; do
    stamp "sweep $fam"
    timeout "${SWEEP_TIMEOUT:-150}" $PY -m kernels.$fam.sweep --out "$RES/sweep_$fam.json" ${SWEEP_ARGS:-} 2>&1 | tail -n "${SWEEP_TAIL:-70}"
  done
}

step_correctness() { run_pytest correctness ${FAMILIES:-tests/merge_attn_states tests/qkv tests/cluster_reduce tests/gemm_schedules}; }
step_perf() { run_pytest perf ${FAMILIES:-tests} --gpu-perf; }
step_update() { run_pytest update ${FAMILIES:-tests} --gpu-perf --gpu-perf-update-baselines; }
step_counters() {
  run_pytest counters tests/qkv/test_counters.py --gpu-perf-counters -s
  stamp "hw01 table"
  timeout 240 $PY -m kernels.qkv.hw01_table --out "$RES/hw01_qkv.json" 2>&1 | tail -n 60
}
step_xdist() {  # issue 6: one worker per GPU, merged reports and baseline updates
  nvidia-smi -L
  local sel=(tests/timing/test_accuracy.py tests/merge_attn_states/test_perf.py -k "a_a_comparison or vectorized_vs_baseline")
  run_pytest xdist_update -n "${XDIST_N:-2}" --gpu-perf --gpu-perf-update-baselines --gpu-perf-baselines /tmp/xdist-baselines "${sel[@]}"
  run_pytest xdist_check -n "${XDIST_N:-2}" --gpu-perf --gpu-perf-baselines /tmp/xdist-baselines "${sel[@]}"
  cp -r /tmp/xdist-baselines "$RES/xdist-baselines"
  $PY - "$RES" <<'PY'
import collections, json, sys
for name in ("xdist_update", "xdist_check"):
    report = json.load(open(f"{sys.argv[1]}/{name}.json"))
    per_gpu = collections.Counter(m["gpu_ordinal"] for t in report["tests"] for m in t["measurements"])
    print(name, "measurements per GPU ordinal:", dict(per_gpu), "summary:", report["summary"])
PY
}
# Quick megakernel loop: the GPU correctness tests of MK_SELECT, then the sweep of MK_VARIANTS.
step_mkquick() {
  run_pytest mk_quick tests/megakernel/test_correctness.py -k "${MK_SELECT:-fused_ring or shared_memory}"
  SWEEP_FAMILIES=megakernel SWEEP_TIMEOUT=240 SWEEP_ARGS="--skip-hf --variants ${MK_VARIANTS:-fused head_based fused_ring} --positions ${MK_POSITIONS:-1 200 1000}" step_sweeps
}
step_mkcorrect() { run_pytest mk_correct tests/megakernel/test_correctness.py -k "${MK_SELECT:-dataflow or shared_memory}"; }
step_megakernel() { run_pytest mk_correctness tests/megakernel; SWEEP_FAMILIES=megakernel SWEEP_TIMEOUT=240 step_sweeps; }

setup
for s in "$@"; do "step_$s"; done
stamp done
cp -r baselines "$RES/" 2>/dev/null
tar czf "$OUT/results.tgz" -C "$RES" .
