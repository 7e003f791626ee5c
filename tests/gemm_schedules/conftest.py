"""Shared fixtures: the built GEMM libraries (built once, then served from the nvcc cache)."""
from __future__ import annotations

from typing import Any, Callable

import pytest


@pytest.fixture(scope="session")
def load_gemm() -> Callable[[str], Any]:
    """``load_gemm(variant)`` returns the variant's library; skips when nvcc or CUTLASS is missing."""
    from kernels.gemm_schedules.launch import CutlassNotFound, load_variant
    from pytest_gpuperf._compile.nvcc import NvccNotFound

    def load(variant: str) -> Any:
        try:
            return load_variant(variant)
        except (NvccNotFound, CutlassNotFound) as exc:
            pytest.skip(f"cannot build the CUTLASS GEMM here: {exc}")

    return load
