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
import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from pytest_gpuperf._timing.graphs import CHILD_GRAPH

__all__ = ["KernelNode", "kernel_nodes", "DriverGraphs"]

_KERNEL = 0
# CUfunction_attribute (cuda.h)
_SHARED_SIZE_BYTES, _LOCAL_SIZE_BYTES, _NUM_REGS = 1, 3, 4


class KernelNodeParams(ctypes.Structure):
    """CUDA_KERNEL_NODE_PARAMS_v2 (cuda.h)."""

    _fields_ = [
        ("func", ctypes.c_void_p),
        ("gridDimX", ctypes.c_uint),
        ("gridDimY", ctypes.c_uint),
        ("gridDimZ", ctypes.c_uint),
        ("blockDimX", ctypes.c_uint),
        ("blockDimY", ctypes.c_uint),
        ("blockDimZ", ctypes.c_uint),
        ("sharedMemBytes", ctypes.c_uint),
        ("kernelParams", ctypes.c_void_p),
        ("extra", ctypes.c_void_p),
        ("kern", ctypes.c_void_p),
        ("ctx", ctypes.c_void_p),
    ]


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


class DriverError(RuntimeError):
    """A driver call failed; the text names the call and its CUresult."""


@functools.lru_cache(maxsize=1)
def _driver() -> Any:
    lib = ctypes.CDLL("libcuda.so.1")
    p, pp, size = ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t)
    signatures: dict[str, list[Any]] = {
        "cuGraphGetNodes": [p, pp, size],
        "cuGraphNodeGetType": [p, ctypes.POINTER(ctypes.c_int)],
        "cuGraphChildGraphNodeGetGraph": [p, pp],
        "cuGraphKernelNodeGetParams_v2": [p, ctypes.POINTER(KernelNodeParams)],
        "cuKernelGetFunction": [pp, p],
        "cuFuncGetName": [ctypes.POINTER(ctypes.c_char_p), p],
        "cuFuncGetAttribute": [ctypes.POINTER(ctypes.c_int), ctypes.c_int, p],
        "cuGraphClone": [pp, p],
        "cuGraphNodeFindInClone": [pp, p, p],
        "cuGraphDestroyNode": [p],
        "cuGraphCreate": [pp, ctypes.c_uint],
        "cuGraphAddChildGraphNode": [pp, p, pp, ctypes.c_size_t, p],
        "cuGraphInstantiateWithFlags": [pp, p, ctypes.c_ulonglong],
        "cuGraphUpload": [p, p],
        "cuGraphLaunch": [p, p],
        "cuGraphExecDestroy": [p],
        "cuGraphDestroy": [p],
    }
    for name, argtypes in signatures.items():
        getattr(lib, name).argtypes = argtypes
    return lib


def _check(status: int, call: str) -> None:
    if status != 0:
        raise DriverError(f"{call} returned CUresult {status}")


def _nodes(graph: int) -> list[int]:
    lib = _driver()
    count = ctypes.c_size_t(0)
    _check(lib.cuGraphGetNodes(graph, None, ctypes.byref(count)), "cuGraphGetNodes")
    nodes = (ctypes.c_void_p * max(count.value, 1))()
    _check(lib.cuGraphGetNodes(graph, nodes, ctypes.byref(count)), "cuGraphGetNodes")
    return [int(nodes[i] or 0) for i in range(count.value)]


def _node_type(node: int) -> int:
    kind = ctypes.c_int(-1)
    _check(_driver().cuGraphNodeGetType(node, ctypes.byref(kind)), "cuGraphNodeGetType")
    return kind.value


def kernel_nodes(graph: int) -> list[KernelNode]:
    """The kernel nodes of ``graph`` (a ``CUgraph``), child graphs included, in the order the
    driver lists them (for a captured graph: the order they were enqueued)."""
    return list(_walk(graph))


