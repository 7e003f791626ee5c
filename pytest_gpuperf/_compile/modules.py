"""Run-time compiled CUDA modules, cached per process.

CuPy compiles with NVRTC and keeps its own on-disk cache, keyed on the code text and the options
but not on the headers the code includes: a kernel whose header changed would load the cubin
built from the old header. So the key this layer uses, per process and for CuPy's cache, is a
digest of the source and every local header it includes (``#include "..."``, looked for as the
compiler looks: beside the including header, then in the ``-I`` folders in order), carried into
CuPy as a comment appended to the code. Headers reached only through ``#include <...>``,
``-include`` or a macro are not followed. Compile failures become errors that name the source.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
# An include whose target this module cannot see: a macro, or a <path> climbing out of its -I folder.
UNFOLLOWED_INCLUDE = re.compile(r'^\s*#\s*include\s*(?:[^"<\s]|<[^>]*\.\./)', re.M)
HEADER_SUFFIXES = frozenset({".h", ".hh", ".hpp", ".cuh", ".inl", ".cu", ".inc"})


class KernelCompileError(RuntimeError):
    """A CUDA source failed to compile; the message names the file and carries the log."""


def load_module(
    source: str | Path,
    *,
    options: Sequence[str] = (),
    name_expressions: Sequence[str] = (),
    backend: str = "nvrtc",
) -> Any:
    """Compile ``source`` (a ``.cu`` path) with CuPy and return the ``cupy.RawModule``.

    Templates are instantiated through ``name_expressions``; fetch them with
    ``module.get_function("kernel<float, 128>")``.
    """
    path = Path(source).resolve()
    opts = (*options, f"-I{path.parent}")
    digest = sources_digest(path, include_dirs(opts))
    module = _compile(str(path), digest, opts, tuple(name_expressions), backend)
    _record_code(module, compiler_input_digest(path, opts, tuple(name_expressions), backend), tuple(name_expressions))
    return module


def compiler_input_digest(source: Path, options: Sequence[str], names: Sequence[str], backend: str) -> str | None:
    """SHA-256 over everything the compiler can read from the project, with no absolute path in
    it: the source and its local headers (by content and path relative to the source's folder),
    every file under every include folder, the options with include folders written relative to
    the source's folder, the name expressions and the backend. Two copies of one tree (another
    revision's export, another checkout) give the same digest. None where an ``#include`` names a
    macro or climbs out of its folder (``<../x.h>``): what it reaches is not known here."""
    folder = source.parent
    dirs = include_dirs(options)
    h = hashlib.sha256()
    files = [*included_files(source, dirs)]
    for d in dirs:
        files += sorted(p for p in Path(d).rglob("*") if p.is_file() and p.suffix in HEADER_SUFFIXES)
    for path in files:
        content = path.read_bytes()
        if UNFOLLOWED_INCLUDE.search(content.decode("utf-8", "replace")):
            return None
        h.update(os.path.relpath(path, folder).encode() + b"\0" + content + b"\0")
    shown = {str(d) for d in dirs}
    for option in options:
        if option.startswith("-I") and option[2:] in shown:
            option = "-I" + os.path.relpath(option[2:], folder)
        elif option.startswith("--include-path=") and option.split("=", 1)[1] in shown:
            option = "-I" + os.path.relpath(option.split("=", 1)[1], folder)
        elif option in shown:
            option = os.path.relpath(option, folder)
        h.update(option.encode() + b"\0")
    h.update(b"\1" + "\0".join(names).encode() + b"\1" + backend.encode())
    return h.hexdigest()


def _record_code(module: Any, digest: str | None, names: tuple[str, ...]) -> None:
    """Record ``digest`` for the loaded module (``code_images``), found through one of its
    functions; nothing where CuPy does not show the function's handle."""
    if not names or digest is None:
        return
    try:
        function = int(module.get_function(names[0]).kernel.ptr)
    except Exception:  # a CuPy without these attributes: the module simply has no recorded digest
        return
    from pytest_gpuperf._timing.code_images import record_module

    record_module(function, digest)


def include_dirs(options: Sequence[str]) -> tuple[Path, ...]:
    """The folders of ``-I DIR`` / ``-IDIR`` / ``--include-path=DIR`` options, in order."""
    found: list[Path] = []
    pending = False
    for option in options:
        if pending:
            found.append(Path(option))
            pending = False
        elif option in ("-I", "--include-path"):
            pending = True
        elif option.startswith("--include-path="):
            found.append(Path(option.split("=", 1)[1]))
        elif option.startswith("-I"):
            found.append(Path(option[2:]))
    return tuple(found)


def included_files(source: Path, dirs: Sequence[Path] = ()) -> list[Path]:
    """``source`` and every local header it includes, directly or through other headers, each
    once, in the order first met. A header is looked for where the compiler looks: beside the
    file that includes it, then in ``dirs`` in order; the source itself is compiled from a
    string, so its own includes are looked for in ``dirs`` only (load_module ends them with the
    source's folder). An include found nowhere is left out (it may sit behind an #ifdef this
    build does not take; the compiler reports it if it is needed)."""
    root = source.resolve()
    seen: dict[Path, None] = {}
    pending = [root]
    while pending:
        current = pending.pop(0)
        if current in seen:
            continue
        seen[current] = None
        try:
            text = current.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        folders = (*dirs, root.parent) if current == root else (current.parent, *dirs, root.parent)
        for name in LOCAL_INCLUDE.findall(text):
            for folder in folders:
                candidate = (folder / name).resolve()
                if candidate.is_file():
                    pending.append(candidate)
                    break
    return list(seen)


def sources_digest(source: Path, dirs: Sequence[Path] = ()) -> str:
    """SHA-256 over the names and contents of ``source`` and the local headers it includes."""
    h = hashlib.sha256()
    for path in included_files(source, dirs):
        h.update(str(path).encode() + b"\0")
        h.update(path.read_bytes() if path.is_file() else b"")
        h.update(b"\0")
    return h.hexdigest()


@functools.cache
def _compile(path: str, digest: str, options: tuple[str, ...], names: tuple[str, ...], backend: str) -> Any:
    import cupy  # lazily: the plugin must load on machines without CUDA

    # The digest goes into the code CuPy keys its disk cache on: a changed header is a new key.
    code = Path(path).read_text() + f"\n// pytest-gpuperf: source and headers sha256 {digest}\n"
    module = cupy.RawModule(code=code, options=options, name_expressions=names or None, backend=backend)
    try:
        module.compile()
    except cupy.cuda.compiler.CompileException as exc:
        raise KernelCompileError(f"{path}: compilation failed with options {list(options)}:\n{exc}") from exc
    return module
