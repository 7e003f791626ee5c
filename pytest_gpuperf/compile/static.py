"""The compile-time tier: build CUDA modules with nvcc, no GPU needed, and gate what ptxas reports.

For each :class:`CudaModule` and target architecture this module

* compiles the source to a cubin with nvcc, instantiating templates exactly as NVRTC would: a
  generated wrapper ``#include``s the source and takes the address of every name expression
  (``static void* const ...[] = {(void*)&merge<__half, 128, true>, ...}``), so the same
  instantiations exist with the same options (``shared_library=True`` modules are built through
  :func:`~pytest_gpuperf.compile.nvcc.build_shared_library` instead, sharing its cache entry with
  the library the tests load, so a CUTLASS GEMM is never built twice);
* parses ``ptxas -v``: registers, spill stores and loads, static shared memory and stack frame
  per kernel, plus ptxas performance warnings (C75xx, e.g. C7510 "wgmma serialized");
* disassembles the binary with ``cuobjdump -sass`` to check the machine-code facts an
  optimisation depends on (``LDG.E.128`` in a vectorized kernel, ``HGMMA`` in a Hopper GEMM);
* compares the resources with budgets stored beside the perf baselines,
  ``<baselines>/static/<module or group>.json``, and re-records them under
  ``--gpu-perf-update-baselines``; a module that sets ``max_code_growth`` also has each kernel's
  SASS instruction count held within that fraction of its recorded count (code size costs time
  where a kernel's hot code outgrows the SM's instruction cache, as in a persistent megakernel).

Compiles are cached (:class:`~pytest_gpuperf.compile.cache.BuildCache`, ``<cache root>/static``)
under the toolchain's identity, the options, name expressions and architecture, the source, and
every file ``nvcc -M`` says the build read; disassemblies (``<cache root>/static-sass``) under
the binary's bytes and the disassemblers' identity. A warm run costs a few hashes and file
reads per module.

nvcc and NVRTC share the front end and ptxas, so registers and instructions match what the tests
load through CuPy up to the toolkit version; a difference in minor versions can move a register
count, which is why budgets record the nvcc that produced them.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import hashlib
import importlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from pytest_gpuperf.baselines import locked_for_writing
from pytest_gpuperf.compile import nvcc as _nvcc
from pytest_gpuperf.compile.cache import Built, build_key_fields, digest_fields
from pytest_gpuperf.compile.nvcc import NvccBuildError, NvccNotFound
from pytest_gpuperf.compile.run import run_tool
from pytest_gpuperf.compile.toolchain import nvcc_identity, refuse_shell_metacharacters, tool_identity
from pytest_gpuperf.errors import BaselineFileError
from pytest_gpuperf.files import atomic_write_json, read_json_object

if TYPE_CHECKING:
    import pytest

    from pytest_gpuperf.session import GpuPerfSession

__all__ = [
    "BUDGET_FIELDS",
    "BUDGET_SCHEMA",
    "CODE_FIELD",
    "Budget",
    "BudgetStore",
    "CudaModule",
    "GpuStatic",
    "KernelResources",
    "StaticResult",
    "ToolchainMissing",
    "compile_module",
    "count_sass_instructions",
    "parse_ptxas_resources",
    "split_sass",
    "static_params",
]

BUDGET_SCHEMA = "pytest-gpuperf/static-budgets/2"
READABLE_SCHEMAS = ("pytest-gpuperf/static-budgets/1", BUDGET_SCHEMA)  # 1: no instruction counts
BUDGET_FIELDS = ("registers", "spill_stores", "spill_loads", "shared_bytes", "stack_bytes")
CODE_FIELD = "sass_instructions"  # budgeted only for modules that set max_code_growth
BUDGETS_FOLDER = "static"  # under the baselines folder
LOCK_TIMEOUT_S = 120.0
BUILD_LOCK_TIMEOUT_S = 3600.0
DISASSEMBLY_TIMEOUT_S = 600.0
_KEY_VERSION = "static-2"  # bump when the wrapper, the command or an entry's layout changes
_MAX_KEY_CHARS = 160  # longer demangled names (CUTLASS kernels) are shortened to a stable key
INSTALL_HINT = (
    "install the compile extra: pip install 'pytest-gpuperf[compile]' (NVIDIA's nvcc, nvvm, "
    "CCCL, cuobjdump and nvdisasm wheels), or set CUDA_HOME to a CUDA toolkit"
)


class ToolchainMissing(RuntimeError):
    """A tool the tier needs (nvcc, cuobjdump, nvdisasm, a demangler, CUTLASS headers) is missing."""


# --------------------------------------------------------------------------------------------
# What to build


@dataclasses.dataclass(frozen=True)
class CudaModule:
    """One CUDA source as the tests compile it, and the facts its optimisations depend on.

    ``options`` and ``name_expressions`` are the very ones given to ``load_module`` (NVRTC);
    ``defines`` (``"NAME"`` or ``"NAME=VALUE"``) are appended as ``-D`` flags. ``sass_facts``
    maps a kernel-name pattern (a substring of the demangled name; ``*`` and ``?`` wildcards
    allowed) to regular expressions that must each occur in the SASS of every matching kernel;
    ``sass_facts_by_arch`` adds facts for one architecture (``"sm_90"`` also covers ``sm_90a``).
    ``max_code_growth`` (a fraction, e.g. 0.02) holds each kernel's SASS instruction count within
    that much of the count recorded with its budget; ``None`` leaves code size unchecked.
    ``shared_library=True`` builds the source with nvcc's host compiler as
    :func:`~pytest_gpuperf.compile.nvcc.build_shared_library` does (``options`` are its
    ``flags``; name expressions are not used). ``include_dirs_from`` names a function
    ``"package.module:function"`` returning more include folders, called at build time (for
    headers found at run time, such as CUTLASS's). Budgets are stored in ``<group or name>.json``.
    """

    name: str
    source: Path
    options: tuple[str, ...] = ()
    name_expressions: tuple[str, ...] = ()
    archs: tuple[str, ...] = ("sm_80", "sm_90")
    include_dirs: tuple[Path, ...] = ()
    defines: tuple[str, ...] = ()
    sass_facts: Mapping[str, tuple[str, ...]] = dataclasses.field(default_factory=dict, hash=False)
    sass_facts_by_arch: Mapping[str, Mapping[str, tuple[str, ...]]] = dataclasses.field(
        default_factory=dict, hash=False
    )
    group: str | None = None
    shared_library: bool = False
    include_dirs_from: str | None = None
    library_name: str | None = None  # file name of a shared library (default: the source's stem)
    max_code_growth: float | None = None

    def __post_init__(self) -> None:
        set_ = functools.partial(object.__setattr__, self)
        set_("source", Path(self.source))
        set_("options", tuple(self.options))
        set_("name_expressions", tuple(self.name_expressions))
        set_("archs", tuple(self.archs))
        set_("include_dirs", tuple(Path(p) for p in self.include_dirs))
        set_("defines", tuple(self.defines))
        set_("sass_facts", self._checked_facts(self.sass_facts, "sass_facts"))
        by_arch = {}
        for arch, facts in dict(self.sass_facts_by_arch).items():
            _nvcc._gencode(arch)
            by_arch[arch] = self._checked_facts(facts, f"sass_facts_by_arch[{arch!r}]")
        set_("sass_facts_by_arch", MappingProxyType(by_arch))
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", self.budget_file):
            raise ValueError(
                f"CudaModule {self.name!r}: group/name must be a file-name-safe word, got {self.budget_file!r}"
            )
        for arch in self.archs:
            _nvcc._gencode(arch)  # raises ValueError on a malformed arch
        if self.max_code_growth is not None and not 0 <= self.max_code_growth < 1:
            raise ValueError(
                f"CudaModule {self.name!r}: max_code_growth is a fraction in [0, 1), got {self.max_code_growth!r}"
            )
        if self.shared_library and self.name_expressions:
            raise ValueError(
                f"CudaModule {self.name!r}: a shared library instantiates its own templates; drop name_expressions"
            )

    def _checked_facts(self, raw: Mapping[str, Any], where: str) -> Mapping[str, tuple[str, ...]]:
        facts = {str(k): (v,) if isinstance(v, str) else tuple(v) for k, v in dict(raw).items()}
        for pattern, regexes in facts.items():
            for regex in regexes:
                try:
                    re.compile(regex)
                except re.error as exc:
                    raise ValueError(
                        f"CudaModule {self.name!r}: {where}[{pattern!r}]: bad regex {regex!r}: {exc}"
                    ) from None
        return MappingProxyType(facts)

    def facts_for(self, arch: str) -> dict[str, tuple[str, ...]]:
        """The SASS facts that must hold on ``arch``: the common ones and that arch's own."""
        facts = {k: tuple(v) for k, v in self.sass_facts.items()}
        for selector, extra in self.sass_facts_by_arch.items():
            if arch_selected(arch, (selector,)):
                for pattern, regexes in extra.items():
                    facts[pattern] = (*facts.get(pattern, ()), *regexes)
        return facts

    @property
    def gates_code_size(self) -> bool:
        return self.max_code_growth is not None

    @property
    def budget_file(self) -> str:
        return self.group or self.name

    def all_include_dirs(self) -> tuple[Path, ...]:
        """``include_dirs`` plus those ``include_dirs_from`` returns (raises ToolchainMissing)."""
        extra: tuple[Path, ...] = ()
        if self.include_dirs_from:
            module_name, _, func_name = self.include_dirs_from.partition(":")
            try:
                func = getattr(importlib.import_module(module_name), func_name)
                extra = tuple(Path(p) for p in func())
            except (ImportError, AttributeError, OSError, RuntimeError) as exc:
                raise ToolchainMissing(f"include folders of {self.name} ({self.include_dirs_from}): {exc}") from exc
        return (*self.include_dirs, *extra)

    def flags(self) -> tuple[str, ...]:
        return (*self.options, *(f"-D{d}" for d in self.defines))

    def wrapper_source(self) -> str:
        """The generated translation unit: the source, and every name expression instantiated.
        The source is included by name (found through ``-I`` its folder), so the text, and the
        cache key, do not depend on where the checkout lives."""
        lines = [
            "// Generated by pytest-gpuperf: instantiates the module's NVRTC name expressions.",
            f'#include "{self.source.name}"',
        ]
        if self.name_expressions:
            lines.append("__attribute__((unused)) static void* const gpuperf_instantiations[] = {")
            lines += [f"    (void*)&{expr}," for expr in self.name_expressions]
            lines.append("};")
        return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# What ptxas and cuobjdump say


@dataclasses.dataclass(frozen=True)
class KernelResources:
    """ptxas's report on one kernel (entry function)."""

    name: str  # the budget key (see kernel_key): the demangled name without return type and parameters
    mangled: str
    registers: int
    spill_stores: int
    spill_loads: int
    shared_bytes: int  # static shared memory; dynamic shared memory is a launch parameter
    stack_bytes: int
    barriers: int = 0
    sass_instructions: int | None = None  # None: not disassembled

    def budget(self, with_code: bool = False) -> Budget:
        """The budget that holds the kernel to what it uses now (its instruction count too, if asked)."""
        return Budget(
            **{f: getattr(self, f) for f in BUDGET_FIELDS},
            sass_instructions=self.sass_instructions if with_code else None,
        )


@dataclasses.dataclass(frozen=True)
class StaticResult:
    """One module built for one architecture."""

    module: str
    arch: str
    kernels: Mapping[str, KernelResources]  # by budget key
    perf_warnings: tuple[str, ...]  # C75xx lines and spills, as nvcc.parse_perf_warnings finds them
    sass: Mapping[str, str]  # mangled name -> its SASS (empty when no disassembly was needed)
    log: str
    toolchain: str  # e.g. "nvcc 13.0.88"
    command: tuple[str, ...]
    binary: Path
    cached: bool
    seconds: float  # wall time of this call: compile (or cache read) and disassembly
    build_seconds: float | None  # wall time of the compile that produced the binary

    @property
    def ptxas_warnings(self) -> tuple[str, ...]:
        """Performance warnings other than spills (spills are judged against the budget)."""
        return tuple(w for w in self.perf_warnings if not w.startswith("spills in "))


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


# --------------------------------------------------------------------------------------------
# Building, with the cache


def _find(finder: Any) -> Path:
    try:
        return Path(finder())
    except NvccNotFound as exc:
        raise ToolchainMissing(f"{exc} ({INSTALL_HINT})") from exc


def toolchain_label(version_text: str) -> str:
    """``nvcc --version`` text -> ``nvcc 13.0.88``."""
    match = re.search(r"V(\d+\.\d+\.\d+)", version_text)
    return f"nvcc {match.group(1)}" if match else "nvcc " + version_text.strip().splitlines()[-1][:60]


def _build_cubin(
    module: CudaModule, arch: str, compiler: str, include_dirs: Sequence[Path], cache_dir: Path, timeout_s: float
) -> tuple[Path, str, tuple[str, ...], bool, float | None]:
    """The cached cubin of ``module`` for ``arch``: (path, ptxas log, command, cached, build seconds)."""
    source = module.source.resolve()
    _nvcc.check_arguments(compiler, [source], [source.parent, *include_dirs], module.flags())
    if not source.is_file():
        raise FileNotFoundError(f"{module.name}: source file {source} does not exist")
    _nvcc.nvcc_version(compiler)
    arguments = [
        "-cubin",
        _nvcc._gencode(arch),
        *module.flags(),
        "-Xptxas=-v",
        f"-I{source.parent}",
        *(f"-I{p}" for p in include_dirs),
    ]
    wrapper_text = module.wrapper_source()
    cache = _nvcc.cache_for(cache_dir, "static", BUILD_LOCK_TIMEOUT_S)
    workdir = Path.cwd()  # the build runs here; build_key_fields keys on it
    base = digest_fields(
        [
            *build_key_fields(_KEY_VERSION, nvcc_identity(compiler, arguments), arguments),
            ("wrapper", wrapper_text),
            ("source", str(source)),
            ("source-bytes", source.read_bytes()),
        ]
    )
    what = f"compiling {module.name} ({module.source.name}) for {arch}"

    def build(staging: Path) -> Built:
        env = {**os.environ, "TMPDIR": str(staging)}
        wrapper = staging / "gpuperf-wrapper.cu"  # never the source's own name
        wrapper.write_text(wrapper_text, encoding="utf-8")
        deps = _nvcc.dependencies(
            [compiler, *arguments],
            wrapper,
            staging / "wrapper.d",
            f"listing the headers of {module.name}",
            cwd=workdir,
            env=env,
            timeout_s=timeout_s,
        )
        cubin = staging / "module.cubin"
        command = [compiler, *arguments, str(wrapper), "-o", str(cubin)]
        log, seconds = _nvcc.run_nvcc(command, cubin, what, cwd=workdir, env=env, timeout_s=timeout_s)
        (staging / "ptxas.log").write_text(log, encoding="utf-8")
        return Built(
            files=("module.cubin", "ptxas.log"),
            dependencies=deps,
            search_folders=(source.parent, *include_dirs),
            meta={"command": command, "build_seconds": seconds},
        )

    entry = cache.get_or_build(base, build, what=what)
    log = entry.path("ptxas.log").read_text(encoding="utf-8")
    return (
        entry.path("module.cubin"),
        log,
        tuple(entry.meta.get("command", ())),
        entry.cached,
        entry.meta.get("build_seconds"),
    )


def disassemble(binary: Path, cache_root: Path | None = None) -> str:
    """``cuobjdump -sass binary``, cached by the binary's bytes and the tools' identities."""
    cuobjdump = _find(_nvcc.find_cuobjdump)
    nvdisasm = _find(_nvcc.find_nvdisasm)
    refuse_shell_metacharacters(binary, "binary")
    try:
        tools = tool_identity(cuobjdump) + "\n" + tool_identity(nvdisasm)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolchainMissing(f"cannot run {cuobjdump} or {nvdisasm}: {exc}") from exc
    data = binary.read_bytes()
    base = digest_fields([("layout", _KEY_VERSION), ("tools", tools), ("binary", hashlib.sha256(data).hexdigest())])
    cache = _nvcc.cache_for(cache_root, "static-sass", BUILD_LOCK_TIMEOUT_S)

    def build(staging: Path) -> Built:
        env = dict(os.environ, PATH=f"{nvdisasm.parent}{os.pathsep}{os.environ.get('PATH', '')}", TMPDIR=str(staging))
        command = [str(cuobjdump), "-sass", str(binary)]
        try:
            done = run_tool(command, timeout_s=DISASSEMBLY_TIMEOUT_S, cwd=staging, env=env)
        except subprocess.TimeoutExpired:
            raise ToolchainMissing(
                f"`{' '.join(command)}` ran past {DISASSEMBLY_TIMEOUT_S:g} s and was stopped"
            ) from None
        if done.returncode != 0:
            raise ToolchainMissing(
                f"`{cuobjdump} -sass {binary}` failed ({done.returncode}): {done.stderr.strip()[:2000]}"
            )
        (staging / "sass.txt").write_text(done.stdout, encoding="utf-8")
        return Built(files=("sass.txt",), dependencies=(), meta={"command": command})

    entry = cache.get_or_build(base, build, what=f"disassembling {binary.name}")
    return entry.path("sass.txt").read_text(encoding="utf-8")


def compile_module(
    module: CudaModule,
    arch: str,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    nvcc: str | os.PathLike[str] | None = None,
    sass: bool | None = None,
    timeout_s: float | None = None,
) -> StaticResult:
    """Build ``module`` for ``arch`` (or take it from the cache) and report on every kernel.

    ``sass`` (default: only when the module declares facts or gates its code size) disassembles
    the binary too, and counts each kernel's instructions. ``timeout_s`` limits each nvcc run
    (default :func:`~pytest_gpuperf.compile.nvcc.build_timeout_s`).
    Raises :class:`ToolchainMissing` when a tool is missing,
    :class:`~pytest_gpuperf.compile.nvcc.NvccBuildError` when the build fails and
    :class:`~pytest_gpuperf.errors.UnsafePathError` for a path nvcc's shell would interpret or
    a cache folder others can write.
    """
    if arch not in module.archs:
        raise ValueError(f"{module.name}: arch {arch!r} is not one of its archs {module.archs}")
    start = time.perf_counter()
    compiler = str(nvcc) if nvcc is not None else str(_find(_nvcc.find_nvcc))
    cache_root = (Path(cache_dir) if cache_dir is not None else _nvcc.default_cache_dir()).expanduser()
    include_dirs = [p.resolve() for p in module.all_include_dirs()]
    timeout = timeout_s if timeout_s is not None else _nvcc.build_timeout_s()
    if module.shared_library:
        built = _nvcc.build_shared_library(
            [module.source],
            arch=arch,
            flags=module.flags(),
            include_dirs=include_dirs,
            cache_dir=cache_root,
            name=module.library_name or module.source.stem,
            nvcc=compiler,
            timeout_s=timeout,
        )
        binary, log, command, cached, build_seconds = (
            built.library,
            built.log,
            built.command,
            built.cached,
            built.build_seconds,
        )
    else:
        binary, log, command, cached, build_seconds = _build_cubin(
            module, arch, compiler, include_dirs, cache_root, timeout
        )
    resources = parse_ptxas_resources(log)
    if not resources:
        raise NvccBuildError(
            f"{module.name} for {arch}: no kernel in the ptxas report (no __global__ function, or "
            "name expressions that instantiate nothing)",
            command=command,
            log=log,
        )
    want_sass = (bool(module.facts_for(arch)) or module.gates_code_size) if sass is None else sass
    sass_text = split_sass(disassemble(binary, cache_root)) if want_sass else {}
    names = demangle(list(resources))
    kernels: dict[str, KernelResources] = {}
    for mangled, r in resources.items():
        key = kernel_key(mangled, names[mangled])
        if key in kernels:  # overloads differing only in their parameters: keep the parameters
            key = names[mangled].removeprefix("void ").strip()
        count = count_sass_instructions(sass_text[mangled]) if mangled in sass_text else None
        kernels[key] = KernelResources(name=key, mangled=mangled, **r, sass_instructions=count)
    return StaticResult(
        module=module.name,
        arch=arch,
        kernels=MappingProxyType(dict(sorted(kernels.items()))),
        perf_warnings=_nvcc.parse_perf_warnings(log),
        sass=MappingProxyType(sass_text),
        log=log,
        toolchain=toolchain_label(_nvcc.nvcc_version(compiler)),
        command=tuple(command),
        binary=binary,
        cached=cached,
        seconds=time.perf_counter() - start,
        build_seconds=build_seconds,
    )


# --------------------------------------------------------------------------------------------
# SASS facts


@dataclasses.dataclass(frozen=True)
class FactCheck:
    pattern: str
    regex: str
    kernels: tuple[str, ...]  # kernels the pattern matched
    missing_in: tuple[str, ...]  # of those, the ones whose SASS lacks the regex

    @property
    def ok(self) -> bool:
        return bool(self.kernels) and not self.missing_in

    def to_json(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "regex": self.regex,
            "kernels": len(self.kernels),
            "missing_in": list(self.missing_in),
            "ok": self.ok,
        }


def matches(pattern: str, kernel: KernelResources) -> bool:
    """A fact's kernel pattern: a substring of the demangled name (or mangled), wildcards allowed."""
    glob = f"*{pattern}*"
    return fnmatch.fnmatchcase(kernel.name, glob) or fnmatch.fnmatchcase(kernel.mangled, glob)


def check_facts(result: StaticResult, facts: Mapping[str, Sequence[str]]) -> list[FactCheck]:
    checks = []
    for pattern, regexes in facts.items():
        chosen = [k for k in result.kernels.values() if matches(pattern, k)]
        for regex in regexes:
            compiled = re.compile(regex)
            missing = tuple(k.name for k in chosen if not compiled.search(result.sass.get(k.mangled, "")))
            checks.append(FactCheck(pattern, regex, tuple(k.name for k in chosen), missing))
    return checks


# --------------------------------------------------------------------------------------------
# Budgets


@dataclasses.dataclass(frozen=True)
class Budget:
    """The most a kernel may use; spill budgets are 0 unless spills were accepted on purpose.
    ``sass_instructions`` is the instruction count recorded for a module that gates its code size
    (the limit is that count grown by the module's ``max_code_growth``); None elsewhere."""

    registers: int
    spill_stores: int
    spill_loads: int
    shared_bytes: int
    stack_bytes: int
    sass_instructions: int | None = None

    def to_json(self) -> dict[str, int]:
        data = dataclasses.asdict(self)
        if self.sass_instructions is None:
            del data[CODE_FIELD]
        return data

    def code_limit(self, growth: float) -> int | None:
        """The most instructions allowed: the recorded count grown by ``growth`` (rounded down)."""
        return None if self.sass_instructions is None else int(self.sass_instructions * (1 + growth))


@dataclasses.dataclass
class ArchBudgets:
    toolchain: str
    recorded_at: str
    kernels: dict[str, Budget]

    def to_json(self) -> dict[str, Any]:
        return {
            "toolchain": self.toolchain,
            "recorded_at": self.recorded_at,
            "kernels": {k: self.kernels[k].to_json() for k in sorted(self.kernels)},
        }


@dataclasses.dataclass
class BudgetFile:
    """``{"schema": ..., "modules": {module: {arch: {"toolchain", "recorded_at", "kernels": {...}}}}}``"""

    path: Path
    modules: dict[str, dict[str, ArchBudgets]]

    @classmethod
    def read(cls, path: Path) -> BudgetFile | None:
        """The validated file, or None when it does not exist (a bad file raises BaselineFileError)."""
        data = read_json_object(path, "static budget file")
        if data is None:
            return None
        if data.get("schema") not in READABLE_SCHEMAS:
            raise _bad(path, "schema", f"must be one of {list(READABLE_SCHEMAS)}, got {data.get('schema')!r}")
        modules = data.get("modules")
        if not isinstance(modules, dict):
            raise _bad(path, "modules", "must be an object: module -> arch -> budgets")
        parsed: dict[str, dict[str, ArchBudgets]] = {}
        for module, archs in modules.items():
            if not isinstance(archs, dict):
                raise _bad(path, f"modules.{module}", "must be an object: arch -> budgets")
            parsed[module] = {}
            for arch, section in archs.items():
                where = f"modules.{module}.{arch}"
                if not re.fullmatch(r"sm_\d+[af]?", arch):
                    raise _bad(path, where, "must be keyed by an architecture such as 'sm_90' or 'sm_90a'")
                if not isinstance(section, dict) or not isinstance(section.get("kernels"), dict):
                    raise _bad(path, f"{where}.kernels", "must be an object: kernel -> budget")
                for name in ("toolchain", "recorded_at"):
                    if not isinstance(section.get(name), str):
                        raise _bad(path, f"{where}.{name}", f"must be a string, got {section.get(name)!r}")
                kernels = {k: _parse_budget(path, f"{where}.kernels.{k}", v) for k, v in section["kernels"].items()}
                parsed[module][arch] = ArchBudgets(section["toolchain"], section["recorded_at"], kernels)
        return cls(path, parsed)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": BUDGET_SCHEMA,
            "modules": {
                m: {a: self.modules[m][a].to_json() for a in sorted(self.modules[m])} for m in sorted(self.modules)
            },
        }


