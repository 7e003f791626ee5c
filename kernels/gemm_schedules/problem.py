"""One GEMM problem on the device (random bf16 inputs, an output) and its launchers, for timing."""
from __future__ import annotations

import dataclasses
from typing import Any

from kernels.gemm_schedules.family import gemm_bytes, gemm_flops
from kernels.gemm_schedules.launch import CublasGemm, GemmLibrary, GemmPlan
from kernels.gemm_schedules.reference import make_inputs


@dataclasses.dataclass
class GemmProblem:
    """``out = a @ bt.T`` with device operands; every launcher made here writes ``out``."""

    a: Any
    bt: Any
    out: Any

    @classmethod
    def random(cls, m: int, n: int, k: int, seed: int = 0) -> "GemmProblem":
        """Seeded N(0, 1) bf16 inputs made on the device (never zeros: they run faster)."""
        import cupy

        a, bt = make_inputs(m, n, k, seed, xp=cupy)
        return cls(a, bt, cupy.empty((m, n), dtype=cupy.uint16))

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.a.shape[0], self.bt.shape[0], self.a.shape[1])

    @property
    def flops(self) -> int:
        return gemm_flops(*self.shape)

    @property
    def bytes(self) -> int:
        return gemm_bytes(*self.shape)

    def plan(self, library: GemmLibrary, *, max_swizzle: int = 1, raster: str = "heuristic") -> GemmPlan:
        """A CUTLASS plan; its ``launch`` only enqueues."""
        return library.plan(self.a, self.bt, self.out, max_swizzle=max_swizzle, raster=raster)

    def cublas(self) -> CublasGemm:
        """The cuBLAS baseline on the same buffers."""
        return CublasGemm(self.a, self.bt, self.out)
