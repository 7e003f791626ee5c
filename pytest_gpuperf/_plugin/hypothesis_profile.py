"""The ``gpu-perf`` hypothesis profile: no deadline, since a kernel test's first calls compile
(seconds). The plugin registers it when the command line names it (``--hypothesis-profile=gpu-perf``,
e.g. in a project's ``addopts``), never otherwise; a project can also call ``register_profile()``
from its conftest.py. Loading this module imports no hypothesis."""

from __future__ import annotations

PROFILE = "gpu-perf"


def register_profile() -> None:
    from hypothesis import HealthCheck, settings

    settings.register_profile(
        PROFILE,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
