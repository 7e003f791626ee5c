"""Every input that changes a build invalidates its cache entry: the real nvcc (the `compile`
extra), a shared library (its host function is called through ctypes) and a cubin.

Each case once gave a stale binary: a header in a sub-folder, in ``../``, found through an
``-I`` flag or through a symlinked folder; ``NVCC_APPEND_FLAGS``; another host compiler first
on PATH.

The shared library and the cubin are keyed the same way (compile/cache.py's build_key_fields,
nvcc's identity, the headers ``nvcc -M`` lists), so the default run checks every case on the
cubin (about 2 s of nvcc each) and one on the shared library; the slow tier (the nightly CI job)
checks every case on both (about 5 s each).
"""
from __future__ import annotations

import ctypes
import os
import shutil
from pathlib import Path
from typing import Callable

import pytest

from pytest_gpuperf._compile.nvcc import NvccNotFound, build_shared_library, find_nvcc
from pytest_gpuperf._compile.cuda_module import CudaModule
from pytest_gpuperf._compile.cubin import compile_module

pytestmark = pytest.mark.build

SOURCE = """\
#include "{include}"
#ifndef EXTRA
#define EXTRA 0
#endif
extern "C" int value() {{ return VALUE + EXTRA; }}
extern "C" __global__ void k(int* x) {{ x[0] = VALUE + EXTRA; }}
"""
HEADER = "#pragma once\n#define VALUE {value}\n"
CASES = ["subfolder", "parent_folder", "include_flag", "symlinked_folder", "append_flags", "host_compiler"]


@pytest.fixture(autouse=True)
def real_nvcc() -> None:
    try:
        find_nvcc()
    except NvccNotFound as exc:
        pytest.skip(f"needs nvcc (pip install 'pytest-gpuperf[compile]'): {exc}")


def prepare(case: str, root: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[CudaModule, Callable[[], int]]:
    """The project of one case, as a module; and a change that must reach the binary, which
    returns the value the rebuilt code must compute (it computes 1 before)."""
    src, header = root / "src", None
    include = "sub/v.h"
    include_dirs: tuple[Path, ...] = ()
    options: tuple[str, ...] = ("-std=c++17",)
    if case == "parent_folder":
        include, header = "../common/v.h", root / "common" / "v.h"
    elif case == "include_flag":
        include, header = "v.h", root / "flag-inc" / "v.h"
        options += (f"-I{root / 'flag-inc'}",)
    elif case == "symlinked_folder":
        include, header = "linked/v.h", root / "real" / "v.h"
        (root / "inc").mkdir()
        (root / "real").mkdir()
        (root / "inc" / "linked").symlink_to(root / "real", target_is_directory=True)
        include_dirs = (root / "inc",)
    header = header or src / "sub" / "v.h"
    header.parent.mkdir(parents=True, exist_ok=True)
    header.write_text(HEADER.format(value=1))
    src.mkdir(exist_ok=True)
    (src / "k.cu").write_text(SOURCE.format(include=include))

    def change() -> int:
        if case == "append_flags":
            monkeypatch.setenv("NVCC_APPEND_FLAGS", "-DEXTRA=5")
            return 6
        if case == "host_compiler":  # same compiler, wrapped: another program first on PATH
            wrappers = root / "host-bin"
            wrappers.mkdir()
            for tool in ("gcc", "g++"):
                real = shutil.which(tool)
                assert real, f"{tool} not found"
                (wrappers / tool).write_text(f'#!/bin/sh\nexec {real} -DEXTRA=7 "$@"\n')
                (wrappers / tool).chmod(0o755)
            monkeypatch.setenv("PATH", f"{wrappers}{os.pathsep}{os.environ['PATH']}")
            return 8
        header.write_text(HEADER.format(value=2))
        return 2

    module = CudaModule("stale", src / "k.cu", options=options, archs=("sm_90",), include_dirs=include_dirs)
    return module, change


@pytest.mark.parametrize("case", [case if case == "include_flag" else pytest.param(case, marks=pytest.mark.slow)
                                  for case in CASES])
def test_shared_library_is_rebuilt(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module, change = prepare(case, tmp_path, monkeypatch)

    def build():
        return build_shared_library([module.source], arch="sm_90", flags=module.options,
                                    include_dirs=module.include_dirs, cache_dir=tmp_path / "cache")

    first = build()
    assert ctypes.CDLL(str(first.library)).value() == 1
    want = change()
    second = build()
    assert not second.cached, f"{case}: the changed input was not in the cache key"
    assert ctypes.CDLL(str(second.library)).value() == want
    assert build().cached  # and the new entry is found again


@pytest.mark.parametrize("case", CASES)
def test_cubin_is_rebuilt(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    module, change = prepare(case, tmp_path, monkeypatch)
    first = compile_module(module, "sm_90", cache_dir=tmp_path / "cache", sass=False)
    before = first.binary.read_bytes()
    change()
    second = compile_module(module, "sm_90", cache_dir=tmp_path / "cache", sass=False)
    assert not second.cached, f"{case}: the changed input was not in the cache key"
    assert second.binary.read_bytes() != before
    assert compile_module(module, "sm_90", cache_dir=tmp_path / "cache", sass=False).cached
