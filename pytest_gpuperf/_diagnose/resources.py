"""What one kernel in one binary uses, as the CUDA tools report it, and what changed between two.

Registers, stack, static shared memory and local memory come from ``cuobjdump -res-usage`` for
every binary, so that two sides compare like with like whoever built them. (From sm_90 on, its
shared-memory figure for a kernel that uses shared memory includes 1 KiB more than ptxas reports:
the block's reserved shared memory.) Spills, barriers and ptxas's performance warnings are only in
a build log, so they are known for the binaries the plugin built (their nvcc or ptxas log) and
``None`` elsewhere, where the local loads and stores of the instruction classes show spills
instead. Instructions are counted and classed from ``cuobjdump -sass`` of the kernel alone,
disassembled once per binary and cached like the compile-time tier's.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pytest_gpuperf._compile import nvcc as _nvcc
from pytest_gpuperf._compile.cubin import disassemble
from pytest_gpuperf._compile.kernel_report import parse_ptxas_resources
from pytest_gpuperf._diagnose.device_code import Binary, cuobjdump, tool_input
from pytest_gpuperf._diagnose.instructions import CLASS_NAMES, class_counts, parse_instructions, sass_by_arch

__all__ = [
    "KernelNotInBinary",
    "KernelReport",
    "ResourceChange",
    "format_bytes",
    "kernel_archs",
    "kernel_sass",
    "parse_res_usage",
    "read_kernel",
    "resource_changes",
]


class KernelNotInBinary(LookupError):
    """The binary holds no code for the kernel, or none for the architecture asked for."""


@dataclasses.dataclass(frozen=True)
class KernelReport:
    """One kernel of one binary for one architecture. Byte counts are per thread for stack and
    local memory, per block for shared memory; ``None`` is unknown."""

    kernel: str  # the driver's name: mangled for a C++ kernel
    arch: str  # "sm_90a"
    binary: str
    found_in: str
    registers: int
    stack_bytes: int
    shared_bytes: int  # static shared memory, as cuobjdump reports it
    local_bytes: int
    instructions: int  # without the NOPs that pad the code to its alignment
    classes: Mapping[str, int]  # instructions per class (instructions.CLASSES), in that order
    dynamic_shared_bytes: int | None = None  # a launch parameter: the launch's, when given
    spill_stores: int | None = None
    spill_loads: int | None = None
    barriers: int | None = None
    warnings: tuple[str, ...] = ()  # ptxas performance warnings that name this kernel

    def __post_init__(self) -> None:
        object.__setattr__(self, "classes", MappingProxyType(dict(self.classes)))
        object.__setattr__(self, "warnings", tuple(self.warnings))

    def summary(self) -> str:
        """``registers 96, shared 48 KiB + 16 KiB dynamic, no spills, stack 0 B, local 0 B``."""
        shared = format_bytes(self.shared_bytes)
        if self.dynamic_shared_bytes:
            shared += f" + {format_bytes(self.dynamic_shared_bytes)} dynamic"
        if self.spill_stores is None or self.spill_loads is None:
            spills = "spills unknown (no build log)"
        elif self.spill_stores or self.spill_loads:
            spills = f"spills {format_bytes(self.spill_stores)} stored, {format_bytes(self.spill_loads)} loaded"
        else:
            spills = "no spills"
        parts = [f"registers {self.registers}", f"shared {shared}", spills, f"stack {format_bytes(self.stack_bytes)}"]
        if self.local_bytes:
            parts.append(f"local {format_bytes(self.local_bytes)}")
        if self.barriers is not None:
            parts.append(f"barriers {self.barriers}")
        return ", ".join(parts)

    def class_summary(self, top: int = 6) -> str:
        """``412 instructions: integer 160, float 96, global load 12, ...`` (the ``top`` largest classes)."""
        largest = sorted(self.classes.items(), key=lambda kv: (-kv[1], CLASS_NAMES.index(kv[0])))[:top]
        rest = "" if len(self.classes) <= top else ", ..."
        return f"{self.instructions} instructions: " + ", ".join(f"{k} {v}" for k, v in largest) + rest

    def render_lines(self, limit: int = 4) -> list[str]:
        """At most ``limit`` terminal lines: where, resources, instruction classes, warnings."""
        lines = [
            f"{self.arch}, {self.found_in}: {self.binary}",
            self.summary(),
            self.class_summary(),
            *(f"ptxas: {w}" for w in self.warnings),
        ]
        return lines[: max(limit, 1)]

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["classes"] = dict(self.classes)
        data["warnings"] = list(self.warnings)
        return data

    @classmethod
    def from_json(cls, data: Any) -> KernelReport:
        if not isinstance(data, dict):
            raise ValueError(f"a kernel report: expected an object, got {type(data).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"a kernel report: unknown fields {sorted(unknown)}")
        try:
            return cls(**{**data, "warnings": tuple(data.get("warnings", ()))})
        except TypeError as exc:
            raise ValueError(f"a kernel report: {exc}") from None


def format_bytes(n: int | None) -> str:
    """``0 B``, ``24 B``, ``48 KiB``, ``1.5 KiB``, ``2 MiB``; ``?`` for None."""
    if n is None:
        return "?"
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            value = n / size
            return f"{value:g} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} B"


# --------------------------------------------------------------------------------------------
# Reading a binary

_ARCH_HEADER_RE = re.compile(r"^\s*arch = (sm_\w+)\s*$")
_FUNCTION_RE = re.compile(r"^\s*Function (\S+):\s*$")
_FIELD_RE = re.compile(r"([A-Z_]+(?:\[\d+\])?):(\d+)")


def parse_res_usage(text: str) -> dict[str | None, dict[str, dict[str, int]]]:
    """``cuobjdump -res-usage`` output: per architecture (None for a lone cubin, whose output names
    none), per function, its fields (``REG``, ``STACK``, ``SHARED``, ``LOCAL``, ...)."""
    result: dict[str | None, dict[str, dict[str, int]]] = {}
    arch: str | None = None
    function: str | None = None
    for line in text.splitlines():
        header = _ARCH_HEADER_RE.match(line)
        if header:
            arch, function = header.group(1), None
            continue
        match = _FUNCTION_RE.match(line)
        if match:
            function = match.group(1)
            continue
        fields = _FIELD_RE.findall(line)
        if function is not None and fields:
            result.setdefault(arch, {}).setdefault(function, {k: int(v) for k, v in fields})
            function = None
    return result


def _identity(binary: Binary) -> tuple[str, int, int, int, int]:
    st = os.stat(binary.path)
    return os.path.realpath(binary.path), binary.offset, st.st_size, st.st_mtime_ns, st.st_ino


@functools.lru_cache(maxsize=32)
def _res_usage(identity: tuple[str, int, int, int, int], kernel: str) -> dict[str | None, dict[str, dict[str, int]]]:
    binary = Binary(Path(identity[0]), "", offset=identity[1])
    with tool_input(binary) as path:
        return parse_res_usage(cuobjdump(path, "-res-usage", "-fun", kernel))


@functools.lru_cache(maxsize=32)
def _sass(identity: tuple[str, int, int, int, int], kernel: str, cache_root: Path | None) -> dict[str, str]:
    """The kernel's SASS per architecture."""
    binary = Binary(Path(identity[0]), "", offset=identity[1])
    with tool_input(binary) as path:
        text = disassemble(path, cache_root, function=kernel)
    return {arch: functions[kernel] for arch, functions in sass_by_arch(text).items() if kernel in functions}


