"""What NVML (nvidia-ml-py) says about the GPU under test, matched to the CUDA device by PCI bus id:
clocks and throttle reasons, and other processes using the GPU.

Other processes are found with NVML's running compute and graphics process lists, and their
use of the SMs with its per-process utilization samples. NVML cannot see work from another
VM or from a GPU shared by time-slicing outside this machine's driver, nor tell this process
apart from the others when the process IDs it reports are not in this process's PID namespace
(a container without the host's PID namespace): then ``OtherActivity.self_found`` is False and
the other processes are reported by what NVML can say of them.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

from pytest_gpuperf._timing.device import DeviceInfo, NoDevice
from pytest_gpuperf._timing.device import probe as device_probe
from pytest_gpuperf._timing.results import ClockState, OtherActivity, OtherProcess

# NVML clock-event reason bits (nvml.h: nvmlClocksEventReason*).
_REASON_BITS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake",
    0x100: "display_clock_setting",
}


def decode_reasons(mask: int) -> tuple[str, ...]:
    return tuple(name for bit, name in _REASON_BITS.items() if mask & bit)


def _handle(pci_bus_id: str) -> tuple[Any | None, str | None]:
    """The NVML handle of the GPU, or None and why there is none."""
    try:
        import pynvml
    except ImportError:
        return None, "nvidia-ml-py is not installed (pip install nvidia-ml-py, or the plugin's gpu extra)"
    try:
        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id.encode() if pci_bus_id else b""), None
    except Exception as exc:
        return None, f"NVML did not answer for GPU {pci_bus_id or '?'} ({type(exc).__name__}: {exc})"


def probe(ordinal: int) -> DeviceInfo | NoDevice:
    """The device as CUDA describes it (``device.probe``), with what NVML adds."""
    found = device_probe(ordinal)
    return enrich(found) if isinstance(found, DeviceInfo) else found


def enrich(info: DeviceInfo) -> DeviceInfo:
    """Add the driver version and maximum SM clock from NVML, when NVML answers."""
    handle, _ = _handle(info.pci_bus_id)
    if handle is None:
        return info
    import pynvml

    def read(fn: Any, *args: Any) -> Any:
        try:
            value = fn(*args)
        except Exception:
            return None
        return value.decode() if isinstance(value, bytes) else value

    driver = read(pynvml.nvmlSystemGetDriverVersion) or info.driver_version
    max_clock = read(pynvml.nvmlDeviceGetMaxClockInfo, handle, pynvml.NVML_CLOCK_SM) or 0
    return dataclasses.replace(info, driver_version=str(driver), max_sm_clock_mhz=int(max_clock))


class GpuMonitor:
    """Reads one GPU's clocks, throttle reasons and other processes through NVML."""

    def __init__(self, pci_bus_id: str):
        self._handle, self.unavailable_reason = _handle(pci_bus_id)

    @property
    def available(self) -> bool:
        return self._handle is not None

    def state(self) -> ClockState | None:
        if self._handle is None:
            return None
        import pynvml

        try:
            reasons_fn = (
                getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
                or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
            )
            mask = int(reasons_fn(self._handle))
            sm = int(pynvml.nvmlDeviceGetClockInfo(self._handle, pynvml.NVML_CLOCK_SM))
            mem = int(pynvml.nvmlDeviceGetClockInfo(self._handle, pynvml.NVML_CLOCK_MEM))
            temp = int(pynvml.nvmlDeviceGetTemperature(self._handle, pynvml.NVML_TEMPERATURE_GPU))
        except Exception:
            return None
        return ClockState(sm_clock_mhz=sm, mem_clock_mhz=mem, reasons=decode_reasons(mask), temperature_c=temp)

    def other_activity(self, since: float) -> OtherActivity | None:
        """Other processes on the GPU, with their SM use sampled since ``since`` (``time.time()``
        seconds); None when NVML cannot list processes."""
        if self._handle is None:
            return None
        import pynvml

        try:
            listed = [
                *pynvml.nvmlDeviceGetComputeRunningProcesses(self._handle),
                *pynvml.nvmlDeviceGetGraphicsRunningProcesses(self._handle),
            ]
        except Exception:
            return None
        samples: dict[int, int] = {}
        peak: dict[int, int] | None = samples
        try:
            for sample in pynvml.nvmlDeviceGetProcessUtilization(self._handle, int(since * 1e6)):
                samples[int(sample.pid)] = max(samples.get(int(sample.pid), 0), int(sample.smUtil))
        except pynvml.NVMLError_NotFound:  # no process ran anything in the window
            pass
        except Exception:  # per-process utilization not supported: SM use unknown
            peak = None
        activity = activity_of({int(p.pid) for p in listed}, os.getpid(), peak, _process_name)
        return dataclasses.replace(activity, mig=self._mig_enabled())

    def _mig_enabled(self) -> bool:
        import pynvml

        try:
            current, _pending = pynvml.nvmlDeviceGetMigMode(self._handle)
        except Exception:  # not supported on this GPU
            return False
        return bool(current)


def activity_of(pids: set[int], me: int, peak: dict[int, int] | None, name_of: Any) -> OtherActivity:
    """The other processes among ``pids``; ``peak`` maps pid to SM percent (None: not supported).

    When this process is not among ``pids`` (another PID namespace), a lone listed process is
    taken to be this one; with several, none can be told apart from this one.
    """
    if me not in pids and len(pids) <= 1:
        return OtherActivity((), self_found=True)
    others = tuple(
        OtherProcess(pid, name_of(pid), None if peak is None else peak.get(pid, 0)) for pid in sorted(pids - {me})
    )
    return OtherActivity(others, self_found=me in pids)


def _process_name(pid: int) -> str:
    try:
        import pynvml

        name = pynvml.nvmlSystemGetProcessName(pid)
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:
        return "name unknown"


def now() -> float:
    """The wall clock NVML's utilization samples are stamped with."""
    return time.time()
