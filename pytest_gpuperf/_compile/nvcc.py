"""Static CUDA builds with nvcc: shared libraries for ctypes, cached by everything that shapes them.

Kernels that NVRTC cannot compile (CUTLASS 3.x collectives need host-side TMA descriptors and a
real C++ host compiler) are built here into a ``.so`` and loaded with ``ctypes``. Builds are slow
(a CUTLASS GEMM takes about a minute), so results are kept in a :class:`~.cache.BuildCache`
(``<cache root>/nvcc``, private to the user) under a key made of

* the toolchain (:func:`~.toolchain.nvcc_identity`): nvcc's resolved path, version and
  nvcc.profile, the host compiler and tools its dry run names, and the environment variables
  nvcc and the host compiler read (``NVCC_APPEND_FLAGS``, ``NVCC_PREPEND_FLAGS``, ...);
* every argument (the architecture, the flags, ``-I`` and ``-L`` folders), the working folder
  (a relative path in a flag depends on it) and the sources;
* every file the build read, as ``nvcc -M`` lists them (headers in sub-folders, ``../``,
  ``-I`` flags and symlinked folders alike), checked by content on each lookup.

nvcc runs without a shell but passes its arguments on through ``/bin/sh``, so sources, folders
and flags holding shell metacharacters are refused before it starts; it runs with a timeout
(``GPU_PERF_NVCC_TIMEOUT`` seconds, default 1800) and its temporary files go to the private
staging folder rather than the shared ``/tmp``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from pytest_gpuperf._compile.cache import BuildCache, Built, build_key_fields, digest_fields
from pytest_gpuperf._compile.depfile import TARGET, parse_depfile
from pytest_gpuperf._compile.run import run_tool
from pytest_gpuperf._compile.toolchain import nvcc_identity, refuse_shell_metacharacters, tool_version
from pytest_gpuperf._store.private_dir import default_cache_root, ensure_private_dir
from pytest_gpuperf.errors import GpuPerfUsageError

__all__ = [
    "BuildResult",
    "NvccBuildError",
    "NvccNotFound",
    "NvccTimeout",
    "DEFAULT_BUILD_TIMEOUT_S",
    "DEFAULT_FLAGS",
    "build_shared_library",
    "build_timeout_s",
    "cache_for",
    "check_arguments",
    "default_cache_dir",
    "dependencies",
    "find_cuobjdump",
    "find_nvcc",
    "find_nvdisasm",
    "nvcc_version",
    "parse_perf_warnings",
    "run_nvcc",
]

# -DNDEBUG matters beyond speed: CUTLASS's device asserts put function calls between wgmma
# instructions and ptxas then serializes them (C7510), costing Ping-pong 30-45%.
DEFAULT_FLAGS: tuple[str, ...] = ("-std=c++17", "-O3", "-DNDEBUG", "-shared", "-Xcompiler=-fPIC")
DEFAULT_BUILD_TIMEOUT_S = 1800.0  # a CUTLASS GEMM builds in about a minute
TIMEOUT_ENV = "GPU_PERF_NVCC_TIMEOUT"
_PTXAS_REPORT_FLAGS: tuple[str, ...] = ("-Xptxas=-v", "--resource-usage")
_ARCH_RE = re.compile(r"^sm_(\d+)([af]?)$")
_KEY_VERSION = "2"  # bump when the layout of an entry or of the key changes

_INSTALL_HINT = (
    "Install the CUDA toolkit and set CUDA_HOME to it (its bin/ holds nvcc), put nvcc on PATH, "
    "or `pip install nvidia-cuda-nvcc nvidia-nvvm nvidia-cuda-crt nvidia-cuda-runtime "
    "nvidia-cuda-cccl` (the CUDA 13 wheels install into site-packages/nvidia/cu13)."
)


class NvccNotFound(RuntimeError):
    """No nvcc executable was found; the message says where we looked and how to install one."""


class NvccBuildError(RuntimeError):
    """nvcc exited with an error; ``command`` and ``log`` hold what ran and what it printed."""

    def __init__(self, message: str, *, command: Sequence[str], log: str) -> None:
        super().__init__(message)
        self.command = tuple(command)
        self.log = log


class NvccTimeout(NvccBuildError):
    """nvcc ran past its timeout and was killed, with everything it had started."""


@dataclasses.dataclass(frozen=True)
class BuildResult:
    """A built shared library and what the compiler said about it."""

    library: Path
    key: str
    command: tuple[str, ...]
    log: str  # nvcc's full output: front-end warnings and the ptxas resource report
    perf_warnings: tuple[str, ...]  # ptxas performance warnings and spills; empty when clean
    cached: bool  # True when the library came from the cache without building
    build_seconds: float | None  # wall time of the build that produced it (None if unknown)


# --------------------------------------------------------------------------------------------
# Finding the compiler


def _wheel_nvcc_candidates() -> list[Path]:
    """nvcc inside NVIDIA's pip wheels (``nvidia-cuda-nvcc``), without importing anything."""
    layouts = ("cu13/bin/nvcc", "cuda_nvcc/bin/nvcc")  # CUDA 13 wheels, then the CUDA 12 layout
    return [root / rel for root in _nvidia_roots() for rel in layouts]


