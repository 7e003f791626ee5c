"""The GPU under test: what it is, and the fingerprint its baselines are stored under.

Probing imports CuPy lazily, and without CuPy asks the CUDA driver itself (``libcuda``
through ctypes), so a test that needs only the GPU runs wherever a driver does; timing needs
CuPy. On a machine without CUDA or a driver, ``probe`` returns a ``NoDevice`` with the reason
instead of raising, so the plugin still loads and GPU tests skip with that reason.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

GIB = 1024**3


@dataclass(frozen=True)
class DeviceInfo:
    """One CUDA device. Name, capability, SM count and memory size form the baseline key;
    the software versions are recorded beside results but are not part of the key."""

    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    memory_bytes: int
    l2_bytes: int
    ordinal: int = 0
    pci_bus_id: str = ""
    uuid: str = ""
    driver_version: str = ""
    cuda_runtime_version: str = ""
    cuda_driver_version: str = ""
    cupy_version: str = ""
    max_sm_clock_mhz: int = 0
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def arch(self) -> str:
        """``"sm_90"`` for compute capability 9.0, nvcc's spelling: the key of per-architecture
        margins and the form every message shows."""
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"

    @property
    def key(self) -> str:
        """Baseline fingerprint, e.g. ``nvidia-h200-sm90-132sm-140gib``.

        The architecture is spelled compactly here (``sm90``, not ``arch``'s ``sm_90``) and on
        purpose: the key names the folders of stored baselines and evidence, so it must not change."""
        slug = re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-") or "gpu"
        gib = round(self.memory_bytes / GIB)
        major, minor = self.compute_capability
        return f"{slug}-sm{major}{minor}-{self.sm_count}sm-{gib}gib"

    def describe(self) -> str:
        major, minor = self.compute_capability
        return (
            f"{self.name} (compute capability {major}.{minor}, {self.sm_count} SMs, "
            f"{self.memory_bytes / GIB:.0f} GiB, L2 {self.l2_bytes / 2**20:.0f} MiB)"
        )

    def fingerprint(self) -> dict[str, Any]:
        """Everything recorded about the device in baselines and reports."""
        data = asdict(self)
        data.pop("extra")
        data["compute_capability"] = "{}.{}".format(*self.compute_capability)
        data["key"] = self.key
        return data


@dataclass(frozen=True)
class NoDevice:
    """Why no GPU can be used; the text becomes the skip reason."""

    reason: str

    def __bool__(self) -> bool:
        return False


def probe(ordinal: int) -> DeviceInfo | NoDevice:
    """Describe CUDA device ``ordinal`` through CuPy, or the driver without it
    (``nvml.enrich`` adds what NVML knows)."""
    try:
        import cupy
    except ImportError:
        return probe_driver(ordinal)
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # CUDARuntimeError without a driver
        return NoDevice(_runtime_failure(exc))
    if count == 0:
        return NoDevice("no CUDA GPU is visible (getDeviceCount() == 0)")
    if not 0 <= ordinal < count:
        return NoDevice(f"GPU {ordinal} was asked for but only {count} GPU(s) are visible")
    try:
        props = cupy.cuda.runtime.getDeviceProperties(ordinal)
        with cupy.cuda.Device(ordinal):
            pci = cupy.cuda.Device(ordinal).pci_bus_id
        name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        runtime = cupy.cuda.runtime.runtimeGetVersion()
        driver = cupy.cuda.runtime.driverGetVersion()
    except Exception as exc:
        return NoDevice(f"GPU {ordinal} could not be queried ({_one_line(exc)})")
    uuid_raw = props.get("uuid", b"")
    info = DeviceInfo(
        name=name,
        compute_capability=(int(props["major"]), int(props["minor"])),
        sm_count=int(props["multiProcessorCount"]),
        memory_bytes=int(props["totalGlobalMem"]),
        l2_bytes=int(props["l2CacheSize"]),
        ordinal=ordinal,
        pci_bus_id=str(pci),
        uuid=uuid_raw.hex() if isinstance(uuid_raw, bytes) else str(uuid_raw),
        cuda_runtime_version=_cuda_version(runtime),
        cuda_driver_version=_cuda_version(driver),
        cupy_version=cupy.__version__,
    )
    return info


_INSUFFICIENT_DRIVER = 35  # cudaErrorInsufficientDriver
_NO_DEVICE = 100  # cudaErrorNoDevice


def _runtime_failure(exc: BaseException) -> str:
    """Why CUDA's runtime found no GPU, in words that fit this machine. Without any NVIDIA driver
    the runtime reports cudaErrorInsufficientDriver, whose text asks for a newer driver: on a
    machine with no driver (a CPU-only runner with the [gpu] extra installed) that advice is wrong."""
    status = getattr(exc, "status", None)
    text = _one_line(exc)
    if status == _INSUFFICIENT_DRIVER or "cudaErrorInsufficientDriver" in text:
        if not _driver_installed():
            return (
                "no NVIDIA driver or GPU on this machine (libcuda.so.1 is not installed, which CuPy reports as "
                "cudaErrorInsufficientDriver)"
            )
        return (
            f"the NVIDIA driver is older than the CUDA runtime CuPy {_cupy_version()} needs ({text}); "
            "upgrade the driver, or install the CuPy package built for the driver's CUDA version"
        )
    if status == _NO_DEVICE or "cudaErrorNoDevice" in text:
        return f"no CUDA GPU is visible ({text}); check CUDA_VISIBLE_DEVICES and that the GPU is attached"
    return f"no usable CUDA driver or GPU ({text})"


def _driver_installed() -> bool:
    """Whether the NVIDIA driver's CUDA library can be loaded at all."""
    import ctypes

    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def _cupy_version() -> str:
    import cupy

    return str(getattr(cupy, "__version__", "?"))


def _cuda_version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


# CUdevice_attribute values (cuda.h)
_ATTR = {"major": 75, "minor": 76, "sm_count": 16, "l2_bytes": 38}


def probe_driver(ordinal: int) -> DeviceInfo | NoDevice:
    """Describe CUDA device ``ordinal`` through the driver API alone (no CuPy)."""
    import ctypes

    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return NoDevice(
            "no CUDA driver (libcuda.so.1 not found) and CuPy is not installed; install pytest-gpuperf[gpu]"
        )

    def check(status: int, what: str) -> None:
        if status != 0:
            raise RuntimeError(f"{what} returned CUDA error {status}")

    try:
        check(cuda.cuInit(0), "cuInit")
        count = ctypes.c_int(0)
        check(cuda.cuDeviceGetCount(ctypes.byref(count)), "cuDeviceGetCount")
        if count.value == 0:
            return NoDevice("no CUDA GPU is visible (cuDeviceGetCount() == 0)")
        if not 0 <= ordinal < count.value:
            return NoDevice(f"GPU {ordinal} was asked for but only {count.value} GPU(s) are visible")
        dev = ctypes.c_int(0)
        check(cuda.cuDeviceGet(ctypes.byref(dev), ordinal), "cuDeviceGet")
        name = ctypes.create_string_buffer(256)
        check(cuda.cuDeviceGetName(name, 256, dev), "cuDeviceGetName")
        attrs = {}
        for key, code in _ATTR.items():
            value = ctypes.c_int(0)
            check(cuda.cuDeviceGetAttribute(ctypes.byref(value), code, dev), f"cuDeviceGetAttribute({key})")
            attrs[key] = value.value
        memory = ctypes.c_size_t(0)
        check(cuda.cuDeviceTotalMem_v2(ctypes.byref(memory), dev), "cuDeviceTotalMem")
        pci = ctypes.create_string_buffer(32)
        check(cuda.cuDeviceGetPCIBusId(pci, 32, dev), "cuDeviceGetPCIBusId")
        version = ctypes.c_int(0)
        check(cuda.cuDriverGetVersion(ctypes.byref(version)), "cuDriverGetVersion")
    except (RuntimeError, AttributeError) as exc:
        return NoDevice(f"no usable CUDA driver or GPU ({exc})")
    info = DeviceInfo(
        name=name.value.decode(errors="replace"),
        compute_capability=(attrs["major"], attrs["minor"]),
        sm_count=attrs["sm_count"],
        memory_bytes=int(memory.value),
        l2_bytes=attrs["l2_bytes"],
        ordinal=ordinal,
        pci_bus_id=pci.value.decode(errors="replace"),
        cuda_driver_version=_cuda_version(version.value),
    )
    return info
