"""Timing engine: backends that produce per-launch GPU times, and the sampler that judges them.

The names below load on first use (PEP 562): the package's own modules (``timing.nvml``, say)
import without pulling in the sampler and NumPy. The value types it produces live in
``pytest_gpuperf.results``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_gpuperf.timing.backend import Prepared, TimingBackend
    from pytest_gpuperf.timing.sampler import SamplingPolicy, compare, measure

_LAZY = {
    "Prepared": "pytest_gpuperf.timing.backend",
    "TimingBackend": "pytest_gpuperf.timing.backend",
    "SamplingPolicy": "pytest_gpuperf.timing.sampler",
    "compare": "pytest_gpuperf.timing.sampler",
    "measure": "pytest_gpuperf.timing.sampler",
}
__all__ = ["Prepared", "TimingBackend", "SamplingPolicy", "compare", "measure"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'pytest_gpuperf.timing' has no attribute {name!r}")
