"""pytest-gpuperf: GPU kernel performance claims as statistically honest pytest gates.

The public names are imported on first use (PEP 562), so loading the plugin at every pytest
start does not import NumPy or SciPy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from pytest_gpuperf.errors import BaselineFileError, GateFailure, GpuPerfError, GpuPerfUsageError
from pytest_gpuperf.version import __version__ as __version__

if TYPE_CHECKING:
    from pytest_gpuperf._gates.verdict import Verdict
    from pytest_gpuperf._plugin.gpu_counters import GpuCounters
    from pytest_gpuperf._plugin.gpu_perf import GpuPerf
    from pytest_gpuperf._plugin.gpu_static import GpuStatic
    from pytest_gpuperf._timing.results import Comparison, Measurement, Variant
    from pytest_gpuperf._timing.streams import TimingStream


_LAZY = {
    "Variant": "pytest_gpuperf._timing.results",
    "Measurement": "pytest_gpuperf._timing.results",
    "Comparison": "pytest_gpuperf._timing.results",
    "Verdict": "pytest_gpuperf._gates.verdict",
    "GpuPerf": "pytest_gpuperf._plugin.gpu_perf",
    "GpuCounters": "pytest_gpuperf._plugin.gpu_counters",
    "GpuStatic": "pytest_gpuperf._plugin.gpu_static",
    "TimingStream": "pytest_gpuperf._timing.streams",
}

__all__ = [
    "Variant",
    "Measurement",
    "Comparison",
    "Verdict",
    "GpuPerf",
    "GpuCounters",
    "GpuStatic",
    "TimingStream",
    "GpuPerfError",
    "GpuPerfUsageError",
    "BaselineFileError",
    "GateFailure",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'pytest_gpuperf' has no attribute {name!r}")
