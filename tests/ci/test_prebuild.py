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


@pytest.mark.parametrize("test_module", ["tests.megakernel.test_correctness", "tests.megakernel.test_perf"])
def test_listed_run_time_modules_name_model_shapes(test_module: str) -> None:
    from kernels.megakernel import config

    names = importlib.import_module(test_module).RUN_TIME_MODULES
    assert names and all(isinstance(getattr(config, name, None), ModelConfig) for name in names), names
