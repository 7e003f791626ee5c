"""Per-kernel breakdowns for the ``gpu_perf`` fixture: taken after a verdict (never between timed
samples), put in the test's records, and turned into the lines a failure message adds: what
changed against ``--gpu-perf-against``'s revision or against the breakdown stored with the
baseline, or the kernels of each side of an undecided claim."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from pytest_gpuperf._report.breakdown import INDENT, diff_lines, explain, side_lines
from pytest_gpuperf._timing.breakdown import Breakdown, KernelTime, diff
from pytest_gpuperf._timing.results import Variant

__all__ = ["Breakdowns"]

BINARIES_EXPLAINED = 1  # the kernel that moved most: its binaries are found and disassembled
BINARY_LINES = 5
MAX_LINE = 220

STORED_SIGNIFICANT_DIGITS = 4


class Breakdowns:
    """Takes breakdowns through the session's backend while holding the GPU."""

    def __init__(
        self,
        backend: Any,
        gpu_lock: Callable[[], AbstractContextManager[Any]],
        rootdir: Path,
        binaries: tuple[str, ...] = (),
    ):
        self._take = getattr(backend, "breakdown", None)
        self._gpu_lock = gpu_lock
        self._rootdir = rootdir
        self._binaries = binaries  # --gpu-perf-binaries: searched first

    def take(self, variant: Variant) -> Breakdown | str:
        """The breakdown of ``variant``, or why there is none (never an exception)."""
        if self._take is None:
            return "the timing backend gives no breakdowns"
        try:
            with self._gpu_lock():
                result = self._take(variant)
        except Exception as exc:  # a breakdown explains a verdict; it must never replace one
            return f"taking it failed ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})"
        return result if isinstance(result, (Breakdown, str)) else f"the backend returned {type(result).__name__}"

    def json(self, variant: Variant) -> dict[str, Any]:
        """The breakdown of ``variant`` as a record carries it, or why there is none."""
        taken = self.take(variant)
        return as_json(taken, display_names(taken))

    def against(
        self, variant: Variant, rev: Variant, label: str, rev_root: Path
    ) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]], list[str]]:
        """Both sides' breakdowns (now, at ``label`` whose tree is ``rev_root``), the binaries of
        the kernel that moved most explained (resources, SASS diff), and the lines saying it all."""
        now, then = self.take(variant), self.take(rev)
        names = display_names(then, now)
        if not (isinstance(now, Breakdown) and isinstance(then, Breakdown)):
            return as_json(now, names), as_json(then, names), [], explain(then, now, label, "now", names)
        changes = diff(then, now)
        lines = diff_lines(changes, label, "now", names)
        binaries: list[dict[str, Any]] = []
        for change in changes.moved[:BINARIES_EXPLAINED]:
            if change.before is None or change.after is None:
                continue
            kernel = explain_binaries(change.before, change.after, rev_root, self._rootdir, self._binaries)
            binaries.append(kernel.to_json())
            lines += [INDENT + line for line in binary_lines(kernel)]
        return as_json(now, names), as_json(then, names), binaries, lines

    def baseline(self, variant: Variant, stored: Mapping[str, Any] | None) -> tuple[dict[str, Any], list[str]]:
        """The breakdown of ``variant`` now, and the lines saying what changed since the one stored
        with the baseline."""
        now = self.take(variant)
        if stored is None:
            names = display_names(now)
            lines = ["the baseline stores no kernel breakdown (one is stored when it is re-recorded)"]
            return as_json(now, names), lines + (side_lines(now, "now", names) if isinstance(now, Breakdown) else [])
        try:
            then: Breakdown | str = Breakdown.from_json(stored)
        except ValueError as exc:
            then = f"the stored one is unreadable: {exc}"
        names = display_names(then, now)
        return as_json(now, names), explain(then, now, "the baseline", "now", names)

    def sides(self, variants: Mapping[str, Variant]) -> tuple[dict[str, Any], list[str]]:
        """Each variant's kernels, by name (a claim between two variants compares different code)."""
        fields: dict[str, Any] = {}
        lines: list[str] = []
        for name, variant in variants.items():
            taken = self.take(variant)
            names = display_names(taken)
            fields[name] = as_json(taken, names)
            lines += (
                side_lines(taken, repr(name), names)
                if isinstance(taken, Breakdown)
                else [f"no kernel breakdown of {name!r}: {taken}"]
            )
        return fields, lines


