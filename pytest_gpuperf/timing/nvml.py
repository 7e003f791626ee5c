"""Clocks and throttle reasons through NVML (nvidia-ml-py), matched to the CUDA device by PCI bus id."""
from __future__ import annotations

import dataclasses
from typing import Any

from pytest_gpuperf.device import DeviceInfo
from pytest_gpuperf.results import ClockState

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


def _handle(pci_bus_id: str) -> Any | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id.encode() if pci_bus_id else b"")
    except Exception:
        return None


def enrich(info: DeviceInfo) -> DeviceInfo:
    """Add the driver version and maximum SM clock from NVML, when NVML answers."""
    handle = _handle(info.pci_bus_id)
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


class ClockMonitor:
    """Reads the SM clock and the active clock-event (throttle) reasons of one GPU."""

    def __init__(self, pci_bus_id: str):
        self._handle = _handle(pci_bus_id)

    @property
    def available(self) -> bool:
        return self._handle is not None

    def state(self) -> ClockState | None:
        if self._handle is None:
            return None
        import pynvml

        try:
            reasons_fn = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
                pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons"
            )
            mask = int(reasons_fn(self._handle))
            sm = int(pynvml.nvmlDeviceGetClockInfo(self._handle, pynvml.NVML_CLOCK_SM))
            mem = int(pynvml.nvmlDeviceGetClockInfo(self._handle, pynvml.NVML_CLOCK_MEM))
            temp = int(pynvml.nvmlDeviceGetTemperature(self._handle, pynvml.NVML_TEMPERATURE_GPU))
        except Exception:
            return None
        return ClockState(sm_clock_mhz=sm, mem_clock_mhz=mem, reasons=decode_reasons(mask), temperature_c=temp)
