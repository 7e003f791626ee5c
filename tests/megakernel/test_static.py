"""The compile-time tier for the megakernel: no GPU, only nvcc (the `compile` extra).

megakernel.cu (Qwen3-0.6B shape, as the perf tests build it) and grid_sync_cost.cu for sm_80 and
sm_90; budgets in baselines/static/megakernel.json (__launch_bounds__(512, 1) allows 128
registers; the budget holds each variant to what it uses now, with no spills), no ptxas
performance warning, 16-byte L1-bypassing weight loads (LDG.E.NA.128.CONSTANT) in every variant
and the bulk L2 prefetch (UBLKPF.L2) in fused_prefetch on sm_90. The decode kernel takes 40-80 s of
nvcc per architecture on one core, cold, so its two builds are in the ``slow`` tier (the nightly CI
job, and CI's GPU job, which builds it anyway); grid_sync_cost.cu, and the other families' modules,
keep the compile-time tier's rules in the default run. Re-record with ``pytest tests/megakernel/test_static.py --gpu-perf-update-baselines``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from kernels.megakernel.family import CUDA_MODULES
from pytest_gpuperf import CudaModule, static_params

pytestmark = pytest.mark.build

if TYPE_CHECKING:
    from pytest_gpuperf import GpuStatic


SLOW_MODULES = {"megakernel.decode"}
PARAMS = [pytest.param(*p.values, id=p.id, marks=[*p.marks, pytest.mark.slow] if p.values[0].name in SLOW_MODULES else p.marks)
          for p in static_params(CUDA_MODULES)]


@pytest.mark.parametrize(("module", "arch"), PARAMS)
def test_static(gpu_static: GpuStatic, module: CudaModule, arch: str) -> None:
    gpu_static.check(module, arch)