def find_nvcc() -> Path:
    """Return the nvcc to use: ``$CUDA_HOME/bin/nvcc``, NVIDIA's pip wheel, then ``PATH``.

    Raises :class:`NvccNotFound` naming every place tried and how to install one.
    """
    tried: list[str] = []
    from_home = _from_cuda_home("nvcc", tried)
    if from_home is not None:
        return from_home
    for candidate in _wheel_nvcc_candidates():
        if not _is_executable(candidate):
            continue
        # The CUDA 13 nvcc wheel ships without cicc, which comes in nvidia-nvvm: without it
        # this nvcc cannot compile device code, so keep looking.
        if (candidate.parent.parent / "nvvm" / "bin" / "cicc").is_file():
            return candidate
        tried.append(f"{candidate} (skipped: no nvvm/bin/cicc beside it; pip install nvidia-nvvm)")
    tried.append("the nvidia-cuda-nvcc pip wheel (nvidia/cu13/bin/nvcc, nvidia/cuda_nvcc/bin/nvcc)")
    on_path = shutil.which("nvcc")
    if on_path:
        return Path(on_path)
    tried.append("PATH")
    raise NvccNotFound(f"nvcc not found; looked in {', '.join(tried)}. {_INSTALL_HINT}")


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _from_cuda_home(tool: str, tried: list[str]) -> Path | None:
    """$CUDA_HOME/bin/<tool> if it is there; otherwise notes in ``tried`` where it looked."""
    cuda_home = os.environ.get("CUDA_HOME")
    if not cuda_home:
        tried.append("$CUDA_HOME (not set)")
        return None
    candidate = Path(cuda_home) / "bin" / tool
    if _is_executable(candidate):
        return candidate
    tried.append(f"$CUDA_HOME/bin/{tool} ({candidate})")
    return None


# cuobjdump and nvdisasm: `cuobjdump -sass` runs nvdisasm, which ships in its own wheel.
_BINUTILS_WHEELS = {
    "cuobjdump": ("nvidia-cuda-cuobjdump", ("cu13/bin/cuobjdump", "cuda_cuobjdump/bin/cuobjdump")),
    "nvdisasm": ("nvidia-cuda-nvdisasm", ("cu13/bin/nvdisasm", "cuda_nvdisasm/bin/nvdisasm")),
}


def _find_binutil(tool: str) -> Path:
    wheel, layouts = _BINUTILS_WHEELS[tool]
    tried: list[str] = []
    from_home = _from_cuda_home(tool, tried)
    if from_home is not None:
        return from_home
    for root in _nvidia_roots():
        for rel in layouts:
            if _is_executable(root / rel):
                return root / rel
    tried.append(f"the {wheel} pip wheel ({', '.join('nvidia/' + rel for rel in layouts)})")
    on_path = shutil.which(tool)
    if on_path:
        return Path(on_path)
    tried.append("PATH")
    raise NvccNotFound(
        f"{tool} not found; looked in {', '.join(tried)}. `pip install {wheel}` (or the `compile` "
        "extra of pytest-gpuperf), or install the CUDA toolkit and set CUDA_HOME."
    )


