"""Shared libraries built from C++ by the host compiler, kept in the build cache as nvcc's builds
are: for code that runs a kernel's source on the CPU (an emulator, a reference) and is loaded
with ctypes.

A library is keyed on the compiler's resolved path and version, the environment variables that
change a build, every flag and the source (``cache.BuildCache``); the compiler's ``-MD`` output
then names every file the build read, and each lookup checks them. The cache folder must be
private to the user (``_store.private_dir``): a library from it is code this process runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from pytest_gpuperf._compile.cache import BuildCache, Built, digest_fields
from pytest_gpuperf._compile.depfile import TARGET, parse_depfile
from pytest_gpuperf._compile.run import run_tool
from pytest_gpuperf._compile.toolchain import environment_identity, tool_identity
from pytest_gpuperf._store.private_dir import CACHE_ENV

__all__ = ["HOST_COMPILERS", "build_host_library", "find_host_compiler"]

HOST_COMPILERS = ("g++", "clang++")  # tried in this order after $CXX
DEFAULT_TIMEOUT_S = 600.0
_KEY_LAYOUT = "1"  # bump when the fields of the key change


def find_host_compiler() -> str | None:
    """The C++ compiler to build with: ``$CXX``, else g++ or clang++, where it runs from PATH; None
    when there is none."""
    for candidate in (os.environ.get("CXX"), *HOST_COMPILERS):
        if candidate and shutil.which(candidate):
            return candidate
    return None


def build_host_library(
    source: str | os.PathLike[str],
    *,
    flags: Sequence[str],
    library: str,
    cache_dir: str | os.PathLike[str],
    cache_env: str = CACHE_ENV,
    search_folders: Sequence[str | os.PathLike[str]] = (),
    timeout_s: float = DEFAULT_TIMEOUT_S,
    what: str | None = None,
) -> Path:
    """``source`` built by :func:`find_host_compiler` with ``flags`` (``-shared -fPIC`` and the
    rest: the caller's) into the file ``library`` of an entry of the build cache in ``cache_dir``,
    or the cached one; its path. ``cache_env`` names the variable that moves ``cache_dir``, for
    the messages; ``search_folders`` are the include folders a new header could appear in;
    ``what`` names the build in messages. Raises RuntimeError when there is no compiler, the build
    fails or runs past ``timeout_s``, and UnsafePathError for a cache folder others can write."""
    main = Path(source).resolve()
    compiler = find_host_compiler()
    resolved = shutil.which(compiler) if compiler else None
    if resolved is None:
        raise RuntimeError("no C++ compiler found (set CXX)")
    what = what or f"{library} from {main}"
    base = digest_fields(
        [
            ("layout", _KEY_LAYOUT),
            ("compiler", tool_identity(resolved)),
            ("environment", environment_identity()),
            *(("flag", flag) for flag in flags),
            ("library", library),
            ("source", str(main)),
            ("source-bytes", main.read_bytes()),
        ]
    )

    def build(staging: Path) -> Built:
        output, depfile = staging / library, staging / "deps.d"
        command = [resolved, *flags, "-MD", "-MT", TARGET, "-MF", str(depfile), "-o", str(output), str(main)]
        try:
            done = run_tool(command, timeout_s=timeout_s, cwd=staging, env={**os.environ, "TMPDIR": str(staging)})
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"building {what} ran past {timeout_s:g} s and was stopped") from None
        if done.returncode != 0 or not output.is_file():
            raise RuntimeError(f"building {what} failed:\n{done.stderr}")
        return Built(
            files=(library,),
            dependencies=parse_depfile(depfile.read_text(encoding="utf-8", errors="replace"), staging),
            search_folders=(*(Path(f) for f in search_folders), main.parent),
            meta={"command": command},
        )

    cache = BuildCache(Path(cache_dir), lock_timeout_s=timeout_s, env=cache_env)
    return cache.get_or_build(base, build, what=f"building {what}").path(library)
