"""The CUTLASS builds compile cleanly: no GPU needed, only nvcc and the nvidia-cutlass headers.

Builds the two variants' configurations, one after the other. Cold nvcc cache, on the 2-core
development machine while other test runs shared it (nvcc 13.0): 88 s (pingpong) +
114 s (cooperative), 207 s wall for this file; about 0.3 s on a warm cache. So it is in the ``slow``
tier (the nightly CI job), with test_static.py. Skipped where nvcc or the headers are missing. All six configurations, including the sweep's alternatives:
``python -m kernels.gemm_schedules.build --jobs N``.
"""
from __future__ import annotations

from typing import Any, Callable

import pytest

from kernels.gemm_schedules.family import VARIANTS


pytestmark = pytest.mark.slow


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_build_has_no_ptxas_performance_warnings(load_gemm: Callable[[str], Any], variant: str) -> None:
    """C7510 (wgmma serialized), C7508 (setmaxnreg ignored) or spills would cost real speed."""
    from kernels.gemm_schedules.build import registers

    library = load_gemm(variant)
    assert library.build.perf_warnings == (), "\n".join(library.build.perf_warnings)
    assert registers(library.build), f"no ptxas resource report in the build log:\n{library.build.log}"
    assert library.config.schedule in library.describe()
