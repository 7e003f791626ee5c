"""Which streams a launch's GPU work ran on, traced by CUPTI through PyTorch's profiler.

A launch that sends part of its work to another stream (a library handle bound elsewhere,
a side stream it never joins) is timed short: the events and the captured graph see only
the part on the timing stream. Capture alone cannot see that part when it is on a stream
that is neither the timing stream nor the legacy default stream. CUPTI can: it reports every
kernel, copy and memset of the process with the stream it ran on, however short.

PyTorch ships CUPTI inside its profiler, so the trace runs where the test process has
imported torch; elsewhere it is reported as unavailable and the capture and drain checks
remain (``docs/launchers.md``).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class StreamTrace:
    """GPU operations of one traced launch: on the timing stream, and elsewhere by stream."""

    on_stream: int
    elsewhere: dict[int, list[str]] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return self.on_stream + sum(len(v) for v in self.elsewhere.values())

    def describe_elsewhere(self, limit: int = 4) -> str:
        names = [n for ops in self.elsewhere.values() for n in ops]
        shown = ", ".join(_short(n) for n in names[:limit])
        more = f" and {len(names) - limit} more" if len(names) > limit else ""
        return f"{len(names)} operation(s) on {len(self.elsewhere)} other stream(s): {shown}{more}"


def trace_available() -> bool:
    """True when the test process imported torch and its profiler can trace CUDA (Kineto/CUPTI)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        return bool(torch.cuda.is_available() and torch.autograd.kineto_available())
    except Exception:
        return False


def trace_launch(
    mark: Callable[[], None], call: Callable[[], Any], synchronize: Callable[[], None]
) -> StreamTrace | None:
    """Run ``mark`` (one memset on the timing stream, which names its CUPTI stream id), then
    ``call``, under the profiler; None when tracing is unavailable or failed."""
    if not trace_available():
        return None
    from torch.profiler import ProfilerActivity, profile

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                mark()
                call()
                synchronize()
            events = list(prof.profiler.kineto_results.events())
    except Exception:
        return None
    return split_by_stream(events)


def split_by_stream(events: list[Any]) -> StreamTrace | None:
    """Group the trace's GPU operations by stream; the first memset is the timing stream's mark."""
    gpu = [e for e in events if _is_gpu(e)]
    gpu.sort(key=_start)
    mark = next((e for e in gpu if "memset" in e.name().lower()), None)
    if mark is None:
        return None
    ours = mark.device_resource_id()
    on_stream = 0
    elsewhere: dict[int, list[str]] = {}
    for e in gpu:
        if e is mark:
            continue
        if e.device_resource_id() == ours:
            on_stream += 1
        else:
            elsewhere.setdefault(int(e.device_resource_id()), []).append(str(e.name()))
    return StreamTrace(on_stream, elsewhere)


def _is_gpu(event: Any) -> bool:
    try:
        return str(event.device_type()).endswith("CUDA")
    except Exception:
        return False


def _start(event: Any) -> int:
    try:
        return int(event.start_ns())
    except Exception:
        return 0


def _short(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."
