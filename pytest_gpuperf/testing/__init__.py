"""Fakes for testing gates and reports without a GPU: a device, a timing backend, and the
time-indexed noise a real GPU's timings carry.

Install them from a ``conftest.py`` through the plugin's hooks::

    from pytest_gpuperf.testing import FakeBackend, fake_device, noise

    def pytest_gpuperf_device(config, ordinal):
        return fake_device(compute_capability=(9, 0))

    def pytest_gpuperf_backend(config, device):
        return FakeBackend({"baseline": 12e-6, "fast": 10e-6}, noise=[noise.Lognormal(0.02), noise.AR1(0.8, 0.01)])
"""

from pytest_gpuperf.testing import noise
from pytest_gpuperf.testing._fake_backend import FakeBackend, fake_device

__all__ = ["FakeBackend", "fake_device", "noise"]