def _bad(path: Path, field: str, problem: str) -> BaselineFileError:
    return BaselineFileError(
        f"static budget file {path}: field {field!r} {problem}. Fix the file or restore it from version "
        "control; to start over delete it and run with --gpu-perf-update-baselines."
    )


def _parse_budget(path: Path, where: str, raw: Any) -> Budget:
    if not isinstance(raw, dict):
        raise _bad(path, where, f"must be an object, got {type(raw).__name__}")
    unknown = sorted(set(raw) - {*BUDGET_FIELDS, CODE_FIELD})
    if unknown:
        raise _bad(
            path, where, f"has unknown keys {unknown}; expected {list(BUDGET_FIELDS)} and optionally {CODE_FIELD!r}"
        )
    values = {}
    for name in (*BUDGET_FIELDS, CODE_FIELD):
        value = raw.get(name)
        if name == CODE_FIELD and value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise _bad(path, f"{where}.{name}", f"must be a non-negative integer, got {value!r}")
        values[name] = value
    return Budget(**values)


@dataclasses.dataclass(frozen=True)
class BudgetChange:
    file: str
    module: str
    arch: str
    kernel: str
    old: Budget | None  # None: a new kernel
    new: Budget | None  # None: a kernel no longer built, removed

    def describe(self) -> str:
        where = f"{self.module} {self.arch} {self.kernel}"
        if self.old is None:
            return f"+ {where}: " + _budget_text(self.new)
        if self.new is None:
            return f"- {where}: removed (no longer built)"
        diffs = [
            f"{f} {getattr(self.old, f)} -> {getattr(self.new, f)}"
            for f in (*BUDGET_FIELDS, CODE_FIELD)
            if getattr(self.old, f) != getattr(self.new, f)
        ]
        return f"~ {where}: " + ", ".join(diffs)

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "module": self.module,
            "arch": self.arch,
            "kernel": self.kernel,
            "old": self.old.to_json() if self.old else None,
            "new": self.new.to_json() if self.new else None,
        }