def _nvidia_roots() -> list[Path]:
    """The folders of the ``nvidia`` namespace package NVIDIA's wheels install into, if any."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    return [Path(root) for root in spec.submodule_search_locations]


def find_cuobjdump() -> Path:
    """Return the cuobjdump to use: ``$CUDA_HOME/bin``, the ``nvidia-cuda-cuobjdump`` wheel, ``PATH``."""
    return _find_binutil("cuobjdump")


def find_nvdisasm() -> Path:
    """Return the nvdisasm that ``cuobjdump -sass`` needs, searched like :func:`find_cuobjdump`
    (its wheel is ``nvidia-cuda-nvdisasm``)."""
    return _find_binutil("nvdisasm")


def nvcc_version(nvcc: str | os.PathLike[str] | None = None) -> str:
    """The full ``nvcc --version`` text (probed once per process and executable)."""
    path = str(nvcc if nvcc is not None else find_nvcc())
    try:
        text = tool_version(path)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NvccNotFound(f"cannot run {path}: {exc}. {_INSTALL_HINT}") from exc
    if text.startswith("exit "):
        raise NvccNotFound(f"`{path} --version` failed ({text})")
    return text


# --------------------------------------------------------------------------------------------
# Where builds live, how long they may take, what nvcc may be given


def default_cache_dir() -> Path:
    """``$GPU_PERF_CACHE_DIR``, else ``$XDG_CACHE_HOME/pytest-gpuperf``, else
    ``~/.cache/pytest-gpuperf`` (created with mode 0700 on first use)."""
    return default_cache_root()


def build_timeout_s() -> float:
    """``$GPU_PERF_NVCC_TIMEOUT`` seconds, else DEFAULT_BUILD_TIMEOUT_S."""
    raw = os.environ.get(TIMEOUT_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_BUILD_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise GpuPerfUsageError(f"{TIMEOUT_ENV}: expected a positive number of seconds, got {raw!r}")
    return value


def cache_for(cache_dir: str | os.PathLike[str] | None, name: str, lock_timeout_s: float) -> BuildCache:
    """The build cache ``<cache_dir or default_cache_dir()>/<name>``, its folders checked."""
    root = ensure_private_dir(Path(cache_dir) if cache_dir is not None else default_cache_dir())
    cache = BuildCache(root / name, lock_timeout_s=lock_timeout_s)
    refuse_shell_metacharacters(cache.folder, "cache folder")  # nvcc writes its output there
    return cache


def check_arguments(compiler: str, sources: Sequence[Path], include_dirs: Sequence[Path], flags: Sequence[str]) -> None:
    """Refuse, before nvcc runs, any path or flag its shell would interpret, including the
    flags nvcc takes from NVCC_PREPEND_FLAGS and NVCC_APPEND_FLAGS."""
    refuse_shell_metacharacters(compiler, "nvcc path")
    for source in sources:
        refuse_shell_metacharacters(source, "source file")
    for folder in include_dirs:
        refuse_shell_metacharacters(folder, "include folder")
    for flag in flags:
        refuse_shell_metacharacters(flag, "nvcc flag")
    for name in ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS"):
        if os.environ.get(name):
            refuse_shell_metacharacters(os.environ[name], f"${name}")


def dependencies(
    command: Sequence[str],
    source: Path,
    depfile: Path,
    what: str,
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
) -> tuple[Path, ...]:
    """Every file nvcc reads to compile ``source`` with ``command`` (nvcc and its arguments, no
    sources or output) in the folder ``cwd``, listed by ``nvcc -M`` into ``depfile``: the host
    and the device passes, through every include folder and link."""
    full = [*command, str(source), "-M", "-MT", TARGET, "-MF", str(depfile)]
    run_nvcc(full, depfile, what, cwd=cwd, env=env, timeout_s=timeout_s)
    try:
        return parse_depfile(depfile.read_text(encoding="utf-8", errors="replace"), cwd)
    except ValueError as exc:
        raise NvccBuildError(f"nvcc -M wrote no usable dependency list {what}: {exc}", command=full, log="") from None


# --------------------------------------------------------------------------------------------
# Building


def _gencode(arch: str) -> str:
    match = _ARCH_RE.match(arch)
    if not match:
        raise ValueError(f"arch: expected a form like 'sm_90a' or 'sm_80', got {arch!r}")
    number, suffix = match.groups()
    return f"-gencode=arch=compute_{number}{suffix},code=sm_{number}{suffix}"


def build_shared_library(
    sources: Sequence[str | os.PathLike[str]],
    *,
    arch: str = "sm_90a",
    flags: Sequence[str] = (),
    include_dirs: Sequence[str | os.PathLike[str]] = (),
    cache_dir: str | os.PathLike[str] | None = None,
    name: str | None = None,
    nvcc: str | os.PathLike[str] | None = None,
    lock_timeout_s: float = 3600.0,
    timeout_s: float | None = None,
) -> BuildResult:
    """Build ``sources`` into a shared library with nvcc, or return the cached one.

    ``flags`` come after :data:`DEFAULT_FLAGS` (``-O3 -DNDEBUG -shared ...``) and the ptxas
    report flags; ``arch`` becomes ``-gencode=arch=compute_XX,code=sm_XX`` (the ``-arch=sm_90a``
    shorthand also runs a plain sm_90 pass that rejects wgmma). ``nvcc`` overrides
    :func:`find_nvcc` (tests pass a stand-in script); ``timeout_s`` overrides
    :func:`build_timeout_s`. Raises :class:`NvccNotFound`, :class:`NvccBuildError` (and its
    :class:`NvccTimeout`), and :class:`~pytest_gpuperf.errors.UnsafePathError` for a path or
    flag nvcc's shell would interpret or a cache folder others can write.
    """
    if not sources:
        raise ValueError("sources: expected at least one source file, got none")
    source_paths = [Path(s).resolve() for s in sources]
    include_paths = [Path(d).resolve() for d in include_dirs]
    lib_name = f"{name or source_paths[0].stem}.so"
    if "/" in lib_name or lib_name.startswith("."):
        raise ValueError(f"name: expected a file name without '/' or a leading dot, got {name!r}")
    compiler = str(nvcc) if nvcc is not None else str(find_nvcc())
    all_flags = (*DEFAULT_FLAGS, *_PTXAS_REPORT_FLAGS, *flags)
    check_arguments(compiler, source_paths, include_paths, all_flags)
    refuse_shell_metacharacters(lib_name, "library name")
    for path in source_paths:
        if not path.is_file():
            raise FileNotFoundError(f"source file {path} does not exist")
    for path in include_paths:
        if not path.is_dir():
            raise FileNotFoundError(f"include directory {path} does not exist")
    gencode = _gencode(arch)
    nvcc_version(compiler)  # a clear NvccNotFound when it cannot run
    timeout = timeout_s if timeout_s is not None else build_timeout_s()
    arguments = [gencode, *all_flags, *(f"-I{p}" for p in include_paths), *_wheel_link_dirs(compiler)]
    cache = cache_for(cache_dir, "nvcc", lock_timeout_s)
    workdir = Path.cwd()  # the build runs here; build_key_fields keys on it
    base = digest_fields(
        [
            *build_key_fields(_KEY_VERSION, nvcc_identity(compiler, arguments), arguments),
            ("library", lib_name),
            *(field for p in source_paths for field in (("source", str(p)), ("source-bytes", p.read_bytes()))),
        ]
    )
    names = ", ".join(p.name for p in source_paths)

    def build(staging: Path) -> Built:
        env = {**os.environ, "TMPDIR": str(staging)}  # nvcc's intermediate files stay private
        deps: list[Path] = []
        for index, source in enumerate(source_paths):
            deps += dependencies(
                [compiler, *arguments],
                source,
                staging / f"{index}-{source.name}.d",
                f"listing the headers of {source.name}",
                cwd=workdir,
                env=env,
                timeout_s=timeout,
            )
        command = [compiler, *arguments, *(str(p) for p in source_paths), "-o", str(staging / lib_name)]
        log, seconds = run_nvcc(
            command, staging / lib_name, f"building {names}", cwd=workdir, env=env, timeout_s=timeout
        )
        (staging / "nvcc.log").write_text(log, encoding="utf-8")
        return Built(
            files=(lib_name, "nvcc.log"),
            dependencies=tuple(deps),
            search_folders=(*{p.parent for p in source_paths}, *include_paths),
            meta={"library": lib_name, "command": command, "build_seconds": seconds},
        )

    entry = cache.get_or_build(base, build, what=f"building {names}")
    log = entry.path("nvcc.log").read_text(encoding="utf-8")
    return BuildResult(
        library=entry.path(lib_name),
        key=entry.key,
        command=tuple(entry.meta.get("command", ())),
        log=log,
        perf_warnings=parse_perf_warnings(log),
        cached=entry.cached,
        build_seconds=entry.meta.get("build_seconds"),
    )


def _wheel_link_dirs(compiler: str) -> list[str]:
    """``-L`` for the static CUDA runtime of NVIDIA's pip wheels. nvcc.profile looks in ``lib64``
    but nvidia-cuda-runtime installs ``nvidia/cu13/lib`` (libcudart_static.a, libcudadevrt.a),
    so a shared library built with the wheel's nvcc fails to link without it. A search path
    changes no output, so it stays out of the cache key."""
    top = Path(compiler).resolve().parent.parent
    lib = top / "lib"
    if not (top / "lib64").is_dir() and (lib / "libcudart_static.a").is_file():
        return [f"-L{lib}"]
    return []


def run_nvcc(
    command: Sequence[str],
    output: Path,
    what: str,
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
) -> tuple[str, float]:
    """Run an nvcc command line (no shell); return its log and wall seconds. Raises
    :class:`NvccBuildError` naming ``what`` when it fails or leaves no ``output``, and
    :class:`NvccTimeout` when it runs past ``timeout_s`` (default :func:`build_timeout_s`)."""
    timeout = timeout_s if timeout_s is not None else build_timeout_s()
    start = time.perf_counter()
    try:
        done = run_tool(command, timeout_s=timeout, cwd=cwd, env=env)
    except subprocess.TimeoutExpired:
        raise NvccTimeout(
            f"nvcc timed out after {timeout:g} s {what} and was stopped; if the build is just slow, raise "
            f"the limit with {TIMEOUT_ENV}=<seconds>",
            command=list(command),
            log="",
        ) from None
    except OSError as exc:
        raise NvccNotFound(f"cannot run {command[0]}: {exc}. {_INSTALL_HINT}") from exc
    seconds = time.perf_counter() - start
    log = done.stdout + done.stderr
    if done.returncode != 0 or not output.is_file():
        raise NvccBuildError(
            f"nvcc failed with exit code {done.returncode} {what}:\n{_tail(log)}", command=list(command), log=log
        )
    return log, seconds


# --------------------------------------------------------------------------------------------
# ptxas output

_SPILL_RE = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_FUNCTION_RE = re.compile(r"Function properties for (\S+)")
_PERF_CODE_RE = re.compile(r"\((C75\d\d)\)")


def parse_perf_warnings(log: str) -> tuple[str, ...]:
    """ptxas performance warnings in ``log``: C75xx codes ("Potential Performance Loss", e.g.
    C7510 wgmma serialized, C7508 setmaxnreg ignored) and nonzero register spills.

    ptxas prints C7510 at *info* level, so lines are matched by code and wording, not level.
    """
    found: list[str] = []
    function = "?"
    for raw in log.splitlines():
        line = raw.strip()
        fn = _FUNCTION_RE.search(line)
        if fn:
            function = fn.group(1)
            continue
        if _PERF_CODE_RE.search(line) or "performance" in line.lower():
            found.append(_shorten(line))
            continue
        spill = _SPILL_RE.search(line)
        if spill and (int(spill.group(1)) or int(spill.group(2))):
            found.append(f"spills in {_shorten(function, 120)}: {spill.group(0)}")
    return tuple(found)


def _shorten(text: str, limit: int = 400) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _tail(log: str, lines: int = 60) -> str:
    parts = log.strip().splitlines()
    if len(parts) <= lines:
        return "\n".join(parts)
    return "\n".join(["...", *parts[-lines:]])
