"""The ``gpu_counters`` fixture's object: Nsight Compute profiles (``_counters``) of one test's
launches, cached for the session and recorded on the test's report."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import pytest

from pytest_gpuperf._counters.metrics import DEFAULT_METRICS, CounterResult
from pytest_gpuperf._counters.ncu import CountersUnavailable, profile_launches
from pytest_gpuperf._plugin.session import RECORD_KEY, SKIP_PREFIX, GpuPerfSession
from pytest_gpuperf._timing.device import DeviceInfo

if TYPE_CHECKING:
    from pytest_gpuperf._report.records import CountersRecord


class GpuCounters:
    """What the ``gpu_counters`` fixture returns: profile launches, record the counters on the test's report.

    Profiles are cached for the session by their arguments, so several tests reading one
    multi-launch profile (``profile_launches``) run ncu once.
    """

    def __init__(self, session: GpuPerfSession, item: pytest.Item, ncu: str, cache: dict[str, list[CounterResult]]):
        self._session = session
        self._item = item
        self.ncu = ncu
        self._cache = cache

    def profile(
        self,
        target: str,
        args: Mapping[str, Any] | None = None,
        *,
        kernel_regex: str,
        label: str | None = None,
        launch_skip: int = 0,
        metrics: Sequence[str] = DEFAULT_METRICS,
        ideal_read_bytes: float | None = None,
        ideal_write_bytes: float | None = None,
        iterations: float | None = None,
    ) -> CounterResult:
        """Profile one launch (see ``_counters.ncu.profile``) and record it on this test's report."""
        (result,) = self.profile_launches(
            target, args, kernel_regex=kernel_regex, launch_count=1, launch_skip=launch_skip, metrics=metrics
        )
        result = result.with_ideal(read_bytes=ideal_read_bytes, write_bytes=ideal_write_bytes, iterations=iterations)
        self.record(result, label or result.kernel)
        return result

    def profile_launches(
        self,
        target: str,
        args: Mapping[str, Any] | None = None,
        *,
        kernel_regex: str,
        launch_count: int,
        launch_skip: int = 0,
        metrics: Sequence[str] = DEFAULT_METRICS,
    ) -> list[CounterResult]:
        """Profile several launches in one ncu run (cached per session); record what you use with ``record``."""
        key = json.dumps(
            [target, dict(args or {}), kernel_regex, launch_count, launch_skip, list(metrics)], sort_keys=True
        )
        if key not in self._cache:
            device = self._session.device
            # a fake device (pytest_gpuperf.testing) has no CuPy behind it: do not make the target select one
            real = isinstance(device, DeviceInfo) and device.cupy_version not in ("", "none")
            ordinal = device.ordinal if real and isinstance(device, DeviceInfo) else None
            try:
                with self._session.gpu_lock():
                    self._cache[key] = profile_launches(
                        target,
                        args,
                        kernel_regex=kernel_regex,
                        launch_count=launch_count,
                        launch_skip=launch_skip,
                        metrics=metrics,
                        ncu=self.ncu,
                        cwd=self._session.config.rootpath,
                        device=ordinal,
                    )
            except CountersUnavailable as exc:
                pytest.skip(SKIP_PREFIX + exc.reason)
        return list(self._cache[key])

    def record(self, result: CounterResult, label: str) -> None:
        """Attach ``result`` to this test's report (the JSON report lists it under the test's ``counters``)."""
        record = cast(
            "CountersRecord", {"kind": "counters", "test": self._item.nodeid, "label": label, **result.to_json()}
        )
        self._item.user_properties.append((RECORD_KEY, record))