def _budget_text(b: Budget | None) -> str:
    if b is None:
        return "-"
    text = (
        f"{b.registers} registers, {b.spill_stores}/{b.spill_loads} B spill stores/loads, "
        f"{b.shared_bytes} B shared, {b.stack_bytes} B stack"
    )
    return text if b.sass_instructions is None else f"{text}, {b.sass_instructions} SASS instructions"


class BudgetStore:
    """``<baselines>/static/<file>.json``: read with validation, updated under a lock, atomically."""

    def __init__(self, baselines_dir: Path):
        self.baselines_dir = Path(baselines_dir)
        self.root = self.baselines_dir / BUDGETS_FOLDER

    def path_for(self, file: str) -> Path:
        return self.root / f"{file}.json"

    def lookup(self, file: str, module: str, arch: str) -> ArchBudgets | None:
        found = BudgetFile.read(self.path_for(file))
        return found.modules.get(module, {}).get(arch) if found else None

    def update(
        self, file: str, module: str, arch: str, kernels: Mapping[str, Budget], toolchain: str
    ) -> list[BudgetChange]:
        """Replace the budgets of ``module`` on ``arch`` (other modules and archs are kept)."""
        path = self.path_for(file)
        with locked_for_writing(path, self.baselines_dir, kind="static budget file", timeout_s=LOCK_TIMEOUT_S):
            current = BudgetFile.read(path) or BudgetFile(path, {})
            old = current.modules.get(module, {}).get(arch)
            old_kernels = old.kernels if old else {}
            changes = [
                BudgetChange(str(path), module, arch, k, old_kernels.get(k), kernels.get(k))
                for k in sorted(set(old_kernels) | set(kernels))
                if old_kernels.get(k) != kernels.get(k)
            ]
            stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
            if changes or old is None or old.toolchain != toolchain:
                current.modules.setdefault(module, {})[arch] = ArchBudgets(toolchain, stamp, dict(kernels))
                atomic_write_json(path, current.to_json())
        return changes


