"""Building CUDA sources: run-time modules through CuPy, and static nvcc builds."""

from pytest_gpuperf._compile.modules import load_module

__all__ = ["load_module"]
