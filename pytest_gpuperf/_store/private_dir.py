"""Per-user cache folders: created with mode 0700 and checked before a binary is loaded from them.

A compiled kernel or emulator library is code this process will run, so the folder it comes
from must be one that only the current user can change: owned by that user, not writable by
group or others, and not inside a folder that everyone may write without the sticky bit (there
another user could rename ours away and put their own in its place). The default is
``$XDG_CACHE_HOME/pytest-gpuperf`` (``~/.cache/pytest-gpuperf``), never the shared temporary
folder, where another user or an earlier job could plant a library under a predictable name.
``GPU_PERF_CACHE_DIR`` moves it (under the project, say) and is checked the same way.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pytest_gpuperf.errors import UnsafePathError

__all__ = [
    "CACHE_ENV",
    "cache_folder",
    "check_private_dir",
    "default_cache_root",
    "ensure_private_dir",
    "replaceable_from",
]

CACHE_ENV = "GPU_PERF_CACHE_DIR"


def _current_uid() -> int:
    return os.geteuid()


def default_cache_root() -> Path:
    """``$GPU_PERF_CACHE_DIR``, else ``$XDG_CACHE_HOME/pytest-gpuperf``, else
    ``~/.cache/pytest-gpuperf`` (not created here)."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and Path(xdg).is_absolute():  # the XDG spec says to ignore a relative value
        return Path(xdg) / "pytest-gpuperf"
    try:
        home = Path.home()
    except RuntimeError:
        raise UnsafePathError(
            f"no home folder to keep the build cache in; set {CACHE_ENV} to a folder of your own"
        ) from None
    return home / ".cache" / "pytest-gpuperf"


def cache_folder(name: str, *, env: str | None = None, root: Path | None = None) -> Path:
    """The private folder for one cache: ``$<env>`` when that variable is set, else
    ``<root or default_cache_root()>/<name>``, the root checked too (whoever can write it could
    swap the folder); created with mode 0700 and checked."""
    override = os.environ.get(env) if env else None
    if override:
        return ensure_private_dir(Path(override), env=env)
    parent = ensure_private_dir(root if root is not None else default_cache_root())
    return ensure_private_dir(parent / name)


def ensure_private_dir(path: Path, *, env: str | None = CACHE_ENV) -> Path:
    """Create ``path`` and its missing parents with mode 0700 if needed, check it with
    :func:`check_private_dir`, and return it as an absolute path. ``env`` names the variable
    that moves the folder, for the messages."""
    path = Path(path).expanduser().absolute()
    missing = [path, *(p for p in path.parents if not p.exists())]
    try:
        for folder in reversed(missing):  # pathlib would give missing parents the umask's mode
            folder.mkdir(mode=0o700, exist_ok=True)
    except OSError as exc:
        raise UnsafePathError(f"cannot create the cache folder {path}: {exc.strerror or exc}; {_advice(env)}") from None
    check_private_dir(path, env=env)
    return path


def _advice(env: str | None) -> str:
    return f"use a folder of your own (set {env})" if env else "use a folder of your own"


def check_private_dir(path: Path, *, env: str | None = CACHE_ENV) -> None:
    """Raise :class:`UnsafePathError` unless ``path`` is a folder owned by the current user that
    group and others cannot write, inside no everyone-writable folder without the sticky bit."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise UnsafePathError(f"cache folder {path} cannot be used: {exc.strerror or exc}; {_advice(env)}") from None
    advice = _advice(env)
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafePathError(f"cache folder {path} is not a folder; {advice}")
    uid = _current_uid()
    if st.st_uid != uid:
        raise UnsafePathError(
            f"cache folder {path} is owned by uid {st.st_uid}, not by you (uid {uid}); a binary loaded from it "
            f"could be another user's code. Remove it or {advice}"
        )
    mode = stat.S_IMODE(st.st_mode)
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafePathError(
            f"cache folder {path} is writable by {'others' if mode & stat.S_IWOTH else 'its group'} (mode {mode:04o}); "
            f"another user could plant a binary there. Run `chmod 700 {path}` or {advice}"
        )
    parent = replaceable_from(path)
    if parent is not None:
        raise UnsafePathError(
            f"cache folder {path} lies inside {parent}, which every user can write and which lacks the "
            f"sticky bit, so another user could replace the cache folder; {advice}"
        )


def replaceable_from(path: Path) -> Path | None:
    """The first folder above ``path`` that every user can write and that lacks the sticky bit
    (so another user could replace what lies below it), or None."""
    for parent in Path(os.path.realpath(path)).parents:
        try:
            pst = os.stat(parent)
        except OSError:
            continue
        if pst.st_mode & stat.S_IWOTH and not pst.st_mode & stat.S_ISVTX:
            return parent
    return None
