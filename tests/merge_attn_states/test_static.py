"""The compile-time tier for merge_attn_states: no GPU, only nvcc (the `compile` extra).

merge_attn_states.cu built for sm_80 and sm_90 with the options and name expressions launch.py
gives NVRTC; registers, spills, shared memory and stack against baselines/static/
merge_attn_states.json, no ptxas performance warning, and the vectorized kernel's 16-byte
global loads and stores (LDG.E.128 / STG.E.128) in its SASS. Re-record the budgets with
``pytest tests/merge_attn_states/test_static.py --gpu-perf-update-baselines``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from kernels.merge_attn_states.family import CUDA_MODULES
from pytest_gpuperf import CudaModule, static_params

pytestmark = pytest.mark.build

if TYPE_CHECKING:
    from pytest_gpuperf import GpuStatic


@pytest.mark.parametrize(("module", "arch"), static_params(CUDA_MODULES))
def test_static(gpu_static: GpuStatic, module: CudaModule, arch: str) -> None:
    gpu_static.check(module, arch)
