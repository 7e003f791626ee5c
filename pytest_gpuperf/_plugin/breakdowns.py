"""Per-kernel breakdowns for the ``gpu_perf`` fixture: taken after a verdict (never between timed
samples), put in the test's records, and turned into the lines a failure message adds: what
changed against ``--gpu-perf-against``'s revision or against the breakdown stored with the
baseline, or the kernels of each side of an undecided claim."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any

from pytest_gpuperf._report.breakdown import explain, side_lines
from pytest_gpuperf._timing.breakdown import Breakdown
from pytest_gpuperf._timing.results import Variant

__all__ = ["Breakdowns"]

STORED_SIGNIFICANT_DIGITS = 4


class Breakdowns:
    """Takes breakdowns through the session's backend while holding the GPU."""

    def __init__(self, backend: Any, gpu_lock: Callable[[], AbstractContextManager[Any]]):
        self._take = getattr(backend, "breakdown", None)
        self._gpu_lock = gpu_lock

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
        return as_json(self.take(variant))

    def against(self, variant: Variant, rev: Variant, label: str) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
        """Both sides' breakdowns (now, at ``label``) and the lines saying what changed."""
        now, then = self.take(variant), self.take(rev)
        return as_json(now), as_json(then), explain(then, now, label, "now", _names(then, now))

    def baseline(self, variant: Variant, stored: Mapping[str, Any] | None) -> tuple[dict[str, Any], list[str]]:
        """The breakdown of ``variant`` now, and the lines saying what changed since the one stored
        with the baseline."""
        now = self.take(variant)
        if stored is None:
            lines = ["the baseline stores no kernel breakdown (one is stored when it is re-recorded)"]
            return as_json(now), lines + (
                side_lines(now, "now", display_names(now)) if isinstance(now, Breakdown) else []
            )
        try:
            then: Breakdown | str = Breakdown.from_json(stored)
        except ValueError as exc:
            then = f"the stored one is unreadable: {exc}"
        return as_json(now), explain(then, now, "the baseline", "now", _names(then, now))

    def sides(self, variants: Mapping[str, Variant]) -> tuple[dict[str, Any], list[str]]:
        """Each variant's kernels, by name (a claim between two variants compares different code)."""
        fields: dict[str, Any] = {}
        lines: list[str] = []
        for name, variant in variants.items():
            taken = self.take(variant)
            fields[name] = as_json(taken)
            lines += (
                side_lines(taken, repr(name), display_names(taken))
                if isinstance(taken, Breakdown)
                else [f"no kernel breakdown of {name!r}: {taken}"]
            )
        return fields, lines


def as_json(taken: Breakdown | str) -> dict[str, Any]:
    """A breakdown as records carry it, with readable names for mangled ones (``display_names``:
    a saved report is read where no demangler may be installed), or why there is none."""
    if not isinstance(taken, Breakdown):
        return {"unavailable": taken}
    names = {k: v for k, v in display_names(taken).items() if k != v}
    return taken.to_json() | ({"display_names": names} if names else {})


def stored_form(record_field: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A record's breakdown as a baseline keeps it: per-repeat times to a few significant digits."""
    if not record_field or "kernels" not in record_field:
        return None
    kernels = [
        {**k, "seconds": [float(f"{s:.{STORED_SIGNIFICANT_DIGITS}g}") for s in k.get("seconds", [])]}
        for k in record_field["kernels"]
    ]
    return {key: value for key, value in record_field.items() if key != "coverage"} | {"kernels": kernels}


def _names(*sides: Breakdown | str) -> dict[str, str]:
    return {k: v for side in sides if isinstance(side, Breakdown) for k, v in display_names(side).items()}


def display_names(b: Breakdown) -> dict[str, str]:
    """Readable names for mangled kernel names (the demangled name without parameters; the raw
    name where no demangler is installed)."""
    names = [k.name for k in b.kernels]
    try:
        from pytest_gpuperf._compile.kernel_report import demangle, kernel_key

        demangled = demangle(names)
    except Exception:  # no demangler here: the raw names still identify the kernels
        return {n: n for n in names}
    return {n: kernel_key(n, demangled.get(n, n)) for n in names}
