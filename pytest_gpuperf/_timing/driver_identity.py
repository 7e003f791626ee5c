"""Reading a captured graph's ``LaunchIdentity`` through the CUDA driver (ctypes), while the graph
is alive: the kernel nodes' parameters are read from the graph's own copy of them.

Kernel parameters are split with ``cuFuncGetParamInfo`` (CUDA 12.4 and later; without it no
parameter is readable and no launch is proven). Launch attributes are read per node
(``cuGraphKernelNodeGetAttribute``) as the bytes of the driver's value, function attributes with
``cuFuncGetAttribute``; an attribute the driver answers with "invalid value" or "not supported"
is one it does not know, recorded as such on both sides; any other failure leaves it unreadable. Memset and memcpy nodes are read as their parameter structures; other
node types carry no parameters here, and ``launch_identity.compare`` proves none of them.
"""

from __future__ import annotations

import ctypes

from pytest_gpuperf._timing import code_images, driver
from pytest_gpuperf._timing.launch_identity import KernelIdentity, LaunchIdentity, NodeIdentity

__all__ = ["read_graph"]

# CUgraphNodeType (cuda.h)
NODE_TYPES = {
    0: "kernel",
    1: "memcpy",
    2: "memset",
    3: "host",
    4: "graph",
    5: "empty",
    6: "event wait",
    7: "event record",
    8: "semaphore signal",
    9: "semaphore wait",
    10: "memory allocation",
    11: "memory free",
    12: "batch memory operation",
    13: "conditional",
}
# CUlaunchAttributeID (cuda.h) read from each kernel node
LAUNCH_ATTRIBUTES = {
    "access policy window": 1,
    "cooperative": 2,
    "cluster dimension": 4,
    "cluster scheduling policy": 5,
    "priority": 8,
}
# CUfunction_attribute (cuda.h), 0 .. 15
FUNCTION_ATTRIBUTES = (
    "max threads per block",
    "static shared memory",
    "constant memory",
    "local memory",
    "registers",
    "PTX version",
    "binary version",
    "cache mode CA",
    "max dynamic shared memory",
    "shared memory carveout",
    "cluster size must be set",
    "required cluster width",
    "required cluster height",
    "required cluster depth",
    "non-portable cluster size allowed",
    "cluster scheduling policy preference",
)
LAUNCH_ATTRIBUTE_VALUE_BYTES = 64  # sizeof(CUlaunchAttributeValue)
MEMCPY3D_BYTES = 200  # sizeof(CUDA_MEMCPY3D) on a 64-bit host
CUDA_ERROR_INVALID_VALUE = 1
UNKNOWN_ATTRIBUTE = frozenset({CUDA_ERROR_INVALID_VALUE, 801})  # CUDA_ERROR_NOT_SUPPORTED
MAX_PARAMS = 4096


def read_graph(graph: int) -> LaunchIdentity:
    """The identity of ``graph`` (a ``CUgraph``), child graphs included. Raises DriverError when
    the driver refuses to list the graph's nodes or edges."""
    lib = driver.load()
    nodes = driver.graph_nodes(graph)
    index = {node: i for i, node in enumerate(nodes)}
    edges = ctypes.c_size_t(0)
    driver.check(lib.cuGraphGetEdges(graph, None, None, ctypes.byref(edges)), "cuGraphGetEdges")
    sources = (ctypes.c_void_p * max(edges.value, 1))()
    targets = (ctypes.c_void_p * max(edges.value, 1))()
    if edges.value:  # asked for the edges of a graph that has none, the driver answers CUDA_ERROR_INVALID_VALUE
        driver.check(lib.cuGraphGetEdges(graph, sources, targets, ctypes.byref(edges)), "cuGraphGetEdges")
    pairs = frozenset(
        (index.get(int(sources[i] or 0), -1), index.get(int(targets[i] or 0), -1)) for i in range(edges.value)
    )
    return LaunchIdentity(tuple(_node(node) for node in nodes), pairs)


