"""hypothesis strategies for kernel tests, and the profile GPU tests need (the ``hypothesis`` extra).

First calls compile kernels (seconds), so the ``gpu-perf`` profile (``PROFILE``) has no deadline.
The plugin registers it when the command line asks for it (``--hypothesis-profile=gpu-perf``, e.g.
in the project's ``addopts``); a project can also call ``register_profile()`` from its conftest.py.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from pytest_gpuperf._plugin.hypothesis_profile import PROFILE, register_profile

__all__ = ["PROFILE", "register_profile", "sizes", "shapes", "finite_floats", "arrays", "seeds"]


def sizes(min_value: int = 1, max_value: int = 4096, *, multiple_of: int | None = None) -> st.SearchStrategy[int]:
    """Sizes that favour the edges kernels get wrong: 1, one off a warp or tile, the maximum."""
    if multiple_of:
        lo, hi = -(-min_value // multiple_of), max_value // multiple_of
        return st.integers(lo, hi).map(lambda k: k * multiple_of)
    edges = sorted(
        {v for base in (1, 32, 64, 128, 256) for v in (base - 1, base, base + 1) if min_value <= v <= max_value}
    )
    edges += [max_value]
    return st.one_of(st.sampled_from(edges), st.integers(min_value, max_value))


def shapes(ndim: int, min_side: int = 1, max_side: int = 512) -> st.SearchStrategy[tuple[int, ...]]:
    return st.tuples(*[sizes(min_side, max_side) for _ in range(ndim)])


def finite_floats(dtype: Any = np.float32, magnitude: float = 8.0, subnormal: bool = False) -> st.SearchStrategy[float]:
    """Finite values representable in ``dtype`` within ±magnitude (no NaN or inf). Subnormal
    values only with ``subnormal=True``: GPU code often flushes them to zero (a CuPy elementwise
    multiply did on an H100; ``-use_fast_math`` and Triton do), which a float64 reference does not,
    so a kernel's test would fail on an input it was never meant for."""
    size = np.dtype(dtype).itemsize
    width: Literal[16, 32, 64] = 16 if size <= 2 else 32 if size == 4 else 64
    return st.floats(
        -magnitude, magnitude, allow_nan=False, allow_infinity=False, allow_subnormal=subnormal, width=width
    )


def arrays(dtype: Any, shape: Any, magnitude: float = 8.0, subnormal: bool = False) -> st.SearchStrategy[np.ndarray]:
    """NumPy arrays of finite values (subnormal ones only when asked: see ``finite_floats``);
    kernels get them copied to the device by the test."""
    return hnp.arrays(np.dtype(dtype), shape, elements=finite_floats(dtype, magnitude, subnormal))


def seeds() -> st.SearchStrategy[int]:
    """Seeds for a test's own generator: large arrays come from a seed, not element by element."""
    return st.integers(0, 2**32 - 1)
