"""The kernels a captured CUDA graph holds, read through the driver, and each one timed alone.

For each kernel node: its function's name (``cuFuncGetName``: mangled for C++ kernels), grid,
block, dynamic shared memory, and the function's registers, static shared memory and local
memory (``cuFuncGetAttribute``). To time one kernel alone, the graph is cloned and the clone's
other kernels destroyed, which keeps the node exactly as captured (cluster dimensions and other
node attributes included) and the memsets and copies it may depend on; a graph of ``copies``
such clones, one after another, is replayed between two events. The whole launch is timed the same way, so the kernels' times and the launch's
compare like with like.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from pytest_gpuperf._timing import driver
from pytest_gpuperf._timing.graphs import CHILD_GRAPH

__all__ = ["KernelNode", "kernel_nodes", "DriverGraphs"]

_KERNEL = 0
# CUfunction_attribute (cuda.h)
_SHARED_SIZE_BYTES, _LOCAL_SIZE_BYTES, _NUM_REGS = 1, 3, 4


@dataclass(frozen=True)
class KernelNode:
    """One kernel node of a graph (``graph``: the graph that holds it, a child graph included)."""

    graph: int
    node: int
    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_smem: int
    registers: int | None
    static_smem: int | None
    local_bytes: int | None


def kernel_nodes(graph: int) -> list[KernelNode]:
    """The kernel nodes of ``graph`` (a ``CUgraph``), child graphs included, in the order the
    driver lists them (for a captured graph: the order they were enqueued)."""
    return list(_walk(graph))


def _walk(graph: int) -> Iterator[KernelNode]:
    for node in driver.graph_nodes(graph):
        kind = driver.node_type(node)
        if kind == CHILD_GRAPH:
            child = ctypes.c_void_p()
            driver.check(
                driver.load().cuGraphChildGraphNodeGetGraph(node, ctypes.byref(child)), "cuGraphChildGraphNodeGetGraph"
            )
            yield from _walk(int(child.value or 0))
        elif kind == _KERNEL:
            yield _describe(graph, node)


def _describe(graph: int, node: int) -> KernelNode:
    params, func = driver.kernel_node(node)
    return KernelNode(
        graph=graph,
        node=node,
        name=driver.function_name(func),
        grid=(params.gridDimX, params.gridDimY, params.gridDimZ),
        block=(params.blockDimX, params.blockDimY, params.blockDimZ),
        dynamic_smem=int(params.sharedMemBytes),
        registers=_attribute(func, _NUM_REGS),
        static_smem=_attribute(func, _SHARED_SIZE_BYTES),
        local_bytes=_attribute(func, _LOCAL_SIZE_BYTES),
    )


def _attribute(func: int, attribute: int) -> int | None:
    if not func:
        return None
    value = ctypes.c_int(0)
    if driver.load().cuFuncGetAttribute(ctypes.byref(value), attribute, func) != 0:
        return None
    return int(value.value)


class DriverGraphs:
    """Graphs built for timing, destroyed together by ``close``."""

    def __init__(self, stream: int):
        self._stream = stream
        self._graphs: list[int] = []
        self._execs: list[int] = []

    def only(self, kernel: KernelNode) -> int:
        """A clone of ``kernel.graph`` without its other kernels: the memsets and copies stay, since
        a kernel may need them (a library zeroes a workspace before its GEMM)."""
        lib = driver.load()
        clone = ctypes.c_void_p()
        driver.check(lib.cuGraphClone(ctypes.byref(clone), kernel.graph), "cuGraphClone")
        self._graphs.append(int(clone.value or 0))
        kept = ctypes.c_void_p()
        driver.check(lib.cuGraphNodeFindInClone(ctypes.byref(kept), kernel.node, clone), "cuGraphNodeFindInClone")
        for node in driver.graph_nodes(int(clone.value or 0)):
            if node != int(kept.value or 0) and driver.node_type(node) in (_KERNEL, CHILD_GRAPH):
                driver.check(lib.cuGraphDestroyNode(node), "cuGraphDestroyNode")
        return int(clone.value or 0)

    def repeated(self, graph: int, copies: int) -> Callable[[], None]:
        """A replay of ``copies`` copies of ``graph``, one after another, uploaded and ready."""
        lib = driver.load()
        outer = ctypes.c_void_p()
        driver.check(lib.cuGraphCreate(ctypes.byref(outer), 0), "cuGraphCreate")
        self._graphs.append(int(outer.value or 0))
        previous: ctypes.c_void_p | None = None
        for _ in range(copies):
            node = ctypes.c_void_p()
            deps = ctypes.byref(previous) if previous is not None else None
            driver.check(
                lib.cuGraphAddChildGraphNode(ctypes.byref(node), outer, deps, 1 if previous is not None else 0, graph),
                "cuGraphAddChildGraphNode",
            )
            previous = node
        executable = ctypes.c_void_p()
        driver.check(lib.cuGraphInstantiateWithFlags(ctypes.byref(executable), outer, 0), "cuGraphInstantiate")
        self._execs.append(int(executable.value or 0))
        driver.check(lib.cuGraphUpload(executable, self._stream), "cuGraphUpload")
        stream = self._stream

        def replay() -> None:
            driver.check(lib.cuGraphLaunch(executable, stream), "cuGraphLaunch")

        return replay

    def close(self) -> None:
        lib = driver.load()
        for executable in self._execs:
            lib.cuGraphExecDestroy(executable)
        for graph in self._graphs:
            lib.cuGraphDestroy(graph)
        self._execs.clear()
        self._graphs.clear()


def copies_for(one_s: float, target_s: float = 200e-6, most: int = 256) -> int:
    """How many copies of a graph make one replay last about ``target_s``."""
    if not one_s > 0:
        return most
    return max(1, min(most, math.ceil(target_s / one_s)))