def _node(node: int) -> NodeIdentity:
    lib = driver.load()
    kind = driver.node_type(node)
    name = NODE_TYPES.get(kind, f"type {kind}")
    if name == "graph":
        child = ctypes.c_void_p()
        driver.check(lib.cuGraphChildGraphNodeGetGraph(node, ctypes.byref(child)), "cuGraphChildGraphNodeGetGraph")
        return NodeIdentity(name, child=read_graph(int(child.value or 0)))
    if name == "kernel":
        return NodeIdentity(name, kernel=_kernel(node))
    if name == "memset":
        memset = driver.MemsetNodeParams()
        if lib.cuGraphMemsetNodeGetParams(node, ctypes.byref(memset)) != 0:
            return NodeIdentity(name)
        return NodeIdentity(name, detail=tuple(getattr(memset, f[0]) for f in driver.MemsetNodeParams._fields_))
    if name == "memcpy":
        raw = ctypes.create_string_buffer(MEMCPY3D_BYTES + 56)  # room beyond the structure: never overrun
        if lib.cuGraphMemcpyNodeGetParams(node, raw) != 0:
            return NodeIdentity(name)
        return NodeIdentity(name, detail=raw.raw[:MEMCPY3D_BYTES])
    return NodeIdentity(name)


def _kernel(node: int) -> KernelIdentity:
    params, func = driver.kernel_node(node)
    values, unreadable = _parameters(func, int(params.kernelParams or 0), int(params.extra or 0))
    code = code_images.code_of(func)
    return KernelIdentity(
        name=driver.function_name(func),
        function=func,
        grid=(params.gridDimX, params.gridDimY, params.gridDimZ),
        block=(params.blockDimX, params.blockDimY, params.blockDimZ),
        dynamic_smem=int(params.sharedMemBytes),
        code=code[0] if code else None,
        code_basis=code[1] if code else "",
        attributes=_launch_attributes(node) + _function_attributes(func),
        params=values,
        params_unreadable=unreadable,
    )


def _parameters(func: int, kernel_params: int, extra: int) -> tuple[tuple[tuple[int, bytes], ...] | None, str]:
    """Each parameter's offset and bytes, or None and why not."""
    lib = driver.load()
    if not func:
        return None, "the node's function is unknown"
    if getattr(lib, "cuFuncGetParamInfo", None) is None:  # a driver older than CUDA 12.4
        return None, "this driver has no cuFuncGetParamInfo (CUDA 12.4 or later)"
    if not kernel_params:
        return None, "the node passes its parameters as one buffer (extra), not one by one" if extra else (
            "the node has no parameter list"
        )
    pointers = ctypes.cast(kernel_params, ctypes.POINTER(ctypes.c_void_p))
    out: list[tuple[int, bytes]] = []
    for i in range(MAX_PARAMS):
        offset, size = ctypes.c_size_t(0), ctypes.c_size_t(0)
        status = lib.cuFuncGetParamInfo(func, i, ctypes.byref(offset), ctypes.byref(size))
        if status == CUDA_ERROR_INVALID_VALUE:  # past the last parameter
            return tuple(out), ""
        if status != 0:
            return None, f"cuFuncGetParamInfo returned CUresult {status}"
        address = pointers[i]
        if not address:
            return None, f"parameter {i + 1} has no value in the node"
        out.append((int(offset.value), ctypes.string_at(address, size.value)))
    return None, f"more than {MAX_PARAMS} parameters"


def _launch_attributes(node: int) -> tuple[tuple[str, object], ...]:
    lib = driver.load()
    out: list[tuple[str, object]] = []
    for name, ident in LAUNCH_ATTRIBUTES.items():
        value = ctypes.create_string_buffer(LAUNCH_ATTRIBUTE_VALUE_BYTES)
        status = lib.cuGraphKernelNodeGetAttribute(node, ident, value)
        out.append((name, value.raw if status == 0 else _unknown_to_driver(status)))
    return tuple(out)


def _function_attributes(func: int) -> tuple[tuple[str, object], ...]:
    lib = driver.load()
    out: list[tuple[str, object]] = []
    for ident, name in enumerate(FUNCTION_ATTRIBUTES):
        value = ctypes.c_int(0)
        status = lib.cuFuncGetAttribute(ctypes.byref(value), ident, func) if func else -1
        out.append((name, int(value.value) if status == 0 else _unknown_to_driver(status)))
    return tuple(out)


def _unknown_to_driver(status: int) -> str | None:
    """An attribute this driver does not know (the same on both sides, and never set), as a value
    that compares equal; any other failure is None: unreadable, not proven."""
    return f"not known to this driver (CUresult {status})" if status in UNKNOWN_ATTRIBUTE else None
