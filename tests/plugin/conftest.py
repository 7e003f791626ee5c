"""Shared set-up for the plugin's own tests: pytester projects on a fake GPU."""
from __future__ import annotations

import json
import textwrap
from typing import Callable

import pytest

# The plugin imports scipy lazily. pytester's in-process runs restore sys.modules after each
# run, and scipy's compiled modules cannot be imported twice in one process, so load it once
# here, before any pytester run.
import scipy.stats  # noqa: F401


def _load_the_plugin_whole() -> None:
    """Import every module of the plugin once, before any pytester run. A module first imported
    inside an in-process run is dropped when the run ends and imported anew by the next, while
    modules loaded before keep their references: two copies of ``Verdict`` then compare unequal
    by identity, and a failing gate in a later run would read as passing."""
    import importlib
    import pkgutil

    import pytest_gpuperf

    for module in pkgutil.walk_packages(pytest_gpuperf.__path__, "pytest_gpuperf."):
        if not module.name.endswith("__main__"):  # running it is running the command
            importlib.import_module(module.name)


_load_the_plugin_whole()

# Installed into each pytester project: the fake device and backend are configured
# through environment variables so one conftest serves every scenario.
FAKE_CONFTEST = textwrap.dedent(
    """
    import json, os
    from pytest_gpuperf._timing.device import NoDevice
    from pytest_gpuperf.testing import FakeBackend, fake_device, noise

    def noise_models():
        specs = json.loads(os.environ.get("FAKE_NOISE", "null"))
        return None if specs is None else [getattr(noise, s.pop("model"))(**s) for s in specs]

    def pytest_gpuperf_device(config, ordinal):
        cc = os.environ.get("FAKE_CC", "9.0")
        if cc == "none":
            return NoDevice("fake: this machine has no GPU")
        major, minor = (int(x) for x in cc.split("."))
        return fake_device((major, minor), name=os.environ.get("FAKE_NAME", "Fake GPU"), ordinal=ordinal)

    def pytest_gpuperf_device_count(config):
        return int(os.environ.get("FAKE_GPU_COUNT", "1"))

    def pytest_gpuperf_backend(config, device):
        return FakeBackend(
            json.loads(os.environ.get("FAKE_TIMES", "{}")),
            spread=float(os.environ.get("FAKE_SPREAD", "0.01")),
            seed=int(os.environ.get("FAKE_SEED", "0")),
            throttled=os.environ.get("FAKE_THROTTLED") == "1",
            levels=json.loads(os.environ.get("FAKE_LEVELS", "{}")),
            noise=noise_models(),
            nvml=os.environ.get("FAKE_NVML", "1") == "1",
            mig=os.environ.get("FAKE_MIG") == "1",
            other_processes=json.loads(os.environ.get("FAKE_OTHERS", "[]")),
            inject=json.loads(os.environ.get("FAKE_INJECT", "{}")),
            captured_work=json.loads(os.environ.get("FAKE_CAPTURED", "{}")),
            escaped=json.loads(os.environ.get("FAKE_ESCAPED", "{}")),
        )
    """
)


@pytest.fixture
def fake_gpu(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Install the fake-GPU conftest; call it to set capability, per-variant times and noise."""
    pytester.makeconftest(FAKE_CONFTEST)
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    for name in ("GPU_PERF", "GPU_PERF_TOLERANCE", "GPU_PERF_BASELINES", "GPU_PERF_JSON", "GPU_PERF_DEVICE", "FAKE_NOISE"):
        monkeypatch.delenv(name, raising=False)
    # When this suite itself runs under pytest-xdist, the inner pytester runs must not look like
    # xdist workers (GPU selection and pytest-benchmark both read these).
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)

    def configure(cc: str = "9.0", times: dict[str, float] | None = None, spread: float = 0.01, seed: int = 0, **extra: str) -> None:
        monkeypatch.setenv("FAKE_CC", cc)
        monkeypatch.setenv("FAKE_TIMES", json.dumps(times or {}))
        monkeypatch.setenv("FAKE_SPREAD", str(spread))
        monkeypatch.setenv("FAKE_SEED", str(seed))
        for key, value in extra.items():
            monkeypatch.setenv(key, value)

    configure()
    return configure
