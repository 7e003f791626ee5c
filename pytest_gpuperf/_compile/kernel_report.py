"""Reading what the tools say about a build: ``ptxas -v`` resources per kernel, ``cuobjdump -sass``
split per function and counted, and the stable, demangled name each kernel's budget is keyed by."""

from __future__ import annotations

import functools
import hashlib
import re
import shutil
import subprocess
from collections.abc import Sequence

from pytest_gpuperf._compile.cuda_module import ToolchainMissing
from pytest_gpuperf._store.budgets import BUDGET_FIELDS

__all__ = [
    "count_sass_instructions",
    "demangle",
    "kernel_key",
    "parse_ptxas_resources",
    "short_name",
    "split_sass",
]

_MAX_KEY_CHARS = 160  # longer demangled names (CUTLASS kernels) are shortened to a stable key

_ENTRY_RE = re.compile(r"Compiling entry function '([^']+)'")
_PROPS_RE = re.compile(r"Function properties for (\S+)")
_FRAME_RE = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED_RE = re.compile(r"Used (\d+) registers")
_SMEM_RE = re.compile(r"(\d+) bytes smem")
_BARRIERS_RE = re.compile(r"used (\d+) barriers")
_CUMULATIVE_STACK_RE = re.compile(r"(\d+) bytes cumulative stack size")


def parse_ptxas_resources(log: str) -> dict[str, dict[str, int]]:
    """Per entry function (mangled name): registers, spills, static shared memory, stack (the
    cumulative size where ptxas gives it, which includes the callees' frames), barriers, from
    ``ptxas -v`` output. ptxas lists the functions a kernel calls without inlining after the
    kernel's own report; their spills are added to that kernel's."""
    kernels: dict[str, dict[str, int]] = {}
    frames: dict[str, tuple[int, int, int]] = {}
    entry: str | None = None
    props: str | None = None
    for raw in log.splitlines():
        line = raw.strip()
        match = _ENTRY_RE.search(line)
        if match:
            entry = match.group(1)
            kernels.setdefault(entry, dict.fromkeys((*BUDGET_FIELDS, "barriers"), 0))
            continue
        match = _PROPS_RE.search(line)
        if match:
            props = match.group(1)
            continue
        match = _FRAME_RE.search(line)
        if match and props is not None:
            frames[props] = (int(match.group(1)), int(match.group(2)), int(match.group(3)))
            if props in kernels:
                k = kernels[props]
                k["stack_bytes"], k["spill_stores"], k["spill_loads"] = frames[props]
            elif entry is not None:  # a called function's spills count against the kernel
                k = kernels[entry]
                k["spill_stores"] += frames[props][1]
                k["spill_loads"] += frames[props][2]
            props = None
            continue
        match = _USED_RE.search(line)
        if match and entry is not None:
            k = kernels[entry]
            k["registers"] = int(match.group(1))
            smem = _SMEM_RE.search(line)
            k["shared_bytes"] = int(smem.group(1)) if smem else 0
            barriers = _BARRIERS_RE.search(line)
            k["barriers"] = int(barriers.group(1)) if barriers else 0
            cumulative = _CUMULATIVE_STACK_RE.search(line)
            if cumulative:
                k["stack_bytes"] = max(k["stack_bytes"], int(cumulative.group(1)))
    return kernels


_SASS_FUNCTION_RE = re.compile(r"^\s*Function : (\S+)\s*$")


def split_sass(text: str) -> dict[str, str]:
    """``cuobjdump -sass`` output split per function (mangled name -> its instructions)."""
    functions: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        match = _SASS_FUNCTION_RE.match(line)
        if match:
            current = functions.setdefault(match.group(1), [])
            continue
        if current is not None:
            current.append(line)
    return {name: "\n".join(lines) for name, lines in functions.items()}


_SASS_INSTRUCTION_RE = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+\S", re.MULTILINE)


def count_sass_instructions(function_sass: str) -> int:
    """Instructions in one function's ``cuobjdump -sass`` text (the ``/*0040*/``-addressed lines,
    the trailing padding included: it is part of the function's code in the binary)."""
    return len(_SASS_INSTRUCTION_RE.findall(function_sass))


def kernel_key(mangled: str, demangled: str) -> str:
    """The budget key of a kernel: its demangled name without return type and parameters
    (``void k<float, 128>(float*, int)`` -> ``k<float, 128>``). A name the demangler cannot read,
    or longer than a line (CUTLASS kernels), becomes ``scope::name<...>#<hash of the mangled
    name>``, so the key never depends on which demangler a machine has."""
    if demangled != mangled or not mangled.startswith("_Z"):
        name = short_name(demangled)
        if len(name) <= _MAX_KEY_CHARS:
            return name
    return f"{_mangled_scope(mangled)}<...>#{hashlib.sha256(mangled.encode()).hexdigest()[:12]}"


def _mangled_scope(mangled: str) -> str:
    """The qualified name at the front of an Itanium-mangled name: ``_ZN7cutlass13device_kernelI...``
    -> ``cutlass::device_kernel``."""
    text = mangled[2:] if mangled.startswith("_Z") else mangled
    i = 1 if text.startswith("N") else 0
    parts = []
    while i < len(text) and text[i].isdigit():
        j = i
        while j < len(text) and text[j].isdigit():
            j += 1
        length = int(text[i:j])
        parts.append(text[j : j + length])
        i = j + length
        if not text.startswith("N"):
            break
    return "::".join(parts) or mangled[:40]


def short_name(demangled: str) -> str:
    """``void k<float, 128>(float*, int)`` -> ``k<float, 128>``."""
    name = demangled.strip()
    if name.endswith(")"):
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            if name[i] == ")":
                depth += 1
            elif name[i] == "(":
                depth -= 1
                if depth == 0:
                    name = name[:i]
                    break
    if name.startswith("void "):
        name = name[len("void ") :]
    return name.strip()


@functools.cache
def _demangler() -> str:
    for tool in ("c++filt", "cu++filt"):  # c++filt first: the same keys on every machine
        found = shutil.which(tool)
        if found:
            return found
    raise ToolchainMissing("no demangler found (c++filt from binutils, or cu++filt); install binutils")


def demangle(names: Sequence[str]) -> dict[str, str]:
    """Demangle ``names`` with one c++filt call; names that are not mangled come back as they are."""
    mangled = [n for n in names if n.startswith("_Z")]
    result = {n: n for n in names}
    if mangled:
        done = subprocess.run(
            [_demangler()], input="\n".join(mangled) + "\n", capture_output=True, text=True, timeout=120
        )
        out = done.stdout.splitlines()
        if done.returncode != 0 or len(out) != len(mangled):
            raise ToolchainMissing(f"{_demangler()} failed ({done.returncode}): {done.stderr.strip()}")
        result.update(zip(mangled, out, strict=False))
    return result
