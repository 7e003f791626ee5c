"""Run state of one pytest process: settings, the device, the backend, baselines and results."""

from __future__ import annotations

import contextlib
import os
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_gpuperf._plugin.options import Settings
from pytest_gpuperf._timing.device import DeviceInfo, NoDevice

if TYPE_CHECKING:  # imported when first needed: loading the plugin must stay cheap
    from pytest_gpuperf._plugin.live_status import LiveStatus
    from pytest_gpuperf._report.records import MeasurementRecord, Record
    from pytest_gpuperf._store.baselines import BaselineChange, BaselineStore
    from pytest_gpuperf._timing.backend import TimingBackend
    from pytest_gpuperf._timing.health import HealthGuard
    from pytest_gpuperf._timing.sampler import OnRounds, SamplingPolicy

PLUGIN_NAME = "gpu_perf_session"
RECORD_KEY = "gpu_perf"  # key of the records carried in report.user_properties
SKIP_PREFIX = "gpu-perf: "  # every skip the plugin makes starts so; the summary counts them by reason
GPU_LOCK_TIMEOUT_S = 3600.0


def worker_index() -> int | None:
    """The pytest-xdist worker number (gw3 -> 3), or None outside xdist."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else None


def gpu_lock_path(ident: str) -> Path:
    """The lock file of one GPU, in the machine-wide lock folder (``_store.locks.machine_lock_dir``:
    ``$GPU_PERF_LOCK_DIR``, else /tmp) so that every process on the host, whatever its user or
    ``TMPDIR``, sees the same one."""
    from pytest_gpuperf._store.locks import machine_lock_dir

    return machine_lock_dir() / f"pytest-gpuperf-gpu-{ident.replace(':', '_').replace('/', '_')}.lock"


def select_ordinal(device_setting: str, worker: int | None, count: int | None) -> int:
    """'auto' gives xdist worker i GPU i mod count (GPU 0 outside xdist); a number is taken as is."""
    if device_setting != "auto":
        return int(device_setting)
    if worker is None or not count:
        return 0
    return worker % count


def _cuda_device_count() -> int | None:
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:
        return None


@dataclass
class GpuPerfSession:
    config: pytest.Config
    settings: Settings
    records: list[Record] = field(default_factory=list)
    skip_reasons: Counter[str] = field(default_factory=Counter)
    baseline_changes: list[BaselineChange] = field(default_factory=list)
    _device: DeviceInfo | NoDevice | None = None
    _backend: TimingBackend | None = None
    _copy_bandwidth: float | None = None
    _against: Any = None
    _gpu_lock_owner: int | None = None  # the thread holding the GPU lock

    def __post_init__(self) -> None:
        self.not_recorded: list[str] = []  # measurements an update left out, and why

    @cached_property
    def store(self) -> BaselineStore:
        from pytest_gpuperf._store.baselines import BaselineStore

        return BaselineStore(self.settings.baselines_dir)

    @cached_property
    def guard(self) -> HealthGuard:
        """One per run: the wait budget for a quiet GPU is the run's."""
        from pytest_gpuperf._timing.health import HealthGuard

        return HealthGuard(quiet_wait_s=self.settings.quiet_wait, require_health=self.settings.require_health)

    @property
    def is_worker(self) -> bool:
        return hasattr(self.config, "workerinput")

    # -- device and backend -------------------------------------------------------
    @property
    def ordinal(self) -> int:
        if self.settings.device == "auto" and worker_index() is not None:
            count = self.gpu_count()
        else:
            count = self.config.hook.pytest_gpuperf_device_count(config=self.config)
        return select_ordinal(self.settings.device, worker_index(), count)

    def gpu_count(self) -> int | None:
        """How many GPUs this process sees: the hook's answer, else CUDA's (None when unknown)."""
        count = self.config.hook.pytest_gpuperf_device_count(config=self.config)
        return count if count is not None else _cuda_device_count()

    @property
    def device(self) -> DeviceInfo | NoDevice:
        """The GPU under test, probed once; a NoDevice (falsy) carries the reason there is none."""
        if self._device is None:
            from pytest_gpuperf._timing.nvml import probe as nvml_probe

            ordinal = self.ordinal
            found = self.config.hook.pytest_gpuperf_device(config=self.config, ordinal=ordinal)
            self._device = found if found is not None else nvml_probe(ordinal)
            if isinstance(self._device, DeviceInfo):
                _use_cuda_device(self._device)
        return self._device

    @property
    def backend(self) -> TimingBackend:
        if self._backend is None:
            device = self.device
            assert isinstance(device, DeviceInfo), "backend requested without a device"
            backend = self.config.hook.pytest_gpuperf_backend(config=self.config, device=device)
            if backend is None:
                from pytest_gpuperf._timing.cupy_backend import CupyBackend

                backend = CupyBackend(device)
            self._backend = backend
        return self._backend

    @contextlib.contextmanager
    def gpu_lock(self) -> Iterator[None]:
        """Hold the GPU for timing: two processes never time on one GPU at once. A wait longer
        than GPU_LOCK_TIMEOUT_S raises LockTimeoutError naming the lock file and its holder.
        Re-entrant in the thread that holds it (a measurement inside a test that holds the GPU,
        gpu_sharing); another thread of this process waits on the file lock like another process."""
        if self._gpu_lock_owner == threading.get_ident():  # an inner hold: the outermost releases
            yield
            return
        device = self.device
        ident = (device.uuid or device.pci_bus_id or str(device.ordinal)) if isinstance(device, DeviceInfo) else "none"
        from pytest_gpuperf._store.locks import hold_machine_wide

        with hold_machine_wide(gpu_lock_path(ident), timeout_s=GPU_LOCK_TIMEOUT_S, purpose=f"timing on GPU {ident}"):
            self._gpu_lock_owner = threading.get_ident()
            try:
                yield
            finally:
                self._gpu_lock_owner = None

    @property
    def against(self) -> Any:
        """The revision of ``--gpu-perf-against`` (``against.Revision``), resolved once; None without it."""
        if self.settings.against is None:
            return None
        if self._against is None:
            from pytest_gpuperf._plugin.against import resolve

            self._against = resolve(self.config.rootpath, self.settings.against)
        return self._against

    @cached_property
    def live(self) -> LiveStatus | None:
        """The live status line, where the run is interactive (``live_status.for_terminal``)."""
        from pytest_gpuperf._plugin.live_status import for_terminal

        return for_terminal(self.config)

    @contextlib.contextmanager
    def live_status(self, test: str, label: str, budget_s: float) -> Iterator[OnRounds | None]:
        """The sampler's ``on_rounds`` callback drawing the live status line, or None."""
        if self.live is None:
            yield None
            return
        with self.live.measuring(test, label, budget_s) as on_rounds:
            yield on_rounds

    def close_live(self) -> None:
        if "live" in self.__dict__ and self.live is not None:
            self.live.close()

    @property
    def against_label(self) -> str:
        rev = self.against
        return "" if rev is None else (f"{rev.label} ({rev.commit[:12]})" if rev.commit else rev.label)

    def reference_for(self, variant: Any, settings: Settings) -> Any:
        """The prepared reference kernel ``variant``'s regression checks calibrate against, or None."""
        kind = variant.reference_kind
        if not settings.calibrate or kind is None:
            return None
        return self.backend.reference(kind)

    def policy(self, settings: Settings) -> SamplingPolicy:
        from pytest_gpuperf._timing.sampler import SamplingPolicy

        return SamplingPolicy(
            confidence=settings.confidence,
            precision=settings.precision,
            budget_s=settings.budget,
            extension_budget_s=2.0 * settings.budget,
        )

    def copy_bandwidth(self) -> float:
        """Device-to-device copy bandwidth in bytes/s (bytes read + bytes written), measured once."""
        if self._copy_bandwidth is None:
            from pytest_gpuperf._timing.sampler import measure

            device = self.device
            assert isinstance(device, DeviceInfo)
            best = 0.0
            with self.gpu_lock():
                for variant in copy_variants(self.backend, device):
                    m = measure(self.backend, variant, self.policy(self.settings), "hot", device.key, self.guard)
                    best = max(best, float(variant.bytes or 0) / m.median_s)
            self._copy_bandwidth = best
        return self._copy_bandwidth

    # -- results --------------------------------------------------------------------
    def collect(self, record: Record) -> None:
        self.records.append(record)

    def write_baselines(self) -> list[Any]:
        """Merge this run's measurements into the stored baselines (update mode, controller only).

        Each file is written on its own; returns one ``outputs.OutputOutcome`` per file. A measurement
        that is not stored (an entry the reader would refuse, a file that could not be written)
        gets the verdict "not recorded" and the reason in its record and in ``not_recorded``.
        """
        from pytest_gpuperf._plugin.breakdowns import stored_form
        from pytest_gpuperf._report.outputs import attempt
        from pytest_gpuperf._store.baselines import BaselineEntry

        grouped: dict[tuple[str, str], dict[str, BaselineEntry]] = {}
        measured: dict[tuple[str, str], list[MeasurementRecord]] = {}
        devices: dict[str, dict[str, Any]] = {}
        for r in self.records:
            if r["kind"] != "measurement":
                continue
            if r["verdict"] == "contended":
                self.not_recorded.append(f"{r['key']}: contended (other processes used the GPU)")
                continue
            entry = BaselineEntry.from_measurement(r["measurement"])
            if "levels" in r:
                entry = entry.with_extra(levels=r["levels"])
            kernels = stored_form(r.get("breakdown"))
            if kernels is not None:
                entry = entry.with_extra(breakdown=kernels)
            problem = entry.problem()
            if problem:
                self._not_recorded(r, problem)
                continue
            devices[r["device"]["key"]] = r["device"]
            grouped.setdefault((r["device"]["key"], r["module"]), {})[r["key"]] = entry
            measured.setdefault((r["device"]["key"], r["module"]), []).append(r)
        from pytest_gpuperf._report.provenance import provenance

        source = provenance(self.config.rootpath)
        outcomes = []
        for (device_key, module), entries in sorted(grouped.items()):

            def update(
                device_key: str = device_key, module: str = module, entries: dict[str, BaselineEntry] = entries
            ) -> str:
                changes = self.store.update(device_key, module, devices[device_key], entries, source)
                self.baseline_changes.extend(changes)
                return f"{len(changes)} entries"

            path = self.store.path_for(device_key, module)
            outcome = attempt("baselines", path, update)
            if outcome.error:
                why = outcome.error if str(path) in outcome.error else f"{path}: {outcome.error}"
                for r in measured[(device_key, module)]:
                    self._not_recorded(r, why)
            outcomes.append(outcome)
        return outcomes

    def _not_recorded(self, record: MeasurementRecord, why: str) -> None:
        from pytest_gpuperf._gates.verdict import Verdict

        record["verdict"] = str(Verdict.NOT_RECORDED)
        record["not_recorded"] = why
        self.not_recorded.append(f"{record['key']}: {why}")


def copy_variants(backend: TimingBackend, device: DeviceInfo) -> list[Any]:
    """Variants copying a buffer far larger than L2 with the SMs, for the copy-bandwidth roofline."""
    from pytest_gpuperf._timing.results import Variant
    from pytest_gpuperf._timing.roofline import copy_buffer_bytes, copy_launches

    if getattr(backend, "name", "") != "cupy":
        return [Variant("device-copy", lambda: None, bytes=2 * copy_buffer_bytes(device))]
    launches, moved = copy_launches(device)
    return [Variant(name, fn, bytes=moved) for name, fn in launches]


def _use_cuda_device(device: DeviceInfo) -> None:
    """Make ``device`` CuPy's current device in this process (a no-op for fake devices)."""
    if device.cupy_version in ("", "none"):
        return
    try:
        import cupy

        cupy.cuda.Device(device.ordinal).use()
    except Exception:
        pass