def explain_binaries(
    before: KernelTime, after: KernelTime, before_root: Path, after_root: Path, registered: tuple[str, ...] = ()
) -> Any:
    """The kernel's binary on each side (each side's builds told apart by their source tree where
    the plugin built them) explained: resources and SASS diff (``_diagnose``). Where one file is
    all that defines the kernel (a cache that records no source), the sides cannot be told apart:
    only the one side is read."""
    from pytest_gpuperf._diagnose.binaries import find_binary
    from pytest_gpuperf._diagnose.explain import explain_kernel

    found_after = find_binary(after.name, extra=registered, source_root=after_root, accept=_same_registers(after))
    found_before = find_binary(before.name, extra=registered, source_root=before_root, accept=_same_registers(before))
    if found_before.binary is not None and found_before.binary == found_after.binary:
        return explain_kernel(
            after.name,
            None,
            found_after,
            dynamic_smem=(before.dynamic_smem, after.dynamic_smem),
        )
    return explain_kernel(after.name, found_before, found_after, dynamic_smem=(before.dynamic_smem, after.dynamic_smem))


def _same_registers(kernel: KernelTime) -> Callable[[Any], bool]:
    """Accepts a binary whose kernel uses as many registers as the loaded one did: two caches'
    builds of one kernel name (Triton's, CuPy's) are often told apart by that alone."""

    def accept(binary: Any) -> bool:
        from pytest_gpuperf._diagnose.resources import read_kernel

        if kernel.registers is None:
            return True
        try:
            return read_kernel(kernel.name, binary).registers in (None, kernel.registers)
        except Exception:  # unreadable here: let the explanation say why
            return True

    return accept


def binary_lines(kernel: Any) -> list[str]:
    """A few terminal lines of a ``KernelDiff``: where neither side's binary was found, one line
    naming the places searched (the report keeps the whole search)."""
    if kernel.before is None and kernel.after is None:
        unreadable = " cannot be read" in f"{kernel.before_missing} {kernel.after_missing}"
        return [
            f"{kernel.name}: no binary of it found on either side (searched the plugin's nvcc and static-tier "
            "caches, CuPy's and Triton's caches and torch extensions"
            + (
                "; some hold its name but cuobjdump cannot read them, e.g. a cubin from a newer NVRTC"
                if unreadable
                else ""
            )
            + "; the JSON report lists the folders)"
        ]
    return [
        line if len(line) <= MAX_LINE else line[: MAX_LINE - 3] + "..." for line in kernel.render_lines(BINARY_LINES)
    ]


def as_json(taken: Breakdown | str, names: Mapping[str, str]) -> dict[str, Any]:
    """A breakdown as records carry it, with the readable names (``display_names``) of its
    mangled ones, since a saved report is read where no demangler may be installed; or why there
    is none."""
    if not isinstance(taken, Breakdown):
        return {"unavailable": taken}
    own = {k.name: names[k.name] for k in taken.kernels if names.get(k.name, k.name) != k.name}
    return taken.to_json() | ({"display_names": own} if own else {})


def stored_form(record_field: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A record's breakdown as a baseline keeps it: per-repeat times to a few significant digits."""
    if not record_field or "kernels" not in record_field:
        return None
    kernels = [
        {**k, "seconds": [float(f"{s:.{STORED_SIGNIFICANT_DIGITS}g}") for s in k.get("seconds", [])]}
        for k in record_field["kernels"]
    ]
    return {key: value for key, value in record_field.items() if key != "coverage"} | {"kernels": kernels}


def display_names(*sides: Breakdown | str) -> dict[str, str]:
    """Readable names for the mangled kernel names of ``sides`` (the demangled name without
    parameters; the raw name where no demangler is installed), from one demangler call."""
    names = sorted({k.name for side in sides if isinstance(side, Breakdown) for k in side.kernels})
    if not names:
        return {}
    try:
        from pytest_gpuperf._compile.kernel_report import demangle, kernel_key

        demangled = demangle(names)
    except Exception:  # no demangler here: the raw names still identify the kernels
        return {n: n for n in names}
    return {n: kernel_key(n, demangled.get(n, n)) for n in names}
