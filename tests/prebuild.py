"""Fill the build cache with what the selected tests will build.

tests/conftest.py starts ``python tests/prebuild.py [--jobs N] TASK ...`` once per run (one process, not
one per xdist worker) for the compile-time tier's modules among the selected tests
(``MODULE@ARCH``: the CUTLASS GEMMs and the megakernel take 15-60 s each on one core, cold) and
for the megakernel emulator's libraries that a selected test module lists in
EMULATOR_LIBRARIES (``emulator:FILE:INDEX``, about 4 s of g++ each); in a run with --gpu-perf
also the megakernel's NVRTC modules that a selected test module lists in RUN_TIME_MODULES
(``nvrtc:CONFIG``, into CuPy's on-disk cache). Each is built exactly as
the test builds it (``compile_module`` as ``gpu_static.check`` calls it; ``build_library`` as
``emulate_decode`` does, ``decode_module`` as ``Megakernel`` does: same flags, same working
folder, same environment), so the test finds
it in the content-addressed cache, or waits on the cache's lock while it is being built instead
of building it a second time. Without --gpu-perf the other tests run meanwhile (on two cores,
the builds no longer leave one core idle); with --gpu-perf it runs on every core and the run
waits for it before the first test, so nothing compiles beside a measurement.

Nothing here decides a test's outcome: a build that fails or is stopped is built again by its
test, which reports the error. GPU_PERF_TESTS_PREBUILD=0 turns it off.
"""
from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

FAMILIES = ("cluster_reduce", "gemm_schedules", "megakernel", "merge_attn_states", "qkv")
JOBS = 2  # beside the tests on a 2-core machine; a --gpu-perf run passes --jobs <cores>
DEVICE_ENV = "GPU_PERF_PREBUILD_DEVICE"  # the CUDA ordinal a --gpu-perf run times on (NVRTC builds for it)


def modules() -> dict[str, object]:
    """Every family's CudaModule by name."""
    found: dict[str, object] = {}
    for family in FAMILIES:
        for module in importlib.import_module(f"kernels.{family}.family").CUDA_MODULES:
            found[module.name] = module
    return found


def build_emulator_library(test_file: str, index: int) -> None:
    """Entry ``index`` of the test module's EMULATOR_LIBRARIES, as emulate_decode builds it."""
    from kernels.megakernel.emulator import build_library

    spec = importlib.util.spec_from_file_location("prebuild_emulator_tests", test_file)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {test_file}")
    tests = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tests)
    config, own_grid_barrier, defines = tests.EMULATOR_LIBRARIES[index]
    build_library(config, own_grid_barrier, tuple(defines))


def load_run_time_module(config_name: str) -> None:
    """The megakernel's NVRTC module for one model shape, as ``Megakernel`` loads it, so CuPy's
    on-disk cache holds it when the test asks (about 30 s of NVRTC each, cold). Needs a GPU."""
    import os

    import cupy

    from kernels.megakernel import config
    from kernels.megakernel.family import VARIANTS
    from kernels.megakernel.launch import decode_module, kernel_name

    cupy.cuda.Device(int(os.environ.get(DEVICE_ENV, "0"))).use()  # the run's GPU: its arch is in the key
    decode_module(getattr(config, config_name)).get_function(kernel_name(VARIANTS[0]))


def main(tasks: list[str], jobs: int = JOBS) -> int:
    from pytest_gpuperf._compile.cubin import compile_module

    by_name = modules()

    def build(task: str) -> None:
        try:
            if task.startswith("nvrtc:"):  # a process of its own: NVRTC compiles side by side
                subprocess.run([sys.executable, __file__, "--nvrtc", task.removeprefix("nvrtc:")], check=True)
            elif task.startswith("emulator:"):
                test_file, _, index = task.removeprefix("emulator:").rpartition(":")
                build_emulator_library(test_file, int(index))
            else:
                name, _, arch = task.partition("@")
                compile_module(by_name[name], arch)
        except Exception as exc:  # noqa: BLE001 - the test builds it again and reports the error
            print(f"prebuild {task}: {type(exc).__name__}: {exc}", file=sys.stderr)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(build, tasks))
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--nvrtc"]:
        load_run_time_module(args[1])
        sys.exit(0)
    jobs = JOBS
    if args[:1] == ["--jobs"]:
        jobs, args = max(1, int(args[1])), args[2:]
    sys.exit(main(args, jobs))