# --------------------------------------------------------------------------------------------
# Judging one result


@dataclasses.dataclass
class Judgement:
    record: dict[str, Any]
    failures: list[str]
    missing_note: str | None


def judge(
    result: StaticResult,
    module: CudaModule,
    budgets: ArchBudgets | None,
    budget_path: Path,
    *,
    update: bool,
) -> Judgement:
    """Compare ``result`` with its budgets and facts; the record for the report and the failures."""
    failures: list[str] = []
    rows = []
    growth = module.max_code_growth
    for name, k in result.kernels.items():
        budget = budgets.kernels.get(name) if budgets else None
        code_limit = budget.code_limit(growth) if budget is not None and growth is not None else None
        over = []
        if budget is not None and not update:
            over = [f for f in BUDGET_FIELDS if getattr(k, f) > getattr(budget, f)]
            if code_limit is not None and k.sass_instructions is not None and k.sass_instructions > code_limit:
                over.append(CODE_FIELD)
        elif budget is None and not update and (k.spill_stores or k.spill_loads):
            over = [f for f in ("spill_stores", "spill_loads") if getattr(k, f)]
        rows.append(
            {
                "kernel": name,
                **{f: getattr(k, f) for f in BUDGET_FIELDS},
                CODE_FIELD: k.sass_instructions,
                "budget": budget.to_json() if budget else None,
                "code_limit": code_limit,
                "over": over,
            }
        )
    over_rows = [r for r in rows if r["over"]]
    if over_rows:
        failures.append(_format_over(result, over_rows, budgets, budget_path, growth))
    if result.ptxas_warnings:
        failures.append(
            f"ptxas performance warnings in {result.module} for {result.arch} (each costs real speed: C7510 "
            "serializes wgmma, e.g. CUTLASS built without -DNDEBUG):\n"
            + "\n".join("  " + w for w in result.ptxas_warnings)
        )
    facts = check_facts(result, module.facts_for(result.arch))
    bad_facts = [f for f in facts if not f.ok]
    if bad_facts:
        lines = []
        for f in bad_facts:
            if not f.kernels:
                lines.append(
                    f"  {f.pattern!r}: matches no kernel of the module (kernels: {', '.join(list(result.kernels)[:6])}...)"
                )
            else:
                shown = ", ".join(f.missing_in[:4]) + (
                    f" and {len(f.missing_in) - 4} more" if len(f.missing_in) > 4 else ""
                )
                lines.append(f"  {f.pattern!r}: /{f.regex}/ not in the SASS of {shown}")
        failures.append(
            f"SASS facts missing in {result.module} for {result.arch} (the optimisation they stand for is gone; "
            "inspect with cuobjdump -sass):\n" + "\n".join(lines)
        )
    stale = sorted(set(budgets.kernels) - set(result.kernels)) if budgets and not update else []
    if stale:
        failures.append(
            f"{budget_path} lists kernels of {result.module} ({result.arch}) that are no longer built: "
            f"{', '.join(stale[:5])}{' ...' if len(stale) > 5 else ''}; re-record with --gpu-perf-update-baselines"
        )
    missing = [r["kernel"] for r in rows if r["budget"] is None]
    uncounted = [r["kernel"] for r in rows if growth is not None and r["budget"] and CODE_FIELD not in r["budget"]]
    note = None
    if (missing or uncounted) and not update:
        what = []
        if missing:
            what.append(f"no stored budget for {len(missing)} kernel(s)")
        if uncounted:
            what.append(
                f"no stored SASS instruction count for {len(uncounted)} kernel(s), so their code size goes unchecked"
            )
        note = (
            f"{' and '.join(what)} of {result.module} on {result.arch} (looked in "
            f"{budget_path}); record them with: pytest --gpu-perf-update-baselines"
        )
    if failures:
        verdict = "fail"
    elif update:
        verdict = "recorded"
    elif missing or uncounted:
        verdict = "measured"  # no budget to judge against: recorded in the report only
    else:
        verdict = "pass"
    record = {
        "kind": "static",
        "module": result.module,
        "arch": result.arch,
        "toolchain": result.toolchain,
        "budget_file": str(budget_path),
        "budget_toolchain": budgets.toolchain if budgets else None,
        "kernels": rows,
        "ptxas_warnings": list(result.ptxas_warnings),
        "facts": [f.to_json() for f in facts],
        "stale_budgets": stale,
        "cached": result.cached,
        "seconds": result.seconds,
        "build_seconds": result.build_seconds,
        "verdict": verdict,
        "budget_note": note,
        "changes": [],
    }
    return Judgement(record, failures, note)


