"""Digests of the code of modules the plugin loaded, by module handle, so that two functions loaded
from two copies of one build (the working tree's and ``--gpu-perf-against``'s) can be proven to
run the same code (``launch_identity``).

A digest is recorded only where the plugin knows exactly what produced the module:
``load_module`` records, for the module CuPy compiled, a digest of the compiler's whole input
(the source and every local header it includes, by content and by path relative to the source's
folder, the options with include folders written relative to it, the name expressions and the
backend); one process compiles both sides with one compiler. A function of any other module has
no digest here.
"""

from __future__ import annotations

import ctypes

from pytest_gpuperf._timing import driver

__all__ = ["record_module", "code_of", "COMPILER_INPUT"]

COMPILER_INPUT = "same compiler input (source, headers, options) in the plugin's loader"

_digests: dict[int, str] = {}  # CUmodule handle -> digest


def _module_of(function: int) -> int | None:
    module = ctypes.c_void_p()
    try:
        status = driver.load().cuFuncGetModule(ctypes.byref(module), function)
    except (OSError, AttributeError):
        return None
    return int(module.value or 0) if status == 0 else None


def record_module(function: int, digest: str) -> None:
    """Record ``digest`` for the module that holds the loaded function ``function`` (a
    ``CUfunction`` handle); nothing where the driver cannot say which module that is."""
    module = _module_of(function) if function else None
    if module:
        _digests[module] = digest


def code_of(function: int) -> tuple[str, str] | None:
    """The recorded digest of ``function``'s module and what it digests, or None."""
    module = _module_of(function) if function else None
    digest = _digests.get(module) if module else None
    return (digest, COMPILER_INPUT) if digest else None