def _walk(graph: int) -> Iterator[KernelNode]:
    lib = _driver()
    for node in _nodes(graph):
        kind = _node_type(node)
        if kind == CHILD_GRAPH:
            child = ctypes.c_void_p()
            _check(lib.cuGraphChildGraphNodeGetGraph(node, ctypes.byref(child)), "cuGraphChildGraphNodeGetGraph")
            yield from _walk(int(child.value or 0))
        elif kind == _KERNEL:
            yield _describe(graph, node)


def _describe(graph: int, node: int) -> KernelNode:
    lib = _driver()
    params = KernelNodeParams()
    _check(lib.cuGraphKernelNodeGetParams_v2(node, ctypes.byref(params)), "cuGraphKernelNodeGetParams")
    func = int(params.func or 0)
    if not func and params.kern:  # a node made from a CUkernel (cuLibrary) may carry no CUfunction
        handle = ctypes.c_void_p()
        if lib.cuKernelGetFunction(ctypes.byref(handle), params.kern) == 0:
            func = int(handle.value or 0)
    return KernelNode(
        graph=graph,
        node=node,
        name=_function_name(func),
        grid=(params.gridDimX, params.gridDimY, params.gridDimZ),
        block=(params.blockDimX, params.blockDimY, params.blockDimZ),
        dynamic_smem=int(params.sharedMemBytes),
        registers=_attribute(func, _NUM_REGS),
        static_smem=_attribute(func, _SHARED_SIZE_BYTES),
        local_bytes=_attribute(func, _LOCAL_SIZE_BYTES),
    )


def _function_name(func: int) -> str:
    if not func:
        return "<unknown kernel>"
    name = ctypes.c_char_p()
    try:
        status = _driver().cuFuncGetName(ctypes.byref(name), func)
    except AttributeError:  # a driver older than CUDA 12.3
        return f"<kernel at 0x{func:x}>"
    if status != 0 or not name.value:
        return f"<kernel at 0x{func:x}>"
    return name.value.decode(errors="replace")


def _attribute(func: int, attribute: int) -> int | None:
    if not func:
        return None
    value = ctypes.c_int(0)
    if _driver().cuFuncGetAttribute(ctypes.byref(value), attribute, func) != 0:
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
        lib = _driver()
        clone = ctypes.c_void_p()
        _check(lib.cuGraphClone(ctypes.byref(clone), kernel.graph), "cuGraphClone")
        self._graphs.append(int(clone.value or 0))
        kept = ctypes.c_void_p()
        _check(lib.cuGraphNodeFindInClone(ctypes.byref(kept), kernel.node, clone), "cuGraphNodeFindInClone")
        for node in _nodes(int(clone.value or 0)):
            if node != int(kept.value or 0) and _node_type(node) in (_KERNEL, CHILD_GRAPH):
                _check(lib.cuGraphDestroyNode(node), "cuGraphDestroyNode")
        return int(clone.value or 0)

    def repeated(self, graph: int, copies: int) -> Callable[[], None]:
        """A replay of ``copies`` copies of ``graph``, one after another, uploaded and ready."""
        lib = _driver()
        outer = ctypes.c_void_p()
        _check(lib.cuGraphCreate(ctypes.byref(outer), 0), "cuGraphCreate")
        self._graphs.append(int(outer.value or 0))
        previous: ctypes.c_void_p | None = None
        for _ in range(copies):
            node = ctypes.c_void_p()
            deps = ctypes.byref(previous) if previous is not None else None
            _check(
                lib.cuGraphAddChildGraphNode(ctypes.byref(node), outer, deps, 1 if previous is not None else 0, graph),
                "cuGraphAddChildGraphNode",
            )
            previous = node
        executable = ctypes.c_void_p()
        _check(lib.cuGraphInstantiateWithFlags(ctypes.byref(executable), outer, 0), "cuGraphInstantiate")
        self._execs.append(int(executable.value or 0))
        _check(lib.cuGraphUpload(executable, self._stream), "cuGraphUpload")
        stream = self._stream

        def replay() -> None:
            _check(lib.cuGraphLaunch(executable, stream), "cuGraphLaunch")

        return replay

    def close(self) -> None:
        lib = _driver()
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
