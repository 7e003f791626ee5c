"""One kernel whose time moved, explained from its two binaries: :func:`explain_kernel` reads the
kernel's resources on each side and compares its SASS, and never raises for a side it cannot
read: the result says why instead, so a failure message can always show it."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path
from typing import Any

from pytest_gpuperf._compile.cuda_module import ToolchainMissing
from pytest_gpuperf._compile.kernel_report import demangle, kernel_key
from pytest_gpuperf._diagnose.binaries import BinarySearch
from pytest_gpuperf._diagnose.device_code import Binary, UnreadableBinary
from pytest_gpuperf._diagnose.resources import (
    KernelNotInBinary,
    KernelReport,
    ResourceChange,
    kernel_archs,
    kernel_sass,
    read_kernel,
    resource_changes,
)
from pytest_gpuperf._diagnose.sass_diff import SassDiff, sass_diff
from pytest_gpuperf.errors import UnsafePathError

__all__ = ["KernelDiff", "display_name", "explain_kernel"]

_UNREADABLE = (KernelNotInBinary, ToolchainMissing, UnreadableBinary, UnsafePathError, OSError)


@dataclasses.dataclass(frozen=True)
class KernelDiff:
    """A kernel's resources on each side of a comparison and the difference of its SASS."""

    kernel: str  # the driver's name
    name: str  # the short demangled name shown to people
    before: KernelReport | None
    after: KernelReport | None
    before_missing: str | None = None  # why there is no before report
    after_missing: str | None = None
    changes: tuple[ResourceChange, ...] = ()
    sass: SassDiff | None = None

    def render_lines(self, limit: int = 8) -> list[str]:
        """At most ``limit`` terminal lines: the kernel and where each side came from, what its
        resources did, the SASS summary and as much of the SASS diff as fits."""
        limit = max(limit, 1)
        lines = [self._headline()]
        before, after = self.before, self.after
        if before is not None and after is not None:
            if self.changes:
                lines.append("resources: " + ", ".join(str(c) for c in self.changes))
            else:
                lines.append("resources unchanged: " + after.summary())
            new_warnings = [w for w in after.warnings if w not in before.warnings]
            lines += [f"new ptxas warning: {w}" for w in new_warnings]
        else:
            for side, report in (("before", before), ("after", after)):
                if report is not None:
                    lines += [f"{side}: {report.summary()}", f"{side}: {report.class_summary()}"]
        if self.sass is not None:
            room = limit - len(lines)
            if room > 0:
                lines += self.sass.render_lines(room)
        return lines[:limit]

    def _headline(self) -> str:
        sides = []
        for side, report, missing in (
            ("before", self.before, self.before_missing),
            ("after", self.after, self.after_missing),
        ):
            if report is not None:
                sides.append(f"{side} {report.arch} ({report.found_in})")
            else:
                sides.append(f"{side}: {missing or 'no binary'}")
        return f"{self.name}: " + "; ".join(sides)

    def to_json(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "name": self.name,
            "before": self.before.to_json() if self.before is not None else None,
            "after": self.after.to_json() if self.after is not None else None,
            "before_missing": self.before_missing,
            "after_missing": self.after_missing,
            "changes": [c.to_json() for c in self.changes],
            "sass": self.sass.to_json() if self.sass is not None else None,
        }

    @classmethod
    def from_json(cls, data: Any) -> KernelDiff:
        if not isinstance(data, dict) or not isinstance(data.get("kernel"), str):
            raise ValueError(f"a kernel diff: expected an object with a kernel, got {data!r}")
        before, after, sass = data.get("before"), data.get("after"), data.get("sass")
        return cls(
            kernel=data["kernel"],
            name=str(data.get("name") or data["kernel"]),
            before=KernelReport.from_json(before) if before is not None else None,
            after=KernelReport.from_json(after) if after is not None else None,
            before_missing=data.get("before_missing"),
            after_missing=data.get("after_missing"),
            changes=tuple(ResourceChange.from_json(c) for c in data.get("changes", ())),
            sass=SassDiff.from_json(sass) if sass is not None else None,
        )


def display_name(kernel: str) -> str:
    """The short name of a kernel for people: ``_Z5scaleIfEvPT_S0_`` -> ``scale<float>``, as the
    compile-time tier keys its budgets; the name itself where no demangler is installed."""
    try:
        return kernel_key(kernel, demangle([kernel])[kernel])
    except (ToolchainMissing, OSError, subprocess.SubprocessError):
        return kernel


def _side(side: Binary | BinarySearch | None) -> tuple[Binary | None, str | None]:
    if isinstance(side, BinarySearch):
        return side.binary, side.reason
    return side, None if side is not None else "no binary given"


def _common_arch(kernel: str, a: Binary, b: Binary, cache_root: Path | None) -> str | None:
    """The newest architecture both binaries hold the kernel for, if any."""
    try:
        theirs = set(kernel_archs(kernel, b, cache_root=cache_root))
        return next((arch for arch in kernel_archs(kernel, a, cache_root=cache_root) if arch in theirs), None)
    except _UNREADABLE:
        return None


def explain_kernel(
    kernel: str,
    before: Binary | BinarySearch | None,
    after: Binary | BinarySearch | None,
    *,
    dynamic_smem: tuple[int | None, int | None] = (None, None),
    arch: str | None = None,
    operands: bool = False,
    context: int = 2,
    max_diff_lines: int = 40,
    cache_root: Path | None = None,
) -> KernelDiff:
    """Explain ``kernel`` (the driver's name for it) from its binary on each side: resources, the
    changes between them and a SASS diff (see :func:`~pytest_gpuperf._diagnose.sass_diff.sass_diff`
    for ``operands``, ``context`` and ``max_diff_lines``). A side is a :class:`Binary`, the
    :class:`BinarySearch` that looked for it, or None. ``dynamic_smem`` is each side's launch's
    dynamic shared memory. ``arch`` picks the architecture; by default the newest both sides hold."""
    binaries = [_side(before), _side(after)]
    if arch is None and binaries[0][0] is not None and binaries[1][0] is not None:
        arch = _common_arch(kernel, binaries[0][0], binaries[1][0], cache_root)
    reports: list[KernelReport | None] = [None, None]
    sass: list[str | None] = [None, None]
    missing: list[str | None] = [None, None]
    for index, (binary, reason) in enumerate(binaries):
        if binary is None:
            missing[index] = reason
            continue
        try:
            report = read_kernel(
                kernel, binary, arch=arch, dynamic_shared_bytes=dynamic_smem[index], cache_root=cache_root
            )
            sass[index] = kernel_sass(kernel, binary, report.arch, cache_root=cache_root)
            reports[index] = report
        except _UNREADABLE as exc:
            missing[index] = str(exc)
    a, b = reports
    diff = None
    if sass[0] is not None and sass[1] is not None:
        diff = sass_diff(sass[0], sass[1], context=context, max_lines=max_diff_lines, operands=operands)
    return KernelDiff(
        kernel=kernel,
        name=display_name(kernel),
        before=a,
        after=b,
        before_missing=missing[0],
        after_missing=missing[1],
        changes=resource_changes(a, b) if a is not None and b is not None else (),
        sass=diff,
    )
