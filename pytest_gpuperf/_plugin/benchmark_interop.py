"""GPU results in pytest-benchmark's storage, JSON (--benchmark-json) and comparison tables.

Registered only when pytest-benchmark is installed and the run asks it to store or compare
results (``--benchmark-json``, ``--benchmark-autosave``, ``--benchmark-save``,
``--benchmark-compare``), so a plain ``--gpu-perf`` run prints none of its tables. Each measured
variant becomes one pytest-benchmark entry whose samples are GPU seconds per launch (not host
wall time), grouped per test; the GPU statistics (interval, cache mode, method) travel in
``extra_info``, and the GPU's fingerprint joins ``machine_info`` through pytest-benchmark's
public hook, so comparing runs of two different GPUs warns. pytest-benchmark has no public way
to add results measured elsewhere, so the entries are appended to its session's list.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest

from pytest_gpuperf._plugin.session import RECORD_KEY
from pytest_gpuperf._report.records import is_record
from pytest_gpuperf._timing.device import DeviceInfo

if TYPE_CHECKING:
    from pytest_gpuperf._plugin.session import GpuPerfSession
    from pytest_gpuperf._report.records import MeasurementRecord


class BenchmarkHooks:
    """pytest-benchmark hooks, bound to the run's session."""

    def __init__(self, session: GpuPerfSession):
        self.s = session

    def pytest_benchmark_update_machine_info(self, config: pytest.Config, machine_info: dict[str, Any]) -> None:
        device = self.s._device  # only a GPU the run already probed: no CUDA work for pytest-benchmark
        if isinstance(device, DeviceInfo):
            machine_info["gpu"] = device.fingerprint()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call" or self.s.is_worker:
            return
        for key, record in report.user_properties:
            if key == RECORD_KEY and is_record(record) and record["kind"] == "measurement":
                add_measurement(self.s.config, record)


def add_measurement(config: pytest.Config, record: MeasurementRecord) -> bool:
    """Append one measurement record to pytest-benchmark's session; False when it is not active."""
    session = getattr(config, "_benchmarksession", None)
    if session is None or getattr(session, "disabled", True) or not record.get("samples"):
        return False
    from pytest_benchmark.stats import Metadata

    m = record["measurement"]
    test = record["test"].split("::", 1)[-1]
    param = test[test.index("[") + 1 : -1] if test.endswith("]") and "[" in test else None
    fixture = SimpleNamespace(
        name=f"{test}::{m['name']}",
        fullname=f"{record['test']}::{m['name']}",
        group=f"gpu: {test}",
        param=param,
        params=None,
        extra_info={
            "gpu": record["device"]["name"],
            "gpu_key": record["device"]["key"],
            "quantity": "GPU seconds per launch (CUDA events)",
            "ci_low_s": m["ci_low_s"],
            "ci_high_s": m["ci_high_s"],
            "confidence": m["confidence"],
            "mode": m["mode"],
            "method": m["method"],
            "batch": m["batch"],
            "bytes": m["bytes"],
            "flops": m["flops"],
            "verdict": record["verdict"],
        },
        cprofile_stats=None,
        has_error=False,
    )
    options = {"timer": "pytest-gpuperf", "mode": m["mode"]}
    bench = Metadata(fixture, iterations=1, options=options)  # type: ignore[no-untyped-call]
    for seconds in record["samples"]:
        bench.update(seconds)  # type: ignore[no-untyped-call]
    session.benchmarks.append(bench)
    return True
