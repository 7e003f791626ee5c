"""load_module's cache keys follow the headers a source includes (CPU only, a fake CuPy)."""
from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from pytest_gpuperf._compile import modules
from pytest_gpuperf._compile.modules import include_dirs, included_files, load_module, sources_digest


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "sub").mkdir()
    (tmp_path / "inc").mkdir()
    (tmp_path / "k.cu").write_text('#include "a.cuh"\n#include <cuda_fp16.h>\n#include "missing.cuh"\n__global__ void k() {}\n')
    (tmp_path / "a.cuh").write_text('#pragma once\n#include "sub/b.cuh"\n#include "c.cuh"\n')
    (tmp_path / "sub" / "b.cuh").write_text('#pragma once\n  #  include "../a.cuh"\n')  # a cycle back to a.cuh
    (tmp_path / "inc" / "c.cuh").write_text("#pragma once\n#define C 1\n")
    (tmp_path / "unrelated.cuh").write_text("#define U 1\n")
    return tmp_path


def test_every_local_header_is_followed_once_through_folders_and_include_paths(tree: Path) -> None:
    files = included_files(tree / "k.cu", [tree / "inc"])
    assert [f.relative_to(tree).as_posix() for f in files] == ["k.cu", "a.cuh", "sub/b.cuh", "inc/c.cuh"]


def test_the_digest_changes_with_a_nested_header_and_only_with_what_is_included(tree: Path) -> None:
    dirs = [tree / "inc"]
    before = sources_digest(tree / "k.cu", dirs)
    (tree / "unrelated.cuh").write_text("#define U 2\n")
    assert sources_digest(tree / "k.cu", dirs) == before
    (tree / "inc" / "c.cuh").write_text("#pragma once\n#define C 2\n")
    assert sources_digest(tree / "k.cu", dirs) != before


def test_include_paths_are_read_in_every_spelling() -> None:
    options = ["-std=c++17", "-I/a", "-I", "/b", "--include-path=/c", "--include-path", "/d", "-DX=1"]
    assert include_dirs(options) == (Path("/a"), Path("/b"), Path("/c"), Path("/d"))


class FakeRawModule:
    built: list[FakeRawModule] = []

    def __init__(self, code: str, options: tuple[str, ...], name_expressions: Any, backend: str):
        self.code, self.options = code, options
        FakeRawModule.built.append(self)

    def compile(self) -> None:
        pass


def test_cupy_is_handed_a_new_key_when_only_a_header_changed(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("cupy")
    fake.RawModule = FakeRawModule  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupy", fake)
    modules._compile.cache_clear()
    FakeRawModule.built.clear()
    first = load_module(tree / "k.cu", options=[f"-I{tree / 'inc'}"])
    assert load_module(tree / "k.cu", options=[f"-I{tree / 'inc'}"]) is first  # the per-process cache
    (tree / "inc" / "c.cuh").write_text("#pragma once\n#define C 3\n")
    second = load_module(tree / "k.cu", options=[f"-I{tree / 'inc'}"])
    assert second is not first and len(FakeRawModule.built) == 2
    assert first.code != second.code, "CuPy keys its disk cache on the code: it must differ"
    assert first.code.startswith((tree / "k.cu").read_text()) and "sha256" in first.code.splitlines()[-1]
    assert first.options[-1] == f"-I{tree}"
    modules._compile.cache_clear()


def test_a_header_is_found_where_the_compiler_finds_it_first(tmp_path: Path) -> None:
    """k.cu includes sub/b.cuh, which includes c.cuh; with -Iinc before the source's folder, the
    compiler takes inc/c.cuh (beside b.cuh there is none), not the source folder's c.cuh."""
    src, inc = tmp_path / "src", tmp_path / "inc"
    (src / "sub").mkdir(parents=True)
    inc.mkdir()
    (src / "k.cu").write_text('#include "sub/b.cuh"\n')
    (src / "sub" / "b.cuh").write_text('#include "c.cuh"\n')
    (src / "c.cuh").write_text("#define C 0\n")
    (inc / "c.cuh").write_text("#define C 1\n")
    files = included_files(src / "k.cu", include_dirs([f"-I{inc}", f"-I{src}"]))
    assert [f.relative_to(tmp_path).as_posix() for f in files] == ["src/k.cu", "src/sub/b.cuh", "inc/c.cuh"]
