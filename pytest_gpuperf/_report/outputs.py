"""The run's outputs at session end: the JSON report, the baseline update, the charts.

The JSON report is written first, so the run survives whatever happens after; then every other
output is attempted, each on its own: one unwritable baseline file does not stop the others.
Every outcome, written or not, becomes a line of the terminal summary; nothing raises.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_gpuperf.errors import GpuPerfError


@dataclass(frozen=True)
class OutputOutcome:
    """One output: what it is, where, and the error that kept it from being written (None: written)."""

    what: str
    path: Path | None
    error: str | None = None
    detail: str = ""

    @property
    def line(self) -> str:
        where = f" {self.path}" if self.path else ""
        if self.error:
            return f"gpu-perf: {self.what}{where} NOT written: {self.error}"
        return f"gpu-perf: {self.what}{where}" + (f" ({self.detail})" if self.detail else "")


def attempt(what: str, path: Path | None, write: Callable[[], str | None]) -> OutputOutcome:
    """Run ``write`` (which returns an optional detail); its failure becomes the outcome's error."""
    try:
        detail = write() or ""
    except (OSError, GpuPerfError, ValueError, TypeError) as exc:
        return OutputOutcome(what, path, _one_line(exc))
    return OutputOutcome(what, path, None, detail)


def write_report(path: Path, payload: dict[str, Any]) -> OutputOutcome:
    from pytest_gpuperf._store.files import atomic_write_json

    return attempt("JSON report", path, lambda: atomic_write_json(path, payload))


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if isinstance(exc, OSError) and exc.strerror:
        text = f"{exc.strerror} ({exc.filename or ''})".replace(" ()", "")
    return text or type(exc).__name__