def kernel_archs(kernel: str, binary: Binary, *, cache_root: Path | None = None) -> tuple[str, ...]:
    """The architectures ``binary`` holds ``kernel``'s code for, newest first (``sm_90a`` before
    ``sm_90`` before ``sm_80``)."""
    return tuple(sorted(_sass(_identity(binary), kernel, cache_root), key=_arch_order, reverse=True))


def _arch_order(arch: str) -> tuple[int, str]:
    digits = re.sub(r"\D", "", arch)
    return (int(digits) if digits else 0, arch)


def _pick_arch(kernel: str, binary: Binary, arch: str | None, cache_root: Path | None) -> str:
    archs = kernel_archs(kernel, binary, cache_root=cache_root)
    if not archs:
        raise KernelNotInBinary(f"{binary.path} holds no code for {kernel}")
    if arch is None:
        return archs[0]
    if arch not in archs:
        raise KernelNotInBinary(f"{binary.path} holds {kernel} for {', '.join(archs)}, not for {arch}")
    return arch


def kernel_sass(kernel: str, binary: Binary, arch: str | None = None, *, cache_root: Path | None = None) -> str:
    """``kernel``'s SASS in ``binary`` for ``arch`` (default: the newest it holds)."""
    chosen = _pick_arch(kernel, binary, arch, cache_root)
    return _sass(_identity(binary), kernel, cache_root)[chosen]


