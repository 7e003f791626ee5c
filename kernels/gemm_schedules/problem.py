"""One GEMM problem on the device (random bf16 inputs, an output) and its launchers, for timing."""
from __future__ import annotations

import dataclasses
from typing import Any

from kernels.gemm_schedules.family import gemm_bytes, gemm_flops
from kernels.gemm_schedules.launch import CublasGemm, GemmLibrary, GemmPlan
from kernels.gemm_schedules.reference import make_inputs

# A device-wide synchronize right after a measurement waits for nothing the engine timed (it has
# already waited for its own stream) and costs tens of microseconds on an idle GPU. Waiting longer
# means work was left running on another stream: untimed, and overlapping whatever runs next.
ESCAPED_WORK_LIMIT_S = 5e-3


def drain_device() -> float:
    """Seconds a device-wide synchronize waits (call it right after a measurement returns).

    A guard for a failure seen on an H200: cuBLAS calls enqueued on a stream the timing
    events did not bracket ran concurrently with the next measurements. Partial: work that already
    drained while the engine was still sampling is not seen. It also drains, so the next measurement
    starts on an idle GPU.
    """
    import time

    import cupy

    start = time.perf_counter()
    cupy.cuda.runtime.deviceSynchronize()
    return time.perf_counter() - start


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
