"""The CUDA driver API through ctypes, loaded once: every signature the timing subsystem calls, and
the reads that the graph walks share (a graph's nodes, a node's type, a kernel node's parameters
and function, a function's name)."""

from __future__ import annotations

import ctypes
import functools
from typing import Any

__all__ = [
    "DriverError",
    "KernelNodeParams",
    "MemsetNodeParams",
    "check",
    "function_name",
    "graph_nodes",
    "kernel_node",
    "load",
    "node_type",
]


class DriverError(RuntimeError):
    """A driver call failed; the text names the call and its CUresult."""


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


class MemsetNodeParams(ctypes.Structure):
    """CUDA_MEMSET_NODE_PARAMS (cuda.h)."""

    _fields_ = [
        ("dst", ctypes.c_uint64),
        ("pitch", ctypes.c_size_t),
        ("value", ctypes.c_uint),
        ("elementSize", ctypes.c_uint),
        ("width", ctypes.c_size_t),
        ("height", ctypes.c_size_t),
    ]


_P, _PP, _SIZE = ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t)
_SIGNATURES: dict[str, list[Any]] = {
    "cuGraphGetNodes": [_P, _PP, _SIZE],
    "cuGraphGetEdges": [_P, _PP, _PP, _SIZE],
    "cuGraphNodeGetType": [_P, ctypes.POINTER(ctypes.c_int)],
    "cuGraphChildGraphNodeGetGraph": [_P, _PP],
    "cuGraphKernelNodeGetParams_v2": [_P, ctypes.POINTER(KernelNodeParams)],
    "cuGraphKernelNodeGetAttribute": [_P, ctypes.c_int, _P],
    "cuGraphMemsetNodeGetParams": [_P, ctypes.POINTER(MemsetNodeParams)],
    "cuGraphMemcpyNodeGetParams": [_P, _P],
    "cuKernelGetFunction": [_PP, _P],
    "cuFuncGetAttribute": [ctypes.POINTER(ctypes.c_int), ctypes.c_int, _P],
    "cuGraphClone": [_PP, _P],
    "cuGraphNodeFindInClone": [_PP, _P, _P],
    "cuGraphDestroyNode": [_P],
    "cuGraphCreate": [_PP, ctypes.c_uint],
    "cuGraphAddChildGraphNode": [_PP, _P, _PP, ctypes.c_size_t, _P],
    "cuGraphInstantiateWithFlags": [_PP, _P, ctypes.c_ulonglong],
    "cuGraphUpload": [_P, _P],
    "cuGraphLaunch": [_P, _P],
    "cuGraphExecDestroy": [_P],
    "cuGraphDestroy": [_P],
    "cuFuncGetName": [ctypes.POINTER(ctypes.c_char_p), _P],  # CUDA 12.3
    "cuFuncGetParamInfo": [_P, ctypes.c_size_t, _SIZE, _SIZE],  # CUDA 12.4
    "cuFuncGetModule": [_PP, _P],
}


@functools.lru_cache(maxsize=1)
def load() -> Any:
    """libcuda with the signatures above; OSError where the library cannot be loaded. An entry point
    an older driver lacks (cuFuncGetName: CUDA 12.3, cuFuncGetParamInfo: 12.4, ...) stays missing:
    a call of it raises AttributeError, which its caller answers."""
    lib = ctypes.CDLL("libcuda.so.1")
    for name, argtypes in _SIGNATURES.items():
        entry = getattr(lib, name, None)
        if entry is not None:
            entry.argtypes = argtypes
    return lib


def check(status: int, call: str) -> None:
    if status != 0:
        raise DriverError(f"{call} returned CUresult {status}")


def graph_nodes(graph: int) -> list[int]:
    """The nodes of ``graph`` (a ``CUgraph``) in the order the driver lists them."""
    lib = load()
    count = ctypes.c_size_t(0)
    check(lib.cuGraphGetNodes(graph, None, ctypes.byref(count)), "cuGraphGetNodes")
    nodes = (ctypes.c_void_p * max(count.value, 1))()
    check(lib.cuGraphGetNodes(graph, nodes, ctypes.byref(count)), "cuGraphGetNodes")
    return [int(nodes[i] or 0) for i in range(count.value)]


def node_type(node: int) -> int:
    """The node's ``CUgraphNodeType``."""
    kind = ctypes.c_int(-1)
    check(load().cuGraphNodeGetType(node, ctypes.byref(kind)), "cuGraphNodeGetType")
    return kind.value


def kernel_node(node: int) -> tuple[KernelNodeParams, int]:
    """A kernel node's parameters and its ``CUfunction`` (0 where unknown): a node made from a
    ``CUkernel`` (cuLibrary) may carry no function, which ``cuKernelGetFunction`` then gives."""
    lib = load()
    params = KernelNodeParams()
    check(lib.cuGraphKernelNodeGetParams_v2(node, ctypes.byref(params)), "cuGraphKernelNodeGetParams")
    func = int(params.func or 0)
    if not func and params.kern:
        handle = ctypes.c_void_p()
        if lib.cuKernelGetFunction(ctypes.byref(handle), params.kern) == 0:
            func = int(handle.value or 0)
    return params, func


def function_name(func: int) -> str:
    """The name the driver gives a function (``cuFuncGetName``: mangled for C++ kernels)."""
    if not func:
        return "<unknown kernel>"
    name = ctypes.c_char_p()
    try:
        status = load().cuFuncGetName(ctypes.byref(name), func)
    except AttributeError:  # a driver older than CUDA 12.3
        return f"<kernel at 0x{func:x}>"
    if status != 0 or not name.value:
        return f"<kernel at 0x{func:x}>"
    return name.value.decode(errors="replace")