def read_kernel(
    kernel: str,
    binary: Binary,
    *,
    arch: str | None = None,
    dynamic_shared_bytes: int | None = None,
    cache_root: Path | None = None,
) -> KernelReport:
    """What ``kernel`` uses in ``binary`` for ``arch`` (default: the newest architecture it holds
    code for). ``dynamic_shared_bytes`` is the launch's, from the measurement. Raises
    :class:`KernelNotInBinary`, :class:`~pytest_gpuperf._compile.cuda_module.ToolchainMissing`
    without cuobjdump or nvdisasm, and
    :class:`~pytest_gpuperf._diagnose.device_code.UnreadableBinary` when they fail on it."""
    chosen = _pick_arch(kernel, binary, arch, cache_root)
    sass = _sass(_identity(binary), kernel, cache_root)[chosen]
    usage = _res_usage(_identity(binary), kernel)
    fields = usage.get(chosen, {}).get(kernel) or usage.get(None, {}).get(kernel)
    if fields is None:
        raise KernelNotInBinary(f"cuobjdump -res-usage lists no {kernel} for {chosen} in {binary.path}")
    instructions = parse_instructions(sass)
    spill_stores = spill_loads = barriers = None
    warnings: tuple[str, ...] = ()
    if binary.log is not None:
        try:
            log = binary.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            log = ""
        from_log = parse_ptxas_resources(log).get(kernel)
        if from_log is not None:
            spill_stores, spill_loads = from_log["spill_stores"], from_log["spill_loads"]
            barriers = from_log["barriers"]
        warnings = tuple(
            w for w in _nvcc.parse_perf_warnings(log) if kernel in w and not w.startswith("spills in ")
        )  # spills are told as resources
    return KernelReport(
        kernel=kernel,
        arch=chosen,
        binary=str(binary.path),
        found_in=binary.found_in,
        registers=fields.get("REG", 0),
        stack_bytes=fields.get("STACK", 0),
        shared_bytes=fields.get("SHARED", 0),
        local_bytes=fields.get("LOCAL", 0),
        instructions=len(instructions),
        classes=class_counts(instructions),
        dynamic_shared_bytes=dynamic_shared_bytes,
        spill_stores=spill_stores,
        spill_loads=spill_loads,
        barriers=barriers,
        warnings=warnings,
    )


# --------------------------------------------------------------------------------------------
# Two sides

# (field, label, in bytes), in the order a change is told.
_COMPARED: tuple[tuple[str, str, bool], ...] = (
    ("registers", "registers", False),
    ("spill_stores", "spill stores", True),
    ("spill_loads", "spill loads", True),
    ("stack_bytes", "stack", True),
    ("local_bytes", "local", True),
    ("shared_bytes", "shared", True),
    ("dynamic_shared_bytes", "dynamic shared", True),
    ("barriers", "barriers", False),
)


@dataclasses.dataclass(frozen=True)
class ResourceChange:
    """One resource that differs between the two sides (None: unknown on that side)."""

    field: str
    label: str
    before: int | None
    after: int | None
    in_bytes: bool

    def __str__(self) -> str:
        show = format_bytes if self.in_bytes else (lambda n: "?" if n is None else str(n))
        return f"{self.label} {show(self.before)} -> {show(self.after)}"

    def to_json(self) -> dict[str, Any]:
        return {"field": self.field, "before": self.before, "after": self.after}

    @classmethod
    def from_json(cls, data: Any) -> ResourceChange:
        if not isinstance(data, dict) or data.get("field") not in {f for f, _, _ in _COMPARED}:
            raise ValueError(f"a resource change: expected an object with a known field, got {data!r}")
        _, label, in_bytes = next(c for c in _COMPARED if c[0] == data["field"])
        return cls(data["field"], label, data.get("before"), data.get("after"), in_bytes)


def resource_changes(before: KernelReport, after: KernelReport) -> tuple[ResourceChange, ...]:
    """The resources that differ, in a fixed order; one known on one side only counts as differing
    only when it is not zero there (a build log on one side must not read as a new spill)."""
    changes = []
    for field, label, in_bytes in _COMPARED:
        a, b = getattr(before, field), getattr(after, field)
        if a == b or (a is None and not b) or (b is None and not a):
            continue
        changes.append(ResourceChange(field, label, a, b, in_bytes))
    return tuple(changes)
