"""The compile-time tier for cluster_reduce: no GPU, only nvcc (the `compile` extra).

cluster_reduce.cu built for sm_90 (clusters need it) with launch.py's NVRTC options and name
expressions; budgets in baselines/static/cluster_reduce.json, no ptxas performance warning, and
in the SASS: the hardware cluster barrier, the DSMEM variants' generic loads of the neighbour's
shared memory, and the v8 variants' 16-byte global accesses. Re-record with
``pytest tests/cluster_reduce/test_static.py --gpu-perf-update-baselines``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from kernels.cluster_reduce.family import CUDA_MODULES
from pytest_gpuperf import CudaModule, static_params

pytestmark = pytest.mark.build

if TYPE_CHECKING:
    from pytest_gpuperf import GpuStatic


@pytest.mark.parametrize(("module", "arch"), static_params(CUDA_MODULES))
def test_static(gpu_static: GpuStatic, module: CudaModule, arch: str) -> None:
    gpu_static.check(module, arch)
