"""Where the emulator library comes from: a private build cache, never the shared temporary folder.

It was once loaded from ``$TMPDIR/megakernel-emulator/mk_emulate_<hash>.so`` whenever that file
existed, so another user, or an earlier job on a long-lived runner, could plant a library whose
constructor then ran in the test process.
"""
from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from kernels.megakernel import emulator
from kernels.megakernel.config import TINY
from pytest_gpuperf._compile.cache import file_digest
from pytest_gpuperf.errors import UnsafePathError


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in ("GPU_PERF_CACHE_DIR", "XDG_CACHE_HOME", "MK_EMULATOR_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_the_default_cache_is_private_and_not_the_temporary_folder(clean_env: Path) -> None:
    folder = emulator.cache_dir()
    assert folder == clean_env / ".cache" / "pytest-gpuperf" / "megakernel-emulator"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_a_shared_emulator_cache_is_refused_before_anything_is_loaded(
    clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "megakernel-emulator"
    shared.mkdir()
    shared.chmod(0o777)  # what the old default under /tmp could be made by anyone
    (shared / "mk_emulate_0123456789abcdef.so").write_bytes(b"planted")
    monkeypatch.setenv("MK_EMULATOR_CACHE", str(shared))
    with pytest.raises(UnsafePathError) as info:
        emulator.build_library(TINY)
    assert f"cache folder {shared} is writable by others (mode 0777)" in str(info.value)
    assert "set MK_EMULATOR_CACHE" in str(info.value)


@pytest.mark.build
@pytest.mark.skipif(emulator.compiler() is None, reason="no C++ compiler for the CPU emulator")
def test_the_library_comes_from_a_verified_entry() -> None:
    library = emulator.build_library(TINY)  # the default cache, which test_emulated.py fills too
    entry = library.parent
    assert entry.parent.parent == emulator.cache_dir() and entry.parent.name == "entries"
    recorded = json.loads((entry / "build.json").read_text())["files"][library.name]
    assert recorded["sha256"] == file_digest(library)
