"""The compile-time tier for qkv: no GPU, only nvcc (the `compile` extra).

qkv.cu built for sm_80 and sm_90 with launch.py's NVRTC options and name expressions; budgets in
baselines/static/qkv.json (qkv_strip_w2<4, *> at 64 registers is what lets four 256-thread
blocks share an SM), no ptxas performance warning, and the strip kernels' 16-byte loads and
stores in their SASS. Re-record with ``pytest tests/qkv/test_static.py --gpu-perf-update-baselines``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from kernels.qkv.family import CUDA_MODULES
from pytest_gpuperf import CudaModule, static_params

pytestmark = pytest.mark.build

if TYPE_CHECKING:
    from pytest_gpuperf import GpuStatic


@pytest.mark.parametrize(("module", "arch"), static_params(CUDA_MODULES))
def test_static(gpu_static: GpuStatic, module: CudaModule, arch: str) -> None:
    gpu_static.check(module, arch)
