"""Generated histories: reports written as the plugin writes them, with a chosen series of values."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pytest

pytest.importorskip("ruptures", reason="gpuperf history's change points need the history extra (ruptures)")

H100 = "nvidia-h100-sm90-132sm-80gib"
KEY = "test_copy[1MiB]::fast"


def commit_of(index: int) -> str:
    """The commit of the generated run ``index``."""
    return hashlib.sha1(str(index).encode()).hexdigest()


def device(driver: str = "580.1", uuid: str = "gpu-a", cupy: str = "14.0") -> dict[str, Any]:
    return {"name": "NVIDIA H100", "key": H100, "uuid": uuid, "driver_version": driver,
            "cuda_runtime_version": "13.0", "cuda_driver_version": "13.0", "cupy_version": cupy}


def report(value: float, index: int, *, calibrated: bool = True, dev: dict[str, Any] | None = None,
           verdict: str = "pass", key: str = KEY, commit: str | None = None) -> dict[str, Any]:
    """A minimal valid report of one measurement: ``value`` is the ratio to the reference when
    ``calibrated``, else the median time in seconds."""
    measurement: dict[str, Any] = {"name": "fast", "median_s": value if not calibrated else value * 1e-4,
                                   "ci_low_s": 0.0, "ci_high_s": 0.0, "confidence": 0.99}
    measurement["ci_low_s"], measurement["ci_high_s"] = measurement["median_s"] * 0.99, measurement["median_s"] * 1.01
    if calibrated:
        measurement["calibration"] = {"reference": "reference:copy", "reference_median_s": 1e-4,
                                      "log_center": float(np.log(value)), "log_se": 0.002, "df": 9, "n": 40}
    return {
        "schema": "pytest-gpuperf/report/1",
        "created": f"2026-{1 + index // 28:02d}-{1 + index % 28:02d}T12:00:00+00:00",
        "provenance": {"commit": commit or commit_of(index), "branch": "main", "dirty": False, "pytest_gpuperf": "0.2.0"},
        "settings": {}, "devices": {H100: dev or device()},
        "tests": [{"nodeid": "tests/fam/test_perf.py::test_copy[1MiB]", "outcome": "passed", "comparisons": [],
                   "figures": [], "measurements": [{"module": "tests/fam/test_perf.py", "key": key,
                                                    "measurement": measurement, "verdict": verdict, "device": H100}]}],
        "skipped": [], "baseline_changes": [], "summary": {},
    }


def write_history(folder: Path, values: Sequence[float], devices: Sequence[dict[str, Any]] | None = None,
                  **kwargs: Any) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, v in enumerate(values):
        path = folder / f"run-{i:03d}.json"
        path.write_text(json.dumps(report(float(v), i, dev=devices[i] if devices else None, **kwargs)))
        paths.append(path)
    return paths


def noisy(n: int, seed: int, sigma: float = 0.01, level: float = 0.05) -> np.ndarray:
    return level * np.exp(np.random.default_rng(seed).normal(0.0, sigma, n))


@pytest.fixture
def home(tmp_path: Path) -> Path:
    folder = tmp_path / "private"
    folder.mkdir(mode=0o700)
    return folder
