"""pytest-gpuperf: GPU kernel performance claims as statistically honest pytest gates."""
from pytest_gpuperf.errors import BaselineFileError, GateFailure, GpuPerfError, GpuPerfUsageError
from pytest_gpuperf.gates import Verdict
from pytest_gpuperf.results import Comparison, Measurement, Variant

__version__ = "0.1.0"

__all__ = [
    "Variant",
    "Measurement",
    "Comparison",
    "Verdict",
    "GpuPerfError",
    "GpuPerfUsageError",
    "BaselineFileError",
    "GateFailure",
]