def _format_over(
    result: StaticResult, rows: Sequence[dict[str, Any]], budgets: ArchBudgets | None, path: Path, growth: float | None
) -> str:
    with_code = any(r["code_limit"] is not None for r in rows)
    table = [["kernel", *BUDGET_FIELDS, *([CODE_FIELD] if with_code else [])]]
    for r in rows:
        b = r["budget"]
        cells = [r["kernel"]]
        for f in BUDGET_FIELDS:
            now = r[f]
            if b is None:
                cells.append(f"{now}" + (" (no budget)" if f in r["over"] else ""))
            else:
                cells.append(f"{now}/{b[f]}" + (" OVER" if f in r["over"] else ""))
        if with_code:
            limit = r["code_limit"]
            cells.append(
                "-" if limit is None else f"{r[CODE_FIELD]}/{limit}" + (" OVER" if CODE_FIELD in r["over"] else "")
            )
        table.append(cells)
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    text = "\n".join("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)).rstrip() for row in table)
    head = f"static budget EXCEEDED: {result.module} for {result.arch} (used/budget; budgets in {path})"
    hints = []
    if budgets and budgets.toolchain != result.toolchain:
        hints.append(f"  the budgets were recorded with {budgets.toolchain}; this build used {result.toolchain}")
    if any(CODE_FIELD in r["over"] for r in rows):
        grown = [
            f"{r['kernel']} {r[CODE_FIELD] / r['budget'][CODE_FIELD] - 1:+.1%}" for r in rows if CODE_FIELD in r["over"]
        ]
        hints.append(
            f"  SASS instructions: the code grew by more than the module's max_code_growth ({growth:.1%}) over the "
            f"count recorded with the budget ({', '.join(grown)}); a hot loop that outgrows the SM's instruction "
            "cache runs slower. Time the change before accepting it"
        )
    hints.append(
        "  Spills and extra registers cost occupancy or local-memory traffic. If the change is intended, "
        "re-record with pytest --gpu-perf-update-baselines"
    )
    return head + "\n" + text + "\n" + "\n".join(hints)


# --------------------------------------------------------------------------------------------
# The gpu_static fixture's object


def arch_selected(arch: str, selection: Iterable[str]) -> bool:
    """``sm_90a`` is selected by ``sm_90a`` or by ``sm_90``; ``all`` selects everything."""
    chosen = set(selection)
    return "all" in chosen or arch in chosen or re.sub(r"[af]$", "", arch) in chosen


class GpuStatic:
    """Bound to one test: ``check(module, arch)`` builds, compares with the budgets, records the
    result on the test's report and raises ``GateFailure`` with a readable table on a failure."""

    def __init__(self, session: GpuPerfSession, item: pytest.Item, cache_dir: Path | None = None):
        self._session = session
        self._item = item
        self.settings = session.settings.for_test(item)
        self.store = BudgetStore(self.settings.baselines_dir)
        self.cache_dir = cache_dir

    def check(self, module: CudaModule, arch: str) -> StaticResult:
        import pytest

        from pytest_gpuperf.errors import GateFailure
        from pytest_gpuperf.session import RECORD_KEY

        selection = self.settings.static_archs
        if not arch_selected(arch, selection):
            pytest.skip(f"static tier: {arch} not selected by --gpu-perf-static-archs ({','.join(selection)})")
        try:
            result = compile_module(module, arch, cache_dir=self.cache_dir)
        except ToolchainMissing as exc:
            pytest.skip(f"gpu-perf: static tier needs the CUDA compiler tools: {exc}")
        path = self.store.path_for(module.budget_file)
        budgets = self.store.lookup(module.budget_file, module.name, arch)
        update = self.settings.update_baselines
        verdict = judge(result, module, budgets, path, update=update)
        record = verdict.record | {"test": self._item.nodeid}
        if update:
            changes = self.store.update(
                module.budget_file,
                module.name,
                arch,
                {n: k.budget(with_code=module.gates_code_size) for n, k in result.kernels.items()},
                result.toolchain,
            )
            record["changes"] = [c.to_json() | {"text": c.describe()} for c in changes]
        self._item.user_properties.append((RECORD_KEY, record))
        if verdict.failures:
            raise GateFailure("\n\n".join(verdict.failures))
        if verdict.missing_note:
            policy = self.settings.missing_baseline
            if policy == "fail":
                raise GateFailure(verdict.missing_note)
            if policy == "skip":
                pytest.skip(verdict.missing_note)
        return result


def static_params(modules: Iterable[CudaModule]) -> list[Any]:
    """``pytest.param(module, arch)`` for every module and each of its archs, with readable ids:
    ``@pytest.mark.parametrize(("module", "arch"), static_params(CUDA_MODULES))``."""
    import pytest

    return [pytest.param(m, arch, id=f"{m.name}-{arch}") for m in modules for arch in m.archs]
