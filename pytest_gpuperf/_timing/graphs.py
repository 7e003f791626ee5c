"""Capturing launches into CUDA graphs, and counting the GPU work a captured graph holds.

Two capture paths, one result (a graph replayed on the timing stream):

- through CuPy (``Stream.begin_capture``) when the test process uses CuPy alone;
- through ``torch.cuda.CUDAGraph`` when it has imported torch: torch routes tensor
  allocations made during capture to the graph's private memory pool, so a launch such as
  ``torch.mul(x, 2)`` (which allocates its output) stays correct when replayed.

A trial capture of one launch through CuPy is inspected through the driver
(``cuGraphGetNodes``): a graph holding no kernel, copy or memset node means the launch
enqueued its work somewhere else, and a replay would time nothing.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pytest_gpuperf._timing import driver

# CUgraphNodeType (cuda.h): the node types that do GPU work, and the child-graph type.
_WORK_NODE_TYPES = {0: "kernel", 1: "memcpy", 2: "memset", 12: "batch_mem_op"}
CHILD_GRAPH = 4


@dataclass(frozen=True)
class Captured:
    """A captured and instantiated graph, and how many GPU operations it holds (None: unknown)."""

    replay: Callable[[], None]
    work_nodes: int | None
    keepalive: Any = None  # the framework's graph object, which owns the executable graph


@functools.lru_cache(maxsize=1)
def _libcuda() -> Any | None:
    try:
        return driver.load()
    except OSError:
        return None


def count_work_nodes(graph_handle: int) -> int | None:
    """Kernel, copy and memset nodes in a ``cudaGraph_t`` (child graphs included); None if unreadable."""
    lib = _libcuda()
    if lib is None or not graph_handle:
        return None
    count = ctypes.c_size_t(0)
    if lib.cuGraphGetNodes(ctypes.c_void_p(graph_handle), None, ctypes.byref(count)) != 0:
        return None
    nodes = (ctypes.c_void_p * max(count.value, 1))()
    if lib.cuGraphGetNodes(ctypes.c_void_p(graph_handle), nodes, ctypes.byref(count)) != 0:
        return None
    work = 0
    for i in range(count.value):
        kind = ctypes.c_int(-1)
        if lib.cuGraphNodeGetType(nodes[i], ctypes.byref(kind)) != 0:
            return None
        if kind.value in _WORK_NODE_TYPES:
            work += 1
        elif kind.value == CHILD_GRAPH:
            child = ctypes.c_void_p()
            if lib.cuGraphChildGraphNodeGetGraph(nodes[i], ctypes.byref(child)) != 0:
                return None
            inner = count_work_nodes(child.value or 0)
            if inner is None:
                return None
            work += inner
    return work


def capture_cupy(stream: Any, body: Callable[[], None], upload: bool = True) -> Captured:
    """Capture ``body`` on a CuPy stream (which must be current); upload the graph for replay."""
    stream.begin_capture()
    try:
        body()
    except BaseException:
        # Ending the capture returns the stream to normal use; the error that matters is the body's.
        try:
            stream.end_capture()
        except Exception:
            pass
        raise
    graph = stream.end_capture()
    if upload and hasattr(graph, "upload"):
        graph.upload(stream)
    return Captured(lambda: graph.launch(stream), count_work_nodes(int(getattr(graph, "graph", 0) or 0)), graph)


def capture_torch(stream: Any, body: Callable[[], None], keep_graph: bool = False) -> Captured:
    """Capture ``body`` with ``torch.cuda.CUDAGraph`` on a torch stream that is current.

    Its GPU operations are not counted: the trial capture (``capture_cupy``) counted them.
    ``keep_graph`` keeps the ``cudaGraph_t`` (``raw_cuda_graph()``) for reading its nodes; a
    torch without that argument raises TypeError.
    """
    import torch

    graph = torch.cuda.CUDAGraph(keep_graph=True) if keep_graph else torch.cuda.CUDAGraph()
    graph.capture_begin(capture_error_mode="relaxed")
    try:
        body()
    except BaseException:
        try:
            graph.capture_end()
        except Exception:
            pass
        raise
    graph.capture_end()

    def replay() -> None:
        with torch.cuda.stream(stream):
            graph.replay()

    return Captured(replay, None, graph)
