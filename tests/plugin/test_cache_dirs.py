"""Build caches live in per-user folders (mode 0700) that are checked before a binary is loaded."""
from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from pytest_gpuperf._store import private_dir
from pytest_gpuperf._compile.nvcc import build_shared_library, default_cache_dir
from pytest_gpuperf._store.private_dir import cache_folder
from pytest_gpuperf.errors import UnsafePathError

FAKE_NVCC = f"""#!{sys.executable}
import sys
if "--version" in sys.argv:
    print("fake nvcc")
    sys.exit(0)
raise SystemExit("a build ran: " + " ".join(sys.argv))
"""


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in ("GPU_PERF_CACHE_DIR", "XDG_CACHE_HOME", "MK_EMULATOR_CACHE"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def never_builds(tmp_path: Path) -> tuple[Path, Path]:
    """A stand-in nvcc that fails if asked to build, and a source for it."""
    nvcc = tmp_path / "bin" / "nvcc"
    nvcc.parent.mkdir()
    nvcc.write_text(FAKE_NVCC)
    nvcc.chmod(0o755)
    source = tmp_path / "src" / "k.cu"
    source.parent.mkdir()
    source.write_text("__global__ void k() {}\n")
    return nvcc, source


def test_the_default_is_per_user_and_created_private(clean_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert default_cache_dir() == clean_env / ".cache" / "pytest-gpuperf"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "pytest-gpuperf"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/xdg")  # ignored, as the XDG spec says
    assert default_cache_dir() == clean_env / ".cache" / "pytest-gpuperf"
    monkeypatch.setenv("GPU_PERF_CACHE_DIR", str(tmp_path / "project-cache"))
    assert default_cache_dir() == tmp_path / "project-cache"
    folder = cache_folder("nvcc")
    assert folder == tmp_path / "project-cache" / "nvcc"
    for created in (folder, folder.parent):
        assert stat.S_IMODE(created.stat().st_mode) == 0o700


@pytest.mark.parametrize("mode", [0o770, 0o777, 0o757])
def test_a_cache_others_can_write_is_refused_before_building(
    clean_env: Path, tmp_path: Path, never_builds: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, mode: int
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(mode)
    monkeypatch.setenv("GPU_PERF_CACHE_DIR", str(shared))
    nvcc, source = never_builds
    with pytest.raises(UnsafePathError) as info:
        build_shared_library([source], nvcc=nvcc)
    message = str(info.value)
    assert f"cache folder {shared} is writable by" in message and f"mode {mode:04o}" in message
    assert "set GPU_PERF_CACHE_DIR" in message and "\n" not in message
    assert list(shared.iterdir()) == []


def test_a_cache_of_another_user_is_refused(
    clean_env: Path, tmp_path: Path, never_builds: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    me = private_dir._current_uid()
    monkeypatch.setattr(private_dir, "_current_uid", lambda: me + 1)  # as seen by another user
    nvcc, source = never_builds
    with pytest.raises(UnsafePathError, match=rf"cache folder {theirs} is owned by uid {me}, not by you \(uid {me + 1}\)"):
        build_shared_library([source], nvcc=nvcc, cache_dir=theirs)


def test_a_cache_inside_an_open_folder_without_sticky_bit_is_refused(clean_env: Path, tmp_path: Path) -> None:
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    open_folder.chmod(0o777)
    with pytest.raises(UnsafePathError, match=rf"lies inside {open_folder}, which every user can write and which lacks the sticky bit"):
        private_dir.ensure_private_dir(open_folder / "cache")
    open_folder.chmod(0o1777)  # like /tmp: others cannot rename what is ours
    assert private_dir.ensure_private_dir(open_folder / "cache").is_dir()


def test_an_existing_owner_only_cache_is_used_as_it_is(clean_env: Path, tmp_path: Path) -> None:
    old = tmp_path / "old-cache"
    old.mkdir()
    old.chmod(0o755)  # what earlier versions created: readable by others, writable by its owner alone
    assert private_dir.ensure_private_dir(old) == old
    assert stat.S_IMODE(old.stat().st_mode) == 0o755


def test_other_private_folders_follow_the_same_rule(clean_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_gpuperf._store.files import private_dir as files_private_dir  # --gpu-perf-against's checkouts

    assert files_private_dir("against") == clean_env / ".cache" / "pytest-gpuperf" / "against"
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared))
    with pytest.raises(UnsafePathError, match=rf"cache folder {shared / 'pytest-gpuperf'} lies inside {shared}"):
        files_private_dir("against")
