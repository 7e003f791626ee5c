"""Shared by every test directory: the builds the selected tests need, started once they are collected.

One process (the only one, or xdist's worker gw0) starts tests/prebuild.py for the compile-time
tier's modules among the selected tests, the CUTLASS GEMMs first, and for the megakernel
emulator's libraries of the default run (see that file). The tests then find their builds in
the build cache, or wait on its lock for the build in progress.

Without --gpu-perf the builds run in the background, two at a time, beside the other tests.
With --gpu-perf in one process they run on every core and are waited for before the first test,
so no compile runs beside a measurement; under xdist with --gpu-perf gw0 runs them on every core
in the background, the tests that use no GPU run meanwhile, and each worker's first GPU test
waits until they have ended (a marker file in the run's temporary folder). GPU_PERF_TESTS_PREBUILD=0 turns it off.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
OFF_ENV = "GPU_PERF_TESTS_PREBUILD"
PREBUILD_KEY = pytest.StashKey[subprocess.Popen]()
PREBUILD_WAITED_KEY = pytest.StashKey[bool]()  # False once this process needs no more waiting
DONE_KEY = pytest.StashKey[Path]()
DONE_NAME, PID_NAME = "tests-prebuild.done", "tests-prebuild.pid"
GW0_START_S = 120.0  # a worker stops waiting for a prebuild that gw0 has not started by then
FINISH_WAIT_S = 900.0  # at most this long after the last test: longer than any build here, cold


def _prebuild_tasks(static_archs: tuple[str, ...], items: list[pytest.Item], on_gpu: bool = False) -> list[str]:
    """``module@arch`` for each compile-time tier build the selected tests need, CUTLASS first;
    ``on_gpu`` (a --gpu-perf run) adds the run-time NVRTC modules the selected test modules list."""
    from pytest_gpuperf._compile.cuda_module import CudaModule, arch_selected

    tasks: dict[str, int] = {}  # task -> priority: CUTLASS GEMMs, emulator libraries, the rest
    for item in items:
        params: dict[str, Any] = getattr(getattr(item, "callspec", None), "params", {})
        fixtures = getattr(item, "fixturenames", ())
        module, arch = params.get("module"), params.get("arch")
        if "gpu_static" in fixtures and isinstance(module, CudaModule) and isinstance(arch, str):
            if arch_selected(arch, static_archs):
                tasks.setdefault(f"{module.name}@{arch}", 0 if module.shared_library else 2)
        elif "load_gemm" in fixtures and isinstance(params.get("variant"), str) and _driver_present():
            from kernels.gemm_schedules.family import ARCH

            tasks.setdefault(f"gemm_schedules.{params['variant']}@{ARCH}", 0)
        libraries = getattr(getattr(item, "module", None), "EMULATOR_LIBRARIES", ())
        for index in range(len(libraries)):  # tests/megakernel/test_emulated.py
            tasks.setdefault(f"emulator:{item.path}:{index}", 1)
        for config_name in getattr(getattr(item, "module", None), "RUN_TIME_MODULES", ()) if on_gpu else ():
            tasks.setdefault(f"nvrtc:{config_name}", 0)
    return sorted(tasks, key=lambda task: tasks[task])  # stable: otherwise in the tests' order


def pytest_collection_finish(session: pytest.Session) -> None:
    from pytest_gpuperf._plugin.options import Settings

    config = session.config
    worker = getattr(config, "workerinput", None)
    if (worker is not None and worker.get("workerid") != "gw0") or config.option.collectonly:
        return
    settings = Settings.from_config(config)
    timing = settings.enabled
    # Under xdist with --gpu-perf the builds run in the background on every core while the tests
    # that use no GPU run; each worker's GPU tests wait for them (pytest_runtest_protocol below).
    background = not timing or worker is not None
    done = _prebuild_marker(config, DONE_NAME) if timing and worker is not None else None
    try:
        tasks = [] if _prebuild_off() else _prebuild_tasks(settings.static_archs, session.items, on_gpu=timing)
    except Exception:  # noqa: BLE001 - only an optimisation: the tests build what they need
        tasks = []
    if not tasks:
        if done is not None:
            done.touch()
        return
    root = str(HERE.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    if settings.device.isdigit():  # --gpu-perf-device N; "auto" without xdist is device 0
        from tests.prebuild import DEVICE_ENV

        env[DEVICE_ENV] = settings.device
    jobs = (os.cpu_count() or 2) if timing else 2
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "prebuild.py"), "--jobs", str(jobs), *tasks],
        cwd=os.getcwd(),  # the build cache's key holds the working folder: the tests' own
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group, so the nvcc it runs can be stopped with it
    )
    if background:
        config.stash[PREBUILD_KEY] = proc
        if done is not None:
            done.with_name(PID_NAME).write_text(str(proc.pid))
            config.stash[DONE_KEY] = done
            threading.Thread(target=_mark_when_done, args=(proc, done), daemon=True).start()
        return
    began = time.monotonic()
    try:
        proc.wait(timeout=FINISH_WAIT_S)
    except subprocess.TimeoutExpired:
        _stop(proc)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(
            f"tests/prebuild.py: {len(tasks)} builds for the selected tests on {jobs} cores in "
            f"{time.monotonic() - began:.0f} s, before any timing"
        )


def _driver_present() -> bool:
    """Whether the NVIDIA driver loads: the GEMM libraries serve GPU tests only, which skip without it."""
    import ctypes

    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def _prebuild_off() -> bool:
    return os.environ.get(OFF_ENV, "1").strip().lower() in ("0", "false", "no", "off")


def _prebuild_marker(config: pytest.Config, name: str) -> Path | None:
    """A file of gw0's prebuild (DONE_NAME once it has ended, PID_NAME while it runs) in the run's
    own temporary folder, the parent of every worker's basetemp, which only this user can write;
    None where there is no such folder (-p no:tmpdir)."""
    factory = getattr(config, "_tmp_path_factory", None)
    return None if factory is None else Path(factory.getbasetemp()).parent / name


def _mark_when_done(proc: subprocess.Popen, done: Path) -> None:
    try:
        proc.wait(timeout=FINISH_WAIT_S)
    except subprocess.TimeoutExpired:
        pass
    done.touch()


def _prebuild_over(done: Path, waited_s: float) -> bool:
    """Whether a waiting worker can go on: the prebuild has ended (its marker, or its process is
    gone, say with a gw0 that crashed), or gw0 never started one within GW0_START_S."""
    if done.exists():
        return True
    try:
        pid = int(done.with_name(PID_NAME).read_text())
    except (OSError, ValueError):
        return waited_s > GW0_START_S
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        pass
    return False


@pytest.hookimpl(wrapper=True, tryfirst=True)  # before the plugin takes a shared GPU in set-up
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """Under xdist with --gpu-perf, a worker's first test that uses the GPU waits for gw0's
    prebuild, so no GPU test holds the GPU while it compiles, and none times beside the builds."""
    config = item.config
    if config.stash.get(PREBUILD_WAITED_KEY, True) and _waits_for_prebuild(item):
        done = _prebuild_marker(config, DONE_NAME)
        began = time.monotonic()
        while done is not None and time.monotonic() - began < FINISH_WAIT_S:
            if _prebuild_over(done, time.monotonic() - began):
                break
            time.sleep(0.5)
        config.stash[PREBUILD_WAITED_KEY] = False
    return (yield)


def _waits_for_prebuild(item: pytest.Item) -> bool:
    """A GPU test on an xdist worker of a --gpu-perf run (the rest is decided once per process)."""
    from pytest_gpuperf._plugin.options import Settings
    from pytest_gpuperf.plugin import uses_gpu

    config = item.config
    if PREBUILD_WAITED_KEY not in config.stash:
        worker = getattr(config, "workerinput", None) is not None and not config.option.collectonly
        if not (worker and Settings.from_config(config).enabled):
            config.stash[PREBUILD_WAITED_KEY] = False
            return False
        config.stash[PREBUILD_WAITED_KEY] = True
    return uses_gpu(item)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under xdist, other workers' tests may still wait on a build in progress: a run that went
    through lets the prebuild finish; one stopped early (-x, Ctrl-C, an error) stops it."""
    proc = session.config.stash.get(PREBUILD_KEY, None)
    if proc is None or proc.poll() is not None:
        return
    went_through = exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    if went_through and not (session.shouldstop or session.shouldfail):
        try:
            proc.wait(timeout=FINISH_WAIT_S)
        except subprocess.TimeoutExpired:
            pass
    _stop(proc)


def pytest_unconfigure(config: pytest.Config) -> None:
    proc = config.stash.get(PREBUILD_KEY, None)
    if proc is not None:
        _stop(proc)
    done = config.stash.get(DONE_KEY, None)
    if done is not None:
        done.touch()  # the thread that marks it may not have run before the interpreter exits


def _stop(proc: subprocess.Popen) -> None:
    """Stop the prebuild's process group (it and the compilers it runs), if it still runs."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
