"""Run-time compiled CUDA modules, cached per process.

CuPy compiles with NVRTC and keeps its own on-disk cache; this layer adds a per-process
cache keyed on the source text and options so each test does not re-read and re-hash
the file, and turns compile failures into errors that name the source.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any


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
    text = path.read_text()
    digest = hashlib.sha256(text.encode()).hexdigest()
    return _compile(str(path), digest, tuple(options), tuple(name_expressions), backend)


@functools.cache
def _compile(path: str, digest: str, options: tuple[str, ...], names: tuple[str, ...], backend: str) -> Any:
    import cupy  # lazily: the plugin must load on machines without CUDA

    code = Path(path).read_text()
    include_dir = str(Path(path).parent)
    opts = options + (f"-I{include_dir}",)
    module = cupy.RawModule(code=code, options=opts, name_expressions=names or None, backend=backend)
    try:
        module.compile()
    except cupy.cuda.compiler.CompileException as exc:
        raise KernelCompileError(f"{path}: compilation failed with options {list(opts)}:\n{exc}") from exc
    return module
