"""A variant's per-kernel breakdown on a GPU: its launch captured once more (after the verdict),
the graph's kernel nodes read through the driver, and each kernel's own time:

- where torch's profiler can trace CUDA (CUPTI), from the kernel records of the whole graph's
  replays: each kernel in place, in its launch's order, with the caches as its neighbours leave
  them;
- elsewhere, each kernel replayed alone in a clone of the graph that keeps every node but the
  other kernels (``kernel_nodes``): hot, and blind to what the other kernels set up for it.

The whole launch is timed too (replays of the captured graph between events), interleaved with
the kernels repeat by repeat.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from pytest_gpuperf._timing import audit, driver, graphs, kernel_nodes, streams
from pytest_gpuperf._timing.breakdown import Breakdown, KernelTime
from pytest_gpuperf._timing.kernel_names import identifier

REPEATS = 30
_Key = tuple[str, tuple[int, int, int], tuple[int, int, int], int]


def take_breakdown(
    cp: Any, stream: Any, timing_stream: streams.TimingStream, launch: Callable[[], Any]
) -> Breakdown | str:
    """The breakdown of one ``launch`` (bound to the timing stream, which is current), or why there
    is none. Must run with the variant's device current."""
    try:
        launch()
        stream.synchronize()
        keep, handle = capture_kept(stream, timing_stream, launch)
    except Exception as exc:  # any failure only means no breakdown
        return f"the launch could not be captured into a CUDA graph ({type(exc).__name__}: {_first_line(exc)})"
    timer = kernel_nodes.DriverGraphs(int(stream.ptr))
    try:
        nodes = kernel_nodes.kernel_nodes(handle)
        if not nodes:
            return "the captured launch holds no kernel"
        whole = _replay(cp, stream, timer, handle)
        in_place = _traced(timer.repeated(handle, 1), stream, nodes)
        alone = [] if in_place else [_replay(cp, stream, timer, timer.only(node)) for node in nodes]
        runs: list[list[float]] = [[] for _ in range(len(nodes) + 1)]
        for _ in range(REPEATS):  # interleaved, so a drift of clocks shows in every kernel alike
            for i, (replay, copies) in enumerate([whole, *alone]):
                runs[i].append(_time(cp, stream, replay) / copies)
        stream.synchronize()
    except driver.DriverError as exc:
        return f"the driver refused to read or replay the captured graph ({exc})"
    finally:
        timer.close()
        del keep
    return Breakdown(
        kernels=_merge(nodes, in_place or runs[1:]),
        launch_s=sorted(runs[0])[len(runs[0]) // 2],
        source="cupti" if in_place else "graph nodes",
        repeats=REPEATS,
    )


def _traced(replay: Callable[[], None], stream: Any, nodes: list[kernel_nodes.KernelNode]) -> list[list[float]] | None:
    """Each node's own time in REPEATS replays of the whole graph, from CUPTI's kernel records
    (torch's profiler); None where tracing is unavailable or its records cannot be matched to
    the nodes one for one, in order."""
    if not audit.trace_available():
        return None
    from torch.profiler import ProfilerActivity, profile

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(REPEATS):
                    replay()
                stream.synchronize()
            events = list(prof.profiler.kineto_results.events())
    except Exception:  # the profiler is an optional view: the nodes are timed alone instead
        return None
    kernels = sorted((e for e in events if _is_kernel(e)), key=lambda e: int(e.start_ns()))
    if len(kernels) != REPEATS * len(nodes):
        return None
    runs: list[list[float]] = [[] for _ in nodes]
    for r in range(REPEATS):
        for i, (node, event) in enumerate(zip(nodes, kernels[r * len(nodes) : (r + 1) * len(nodes)], strict=True)):
            if not _same_kernel(node.name, str(event.name())):
                return None
            runs[i].append((int(event.end_ns()) - int(event.start_ns())) * 1e-9)
    return runs


def _is_kernel(event: Any) -> bool:
    try:
        name = str(event.name())
        return str(event.device_type()).endswith("CUDA") and not name.startswith(("Memset", "Memcpy", "Memory"))
    except Exception:
        return False


def _same_kernel(node_name: str, traced_name: str) -> bool:
    """Whether CUPTI's (demangled) name is the node's: its unqualified identifier appears in it."""
    return identifier(node_name) in traced_name


def capture_kept(stream: Any, timing_stream: streams.TimingStream, launch: Callable[[], Any]) -> tuple[Any, int]:
    """The launch captured with its graph kept for reading: through torch where torch is in use
    (its private pool keeps allocations made during capture valid while the graph lives)."""
    if streams.torch_in_use():
        captured = graphs.capture_torch(timing_stream.torch(), launch, keep_graph=True)
        return captured.keepalive, int(captured.keepalive.raw_cuda_graph())
    captured = graphs.capture_cupy(stream, launch, upload=False)
    return captured.keepalive, int(getattr(captured.keepalive, "graph", 0) or 0)


def _replay(cp: Any, stream: Any, timer: kernel_nodes.DriverGraphs, graph: int) -> tuple[Callable[[], None], int]:
    """A replay of enough copies of ``graph`` to last about 200 µs, warmed up, and its copy count."""
    once = timer.repeated(graph, 1)
    once()
    one_s = _time(cp, stream, once)
    copies = kernel_nodes.copies_for(one_s)
    replay = timer.repeated(graph, copies) if copies > 1 else once
    replay()
    return replay, copies


def _time(cp: Any, stream: Any, replay: Callable[[], None]) -> float:
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record(stream)
    replay()
    end.record(stream)
    end.synchronize()
    return float(cp.cuda.get_elapsed_time(start, end)) * 1e-3


def _merge(nodes: list[kernel_nodes.KernelNode], runs: list[list[float]]) -> tuple[KernelTime, ...]:
    """One entry per kernel and launch configuration: its calls' times summed repeat by repeat."""
    merged: dict[_Key, tuple[kernel_nodes.KernelNode, int, list[float]]] = {}
    for node, times in zip(nodes, runs, strict=True):
        key = (node.name, node.grid, node.block, node.dynamic_smem)
        if key in merged:
            first, calls, total = merged[key]
            merged[key] = (first, calls + 1, [a + b for a, b in zip(total, times, strict=True)])
        else:
            merged[key] = (node, 1, list(times))
    return tuple(
        KernelTime(
            name=node.name,
            grid=node.grid,
            block=node.block,
            dynamic_smem=node.dynamic_smem,
            seconds=tuple(total),
            calls=calls,
            registers=node.registers,
            static_smem=node.static_smem,
            local_bytes=node.local_bytes,
        )
        for node, calls, total in merged.values()
    )


def _first_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__
