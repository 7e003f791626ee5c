"""pytest-gpuperf: GPU kernel performance claims as statistically honest pytest gates.

The public names are below; everything under a ``_`` folder is private. Besides this module:
``pytest_gpuperf.bench`` (timing and counters outside pytest), ``pytest_gpuperf.errors``,
``pytest_gpuperf.numerics``, ``pytest_gpuperf.schemas`` (the files' JSON Schemas),
``pytest_gpuperf.strategies`` (the ``hypothesis`` extra) and ``pytest_gpuperf.testing`` (fakes
for a GPU-less test of your own gates).

The names are imported on first use (PEP 562), so loading the plugin at every pytest start does
not import NumPy or SciPy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from pytest_gpuperf._version import __version__ as __version__
from pytest_gpuperf.errors import BaselineFileError, GateFailure, GpuPerfError, GpuPerfUsageError

if TYPE_CHECKING:
    from pytest_gpuperf._compile.cuda_module import CudaModule
    from pytest_gpuperf._compile.host import build_host_library, find_host_compiler
    from pytest_gpuperf._compile.modules import load_module
    from pytest_gpuperf._compile.nvcc import BuildResult, build_shared_library
    from pytest_gpuperf._counters.metrics import CounterResult
    from pytest_gpuperf._gates.verdict import Verdict
    from pytest_gpuperf._plugin.gpu_counters import GpuCounters
    from pytest_gpuperf._plugin.gpu_perf import GpuPerf
    from pytest_gpuperf._plugin.gpu_static import GpuStatic, static_params
    from pytest_gpuperf._store.margins import MarginsFile
    from pytest_gpuperf._store.private_dir import cache_folder
    from pytest_gpuperf._timing.backend import Prepared, TimingBackend
    from pytest_gpuperf._timing.device import DeviceInfo, NoDevice
    from pytest_gpuperf._timing.results import Comparison, Measurement, Variant
    from pytest_gpuperf._timing.streams import TimingStream
    from pytest_gpuperf.numerics import assert_close, poison, to_numpy

# Public name -> the private module that defines it.
_LAZY = {
    # what a test measures and gets back
    "Variant": "pytest_gpuperf._timing.results",
    "Measurement": "pytest_gpuperf._timing.results",
    "Comparison": "pytest_gpuperf._timing.results",
    "Verdict": "pytest_gpuperf._gates.verdict",
    "TimingStream": "pytest_gpuperf._timing.streams",
    # the fixtures' objects, for annotations
    "GpuPerf": "pytest_gpuperf._plugin.gpu_perf",
    "GpuStatic": "pytest_gpuperf._plugin.gpu_static",
    "GpuCounters": "pytest_gpuperf._plugin.gpu_counters",
    "CounterResult": "pytest_gpuperf._counters.metrics",
    # what the hooks take and return (pytest_gpuperf_device, pytest_gpuperf_backend)
    "DeviceInfo": "pytest_gpuperf._timing.device",
    "NoDevice": "pytest_gpuperf._timing.device",
    "TimingBackend": "pytest_gpuperf._timing.backend",
    "Prepared": "pytest_gpuperf._timing.backend",
    # correct outputs
    "poison": "pytest_gpuperf.numerics",
    "assert_close": "pytest_gpuperf.numerics",
    "to_numpy": "pytest_gpuperf.numerics",
    # building kernels: run-time modules, the compile-time tier, nvcc and host libraries
    "load_module": "pytest_gpuperf._compile.modules",
    "CudaModule": "pytest_gpuperf._compile.cuda_module",
    "static_params": "pytest_gpuperf._plugin.gpu_static",
    "build_shared_library": "pytest_gpuperf._compile.nvcc",
    "BuildResult": "pytest_gpuperf._compile.nvcc",
    "build_host_library": "pytest_gpuperf._compile.host",
    "find_host_compiler": "pytest_gpuperf._compile.host",
    "cache_folder": "pytest_gpuperf._store.private_dir",
    # a kernel family's gated margins
    "MarginsFile": "pytest_gpuperf._store.margins",
}

__all__ = [
    "Variant",
    "Measurement",
    "Comparison",
    "Verdict",
    "TimingStream",
    "GpuPerf",
    "GpuStatic",
    "GpuCounters",
    "CounterResult",
    "DeviceInfo",
    "NoDevice",
    "TimingBackend",
    "Prepared",
    "poison",
    "assert_close",
    "to_numpy",
    "load_module",
    "CudaModule",
    "static_params",
    "build_shared_library",
    "BuildResult",
    "build_host_library",
    "find_host_compiler",
    "cache_folder",
    "MarginsFile",
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


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
