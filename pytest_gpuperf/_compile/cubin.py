"""Building a :class:`~pytest_gpuperf._compile.cuda_module.CudaModule` for one architecture with
nvcc, cached, and reporting on every kernel: :func:`compile_module` returns a :class:`StaticResult`."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pytest_gpuperf._compile import nvcc as _nvcc
from pytest_gpuperf._compile.cache import Built, build_key_fields, digest_fields
from pytest_gpuperf._compile.cuda_module import INSTALL_HINT, CudaModule, ToolchainMissing
from pytest_gpuperf._compile.kernel_report import (
    count_sass_instructions,
    demangle,
    kernel_key,
    parse_ptxas_resources,
    split_sass,
)
from pytest_gpuperf._compile.nvcc import NvccBuildError, NvccNotFound
from pytest_gpuperf._compile.run import run_tool
from pytest_gpuperf._compile.toolchain import nvcc_identity, refuse_shell_metacharacters, tool_identity
from pytest_gpuperf._store.budgets import BUDGET_FIELDS, Budget

__all__ = ["KernelResources", "StaticResult", "compile_module", "disassemble", "toolchain_label"]

BUILD_LOCK_TIMEOUT_S = 3600.0
DISASSEMBLY_TIMEOUT_S = 600.0
_KEY_VERSION = "static-2"  # bump when the wrapper, the command or an entry's layout changes


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


def disassemble(binary: Path, cache_root: Path | None = None, *, function: str | None = None) -> str:
    """``cuobjdump -sass binary``, cached by the binary's bytes and the tools' identities.
    ``function`` (a symbol, the mangled name of a C++ kernel) limits it to that function, for
    every architecture the binary holds (``cuobjdump -fun``): a library of many kernels is then
    not disassembled whole."""
    cuobjdump = _find(_nvcc.find_cuobjdump)
    nvdisasm = _find(_nvcc.find_nvdisasm)
    refuse_shell_metacharacters(binary, "binary")
    try:
        tools = tool_identity(cuobjdump) + "\n" + tool_identity(nvdisasm)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolchainMissing(f"cannot run {cuobjdump} or {nvdisasm}: {exc}") from exc
    data = binary.read_bytes()
    fields = [("layout", _KEY_VERSION), ("tools", tools), ("binary", hashlib.sha256(data).hexdigest())]
    selection = ["-fun", function] if function is not None else []
    if function is not None:
        refuse_shell_metacharacters(function, "function name")
        fields.append(("function", function))
    base = digest_fields(fields)
    cache = _nvcc.cache_for(cache_root, "static-sass", BUILD_LOCK_TIMEOUT_S)

    def build(staging: Path) -> Built:
        env = dict(os.environ, PATH=f"{nvdisasm.parent}{os.pathsep}{os.environ.get('PATH', '')}", TMPDIR=str(staging))
        command = [str(cuobjdump), "-sass", *selection, str(binary)]
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

    entry = cache.get_or_build(base, build, what=f"disassembling {function or binary.name}")
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
    (default :func:`~pytest_gpuperf._compile.nvcc.build_timeout_s`).
    Raises :class:`ToolchainMissing` when a tool is missing,
    :class:`~pytest_gpuperf._compile.nvcc.NvccBuildError` when the build fails and
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
