"""The compile-time tier for the CUTLASS GEMMs: no GPU, only nvcc and the nvidia-cutlass headers.

Each variant's shared library is built exactly as launch.build_config builds it, so this test and
test_build.py / the GPU tests share one nvcc cache entry (a cold CUTLASS build takes 1-2 minutes
on two cores; never twice). Gated: registers, spills and stack against
baselines/static/gemm_schedules.json; no ptxas performance warning, above all C7510 (wgmma
serialized across a function call, which device asserts cause when CUTLASS is built without
-DNDEBUG: Ping-pong lost 30-45% of its throughput on an H200); HGMMA and USETMAXREG in the SASS.

In the ``slow`` tier (the nightly CI job; CI's GPU job builds both anyway): two cold CUTLASS builds
are about 200 s of nvcc on one core, more than the whole default run may take. The rules they
check (budgets, ptxas performance warnings such as C7510, SASS facts) stay in the default run
through the other families' modules and tests/plugin/test_static_tier.py.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from kernels.gemm_schedules.family import CUDA_MODULES
from pytest_gpuperf import CudaModule, static_params

if TYPE_CHECKING:
    from pytest_gpuperf import GpuStatic


pytestmark = [pytest.mark.build, pytest.mark.slow]


@pytest.mark.parametrize(("module", "arch"), static_params(CUDA_MODULES))
def test_static(gpu_static: GpuStatic, module: CudaModule, arch: str) -> None:
    result = gpu_static.check(module, arch)
    assert "-DNDEBUG" in result.command, "CUTLASS built without -DNDEBUG: its device asserts cause C7510"
    assert result.perf_warnings == (), "\n".join(result.perf_warnings)
    assert any("HGMMA" in text for text in result.sass.values())
