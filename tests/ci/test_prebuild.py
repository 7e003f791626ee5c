"""What tests/conftest.py asks tests/prebuild.py to build ahead for the selected tests."""
from __future__ import annotations

import importlib
from pathlib import Path
from types import SimpleNamespace

import pytest

from kernels.megakernel.config import ModelConfig
from tests.conftest import _prebuild_tasks


def item(module: object, path: str = "tests/megakernel/test_x.py") -> SimpleNamespace:
    return SimpleNamespace(module=module, fixturenames=(), callspec=None, path=Path(path))


def test_run_time_modules_are_built_ahead_only_in_a_gpu_run() -> None:
    tests = SimpleNamespace(RUN_TIME_MODULES=("TINY", "QWEN3_0_6B"))
    items = [item(tests), item(tests), item(SimpleNamespace())]
    assert _prebuild_tasks(("sm_90",), items, on_gpu=True) == ["nvrtc:TINY", "nvrtc:QWEN3_0_6B"]
    assert _prebuild_tasks(("sm_90",), items, on_gpu=False) == []


@pytest.mark.parametrize("driver", [True, False])
def test_the_gemm_libraries_are_built_ahead_only_where_a_driver_can_run_them(
    monkeypatch: pytest.MonkeyPatch, driver: bool
) -> None:
    """Their tests skip without a GPU: on a CPU-only machine two CUTLASS builds (minutes of CPU)
    would run beside the default tier for nothing."""
    import tests.conftest

    monkeypatch.setattr(tests.conftest, "_driver_present", lambda: driver)
    gemm = SimpleNamespace(
        module=SimpleNamespace(),
        fixturenames=("load_gemm",),
        callspec=SimpleNamespace(params={"variant": "pingpong"}),
        path=Path("tests/gemm_schedules/test_correctness.py"),
    )
    expected = ["gemm_schedules.pingpong@sm_90a"] if driver else []
    assert _prebuild_tasks(("sm_90",), [gemm], on_gpu=False) == expected


@pytest.mark.parametrize("test_module", ["tests.megakernel.test_correctness", "tests.megakernel.test_perf"])
def test_listed_run_time_modules_name_model_shapes(test_module: str) -> None:
    from kernels.megakernel import config

    names = importlib.import_module(test_module).RUN_TIME_MODULES
    assert names and all(isinstance(getattr(config, name, None), ModelConfig) for name in names), names


def test_a_worker_waits_for_the_prebuild_until_it_ends_or_its_process_is_gone(tmp_path: Path) -> None:
    """Under xdist with --gpu-perf a worker's first GPU test waits for gw0's prebuild: until its
    marker appears, or the process named in its pid file is gone (a gw0 that crashed never writes
    the marker), or gw0 started none within GW0_START_S."""
    import os
    import subprocess
    import sys

    from tests.conftest import GW0_START_S, PID_NAME, _prebuild_over

    done = tmp_path / "tests-prebuild.done"
    assert not _prebuild_over(done, 1.0)
    assert _prebuild_over(done, GW0_START_S + 1)
    (tmp_path / PID_NAME).write_text(str(os.getpid()))
    assert not _prebuild_over(done, GW0_START_S + 1), "a running prebuild is waited for"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (tmp_path / PID_NAME).write_text(str(gone.pid))
    assert _prebuild_over(done, 1.0)
    done.touch()
    assert _prebuild_over(done, 0.0)
