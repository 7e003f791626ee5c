"""Static CUDA builds with nvcc: shared libraries for ctypes, cached by content.

Kernels that NVRTC cannot compile (CUTLASS 3.x collectives need host-side TMA descriptors and a
real C++ host compiler) are built here into a ``.so`` and loaded with ``ctypes``. Builds are slow
(a CUTLASS GEMM takes about a minute), so results are cached under a key covering everything that
changes the output:

* the bytes of every source file, and of the headers next to each source;
* the contents of every include directory (hashed whole: a tree walk with a per-process memo on
  each tree's file sizes and mtimes costs milliseconds, where ``nvcc -M`` would cost a full
  preprocessing run per lookup; paths are hashed relative to their tree, so a cache built on one
  machine is valid on another with the same headers);
* the flags, the target architecture and ``nvcc --version``.

Concurrent builders (pytest-xdist workers, parallel ``build`` jobs) take a file lock on the entry
and re-check the cache after acquiring it, so each entry is built once. A build goes to a
temporary directory that is renamed into place only after it succeeded, so a failed or killed
build never leaves a half entry.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterable, Sequence

__all__ = [
    "BuildResult",
    "NvccBuildError",
    "NvccNotFound",
    "DEFAULT_FLAGS",
    "build_shared_library",
    "default_cache_dir",
    "find_cuobjdump",
    "find_nvcc",
    "find_nvdisasm",
    "nvcc_version",
    "parse_perf_warnings",
]

# -DNDEBUG matters beyond speed: CUTLASS's device asserts put function calls between wgmma
# instructions and ptxas then serializes them (C7510), costing Ping-pong 30-45%.
DEFAULT_FLAGS: tuple[str, ...] = ("-std=c++17", "-O3", "-DNDEBUG", "-shared", "-Xcompiler=-fPIC")
_PTXAS_REPORT_FLAGS: tuple[str, ...] = ("-Xptxas=-v", "--resource-usage")
_HEADER_SUFFIXES = (".h", ".hpp", ".cuh", ".inl", ".hxx", ".inc")
_ARCH_RE = re.compile(r"^sm_(\d+)([af]?)$")
_CACHE_ENV = "GPU_PERF_CACHE_DIR"
_KEY_VERSION = "1"  # bump when the layout of an entry or of the key changes

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


@functools.cache
def _version_of(nvcc: str) -> str:
    try:
        done = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
    except OSError as exc:
        raise NvccNotFound(f"cannot run {nvcc}: {exc}. {_INSTALL_HINT}") from exc
    if done.returncode != 0:
        raise NvccNotFound(f"`{nvcc} --version` failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout.strip()


def nvcc_version(nvcc: str | os.PathLike[str] | None = None) -> str:
    """The full ``nvcc --version`` text (cached per process and executable)."""
    return _version_of(str(nvcc if nvcc is not None else find_nvcc()))


# --------------------------------------------------------------------------------------------
# The cache key


def default_cache_dir() -> Path:
    """``$GPU_PERF_CACHE_DIR``, else ``~/.cache/pytest-gpuperf``."""
    env = os.environ.get(_CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "pytest-gpuperf"


def _tree_signature(root: Path) -> tuple[tuple[str, int, int], ...]:
    entries = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".pyc"):
                continue
            path = Path(dirpath) / name
            st = path.stat()
            entries.append((path.relative_to(root).as_posix(), st.st_size, st.st_mtime_ns))
    return tuple(entries)


@functools.lru_cache(maxsize=64)
def _tree_digest_for(root: str, signature: tuple[tuple[str, int, int], ...]) -> str:
    digest = hashlib.sha256()
    for rel, _, _ in signature:
        digest.update(rel.encode() + b"\0")
        digest.update((Path(root) / rel).read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def _tree_digest(root: Path) -> str:
    """Content hash of every file under ``root``; re-hashed only when a size or mtime changed."""
    resolved = root.resolve()
    return _tree_digest_for(str(resolved), _tree_signature(resolved))


def _sibling_headers(source: Path) -> list[Path]:
    return sorted(p for p in source.parent.iterdir() if p.is_file() and p.suffix in _HEADER_SUFFIXES)


def _cache_key(
    sources: Sequence[Path],
    include_dirs: Sequence[Path],
    flags: Sequence[str],
    arch: str,
    version: str,
) -> str:
    digest = hashlib.sha256()

    def field(label: str, value: bytes) -> None:
        digest.update(label.encode() + b"=" + str(len(value)).encode() + b":" + value + b";")

    field("key-version", _KEY_VERSION.encode())
    field("nvcc", version.encode())
    field("arch", arch.encode())
    for flag in flags:
        field("flag", flag.encode())
    for source in sources:
        field("source", source.name.encode())
        field("source-bytes", source.read_bytes())
        for header in _sibling_headers(source):
            field("sibling", header.name.encode())
            field("sibling-bytes", header.read_bytes())
    for include in include_dirs:
        field("include-tree", _tree_digest(include).encode())
    return digest.hexdigest()


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
) -> BuildResult:
    """Build ``sources`` into a shared library with nvcc, or return the cached one.

    ``flags`` come after :data:`DEFAULT_FLAGS` (``-O3 -DNDEBUG -shared ...``) and the ptxas
    report flags; ``arch`` becomes ``-gencode=arch=compute_XX,code=sm_XX`` (the ``-arch=sm_90a``
    shorthand also runs a plain sm_90 pass that rejects wgmma). ``nvcc`` overrides
    :func:`find_nvcc` (tests pass a stand-in script). Raises :class:`NvccNotFound` or
    :class:`NvccBuildError`.
    """
    if not sources:
        raise ValueError("sources: expected at least one source file, got none")
    source_paths = [Path(s).resolve() for s in sources]
    for path in source_paths:
        if not path.is_file():
            raise FileNotFoundError(f"source file {path} does not exist")
    include_paths = [Path(d).resolve() for d in include_dirs]
    for path in include_paths:
        if not path.is_dir():
            raise FileNotFoundError(f"include directory {path} does not exist")
    gencode = _gencode(arch)
    compiler = str(nvcc) if nvcc is not None else str(find_nvcc())
    version = nvcc_version(compiler)
    all_flags = (*DEFAULT_FLAGS, *_PTXAS_REPORT_FLAGS, *flags)
    key = _cache_key(source_paths, include_paths, all_flags, arch, version)

    root = (Path(cache_dir) if cache_dir is not None else default_cache_dir()).expanduser().resolve()
    root = root / "nvcc"
    root.mkdir(parents=True, exist_ok=True)
    entry = root / key
    lib_name = f"{name or source_paths[0].stem}.so"

    hit = _load_entry(entry)
    if hit is not None:
        return hit

    from filelock import FileLock  # lazily: only builds need it

    with FileLock(str(root / f"{key}.lock"), timeout=lock_timeout_s):
        # Another process may have built it while we waited for the lock.
        hit = _load_entry(entry)
        if hit is not None:
            return hit
        return _build_entry(
            entry, compiler, gencode, all_flags, include_paths, source_paths, lib_name, key
        )


def _load_entry(entry: Path) -> BuildResult | None:
    meta_path = entry / "build.json"
    if not meta_path.is_file():
        return None
    meta = json.loads(meta_path.read_text())
    library = entry / meta["library"]
    if not library.is_file():
        return None
    log = (entry / "nvcc.log").read_text()
    return BuildResult(
        library=library,
        key=entry.name,
        command=tuple(meta["command"]),
        log=log,
        perf_warnings=parse_perf_warnings(log),
        cached=True,
        build_seconds=meta.get("build_seconds"),
    )


def _build_entry(
    entry: Path,
    compiler: str,
    gencode: str,
    flags: Iterable[str],
    include_paths: Sequence[Path],
    source_paths: Sequence[Path],
    lib_name: str,
    key: str,
) -> BuildResult:
    staging = Path(tempfile.mkdtemp(prefix=f".build-{key[:16]}-", dir=entry.parent))
    try:
        output = staging / lib_name
        command = [
            compiler,
            gencode,
            *flags,
            *(f"-I{p}" for p in include_paths),
            *_wheel_link_dirs(compiler),
            *(str(p) for p in source_paths),
            "-o",
            str(output),
        ]
        log, seconds = run_nvcc(command, output, f"building {', '.join(p.name for p in source_paths)}")
        (staging / "nvcc.log").write_text(log)
        staging.chmod(0o755)  # mkdtemp makes it private; a shared cache should be readable
        (staging / "build.json").write_text(
            json.dumps({"library": lib_name, "command": command, "build_seconds": seconds}, indent=1)
        )
        if entry.exists():  # an entry without build.json is not from us; we hold the lock
            shutil.rmtree(entry)
        os.replace(staging, entry)  # atomic publish: the entry appears complete or not at all
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return BuildResult(
        library=entry / lib_name,
        key=key,
        command=tuple(command),
        log=log,
        perf_warnings=parse_perf_warnings(log),
        cached=False,
        build_seconds=seconds,
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


def run_nvcc(command: Sequence[str], output: Path, what: str) -> tuple[str, float]:
    """Run an nvcc command line; return its log and wall seconds, or raise NvccBuildError naming ``what``."""
    start = time.perf_counter()
    done = subprocess.run(list(command), capture_output=True, text=True, encoding="utf-8", errors="replace")
    seconds = time.perf_counter() - start
    log = done.stdout + done.stderr
    if done.returncode != 0 or not output.is_file():
        raise NvccBuildError(
            f"nvcc failed with exit code {done.returncode} {what}:\n{_tail(log)}", command=list(command), log=log
        )
    return log, seconds


def _tail(log: str, lines: int = 60) -> str:
    parts = log.strip().splitlines()
    if len(parts) <= lines:
        return "\n".join(parts)
    return "\n".join(["...", *parts[-lines:]])
