"""Hooks that let a conftest.py or another plugin replace the device or the timing backend."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_gpuperf._timing.backend import TimingBackend
    from pytest_gpuperf._timing.device import DeviceInfo, NoDevice


@pytest.hookspec(firstresult=True)
def pytest_gpuperf_device(config: pytest.Config, ordinal: int) -> DeviceInfo | NoDevice | None:
    """Return the device to test on (a ``DeviceInfo``), a ``NoDevice`` saying why there is
    none, or None to let the next implementation (finally: probing CUDA through CuPy) decide.
    ``pytest_gpuperf.testing.fake_device`` builds one for tests without a GPU."""


@pytest.hookspec(firstresult=True)
def pytest_gpuperf_backend(config: pytest.Config, device: DeviceInfo) -> TimingBackend | None:
    """Return the timing backend for ``device``, or None for the default (CUDA events and
    graphs through CuPy). ``pytest_gpuperf.testing.FakeBackend`` gives seeded synthetic times."""


@pytest.hookspec(firstresult=True)
def pytest_gpuperf_device_count(config: pytest.Config) -> int | None:
    """Return how many GPUs are visible, or None to ask CUDA; used to give each xdist worker its own GPU."""
