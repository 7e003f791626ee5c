"""A variant's launches read as ``LaunchIdentity``s on a GPU (``--gpu-perf-changed-only``): each
launch run once, then captured into a graph the way a breakdown captures it
(``cupy_breakdown.capture_kept``: through torch where torch is in use) and the graph read through
the driver (``driver_identity``) while it is alive."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pytest_gpuperf._timing import driver, driver_identity
from pytest_gpuperf._timing.cupy_breakdown import capture_kept
from pytest_gpuperf._timing.launch_identity import LaunchIdentity
from pytest_gpuperf._timing.streams import TimingStream

__all__ = ["take_identity"]


def take_identity(
    stream: Any, timing_stream: TimingStream, launches: Sequence[Callable[[], Any]]
) -> tuple[LaunchIdentity, ...] | str:
    """The identity of each launch (bound to the timing stream, which is current), or why one
    cannot be read. Must run with the variant's device current."""
    out: list[LaunchIdentity] = []
    for launch in launches:
        try:
            launch()
            stream.synchronize()
            keep, handle = capture_kept(stream, timing_stream, launch)
        except Exception as exc:
            return f"the launch could not be captured into a CUDA graph ({type(exc).__name__}: {_first_line(exc)})"
        try:
            out.append(driver_identity.read_graph(handle))
        except driver.DriverError as exc:
            return f"the driver refused to read the captured graph ({exc})"
        finally:
            del keep
    return tuple(out)


def _first_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__
