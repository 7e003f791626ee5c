"""What one launch enqueues, as read from its captured CUDA graph, and the rule that proves two
launches the same GPU work (``--gpu-perf-changed-only``).

Two launches are proven the same only when every one of these holds (``compare``):

- both graphs hold GPU work, the same number of nodes, of the same types, in the same order, with
  the same dependency edges; a child graph is compared the same way, node by node;
- each pair of kernel nodes runs the same code: the same loaded function (one ``CUfunction``
  handle serves both sides), or the same name and a code digest the plugin recorded for both
  functions' modules when it loaded them (``code_images``); two functions with neither are not
  proven, whatever their names;
- the same grid, block, dynamic shared memory, the same values of the node's launch attributes
  (cluster dimensions, cooperative launch, ...) and of the function's attributes (registers,
  maximum dynamic shared memory, carveout, cluster settings, ...);
- the same kernel parameter bytes, parameter by parameter (``cuFuncGetParamInfo``): a pointer
  parameter is equal only when both sides pass the same buffer (``gpu_perf.shared``);
- each pair of memset and memcpy nodes has the same parameters; an empty node has none; any other
  node type (host callbacks, events, allocations, conditionals) is not proven.

Anything unreadable on either side (a parameter, an attribute, a node's parameters) is not
proven. The first difference found is the reason given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["KernelIdentity", "NodeIdentity", "LaunchIdentity", "Proof", "compare", "SAME_FUNCTION"]

SAME_FUNCTION = "same loaded function"


@dataclass(frozen=True)
class KernelIdentity:
    """A kernel node: its code, launch configuration and parameter bytes.

    ``code``: a digest of the function's code recorded when its module was loaded, with
    ``code_basis`` saying what it digests; None when the plugin did not load it. ``params``: the
    bytes of each parameter, in order, as ``(offset, bytes)``; None when unreadable, and
    ``params_unreadable`` says why. ``attributes``: ``(name, value)`` pairs, a value of None where
    the driver did not answer."""

    name: str
    function: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_smem: int
    code: str | None = None
    code_basis: str = ""
    attributes: tuple[tuple[str, object], ...] = ()
    params: tuple[tuple[int, bytes], ...] | None = None
    params_unreadable: str = ""


@dataclass(frozen=True)
class NodeIdentity:
    """One graph node: ``kind`` (kernel, memset, memcpy, empty, graph, or another type's name) and
    what it does. ``detail`` holds a memset's or memcpy's parameters (None: unreadable or a type
    whose parameters the plugin does not read)."""

    kind: str
    kernel: KernelIdentity | None = None
    detail: object = None
    child: LaunchIdentity | None = None


@dataclass(frozen=True)
class LaunchIdentity:
    """A captured launch: its nodes in the driver's order and its edges, as node index pairs."""

    nodes: tuple[NodeIdentity, ...]
    edges: frozenset[tuple[int, int]] = field(default_factory=frozenset)

    def kernels(self) -> int:
        """Kernel nodes, child graphs included."""
        return sum(1 if n.kind == "kernel" else n.child.kernels() if n.child else 0 for n in self.nodes)


@dataclass(frozen=True)
class Proof:
    """Two launches proven the same: how many kernels, and how each kernel's code was proven
    (``SAME_FUNCTION`` or a ``code_basis``)."""

    kernels: int
    bases: tuple[str, ...]


def compare(now: LaunchIdentity, then: LaunchIdentity, label: str = "REV") -> Proof | str:
    """``Proof`` that ``now`` and ``then`` (at ``label``) are the same GPU work, or the first
    difference, in words (the module docstring states the rule)."""
    if not now.nodes or not then.nodes:
        side = "now" if not now.nodes else f"at {label}"
        return f"the capture {side} holds no GPU work"
    bases: list[str] = []
    why = _compare_graphs(now, then, label, "", bases)
    return why if why else Proof(now.kernels(), tuple(dict.fromkeys(bases)))


def _compare_graphs(now: LaunchIdentity, then: LaunchIdentity, label: str, where: str, bases: list[str]) -> str:
    if len(now.nodes) != len(then.nodes):
        return f"{where}{len(now.nodes)} graph nodes now, {len(then.nodes)} at {label}"
    for i, (a, b) in enumerate(zip(now.nodes, then.nodes, strict=True)):
        name = f"{where}node {i + 1}"
        if a.kind != b.kind:
            return f"{name}: a {a.kind} node now, a {b.kind} node at {label}"
        why = _compare_nodes(a, b, label, name, bases)
        if why:
            return why
    if now.edges != then.edges:
        return f"{where}the graph's dependencies differ from {label}'s"
    return ""


def _compare_nodes(a: NodeIdentity, b: NodeIdentity, label: str, name: str, bases: list[str]) -> str:
    if a.kind == "graph":
        if a.child is None or b.child is None:
            return f"{name}: a child graph that cannot be read"
        return _compare_graphs(a.child, b.child, label, f"{name} (child graph): ", bases)
    if a.kind == "kernel":
        if a.kernel is None or b.kernel is None:
            return f"{name}: a kernel node that cannot be read"
        return _compare_kernels(a.kernel, b.kernel, label, name, bases)
    if a.kind == "empty":
        return ""
    if a.detail is None or b.detail is None:
        return f"{name} ({a.kind}): its parameters cannot be read, so it is not proven the same"
    if a.detail != b.detail:
        return f"{name} ({a.kind}): its parameters differ from {label}'s"
    return ""


def _compare_kernels(a: KernelIdentity, b: KernelIdentity, label: str, name: str, bases: list[str]) -> str:
    name = f"{name} (kernel {a.name})"
    if a.function and a.function == b.function:
        bases.append(SAME_FUNCTION)
    elif a.name != b.name:
        return f"{name}: another kernel ({b.name}) at {label}"
    elif a.code is not None and b.code is not None and a.code_basis == b.code_basis:
        if a.code != b.code:
            return f"{name}: its code differs from {label}'s ({a.code_basis})"
        bases.append(a.code_basis)
    else:
        return (
            f"{name}: code not proven the same: another loaded function at {label}, and the plugin recorded "
            "no digest of its code (it did not load the module)"
        )
    for what, x, y in (
        ("grid", a.grid, b.grid),
        ("block", a.block, b.block),
        ("dynamic shared memory", a.dynamic_smem, b.dynamic_smem),
    ):
        if x != y:
            return f"{name}: {what} {_show(x)} now, {_show(y)} at {label}"
    why = _compare_attributes(a.attributes, b.attributes, label, name)
    if why:
        return why
    if a.params is None or b.params is None:
        return f"{name}: parameters cannot be read ({a.params_unreadable or b.params_unreadable})"
    if len(a.params) != len(b.params):
        return f"{name}: {len(a.params)} parameters now, {len(b.params)} at {label}"
    for i, (p, q) in enumerate(zip(a.params, b.params, strict=True)):
        if p != q:
            return (
                f"{name}: parameter {i + 1} ({len(p[1])} bytes at offset {p[0]}) differs from {label}'s: another "
                "value, or a buffer not shared through gpu_perf.shared"
            )
    return ""


def _compare_attributes(a: Sequence[tuple[str, object]], b: Sequence[tuple[str, object]], label: str, name: str) -> str:
    theirs = dict(b)
    if [k for k, _ in a] != [k for k, _ in b]:
        return f"{name}: attributes not read alike on both sides"
    for key, value in a:
        if value is None or theirs[key] is None:
            return f"{name}: attribute {key} cannot be read"
        if value != theirs[key]:
            return f"{name}: {key} {_show(value)} now, {_show(theirs[key])} at {label}"
    return ""


def _show(value: object) -> str:
    if isinstance(value, tuple) and all(isinstance(v, int) for v in value):
        return "x".join(str(v) for v in value)
    if isinstance(value, bytes):
        return value.hex()[:32]
    return str(value)
