"""File locks that refuse symlinks, give up after a timeout and say who holds them.

``filelock`` (3.20.1 and later) opens lock files with ``O_NOFOLLOW``; the check here comes
first anyway, so a planted link gets a message that names it rather than ``ELOOP``. The
holder of a lock writes ``<lock>.holder`` (pid, host, start time, command) beside it: the lock
file itself cannot carry it, because every waiter opens it with ``O_TRUNC``.

``hold_machine_wide`` is the lock every process on the host shares, whoever runs it: the GPU
lock. Its file lies in one fixed folder (``machine_lock_dir``: ``$GPU_PERF_LOCK_DIR``, else
``/tmp``; never ``$TMPDIR``, which differs between jobs), is created with mode 0666 whatever the
umask, and is opened for reading alone, without ``O_CREAT`` once it exists: in a sticky folder
such as /tmp, Linux refuses ``O_CREAT`` on another user's file (``fs.protected_regular``), which
``filelock`` always passes. It is opened with ``O_NOFOLLOW`` and ``O_NONBLOCK`` and must be a
regular file, so a planted link or FIFO is refused; nothing is ever read from it or written to
it, it is only locked (``flock``, as ``filelock`` locks).
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

from filelock import FileLock, Timeout

from pytest_gpuperf._store.files import atomic_write_text
from pytest_gpuperf.errors import GpuPerfError, LockTimeoutError, UnsafePathError

__all__ = ["HOLDER_SUFFIX", "LOCK_DIR_ENV", "describe_holder", "hold", "hold_machine_wide", "machine_lock_dir"]

HOLDER_SUFFIX = ".holder"
_HOLDER_MAX_CHARS = 300  # a holder file is read for a message only; a planted one stays short
LOCK_DIR_ENV = "GPU_PERF_LOCK_DIR"
DEFAULT_LOCK_DIR = "/tmp"
_POLL_S = 0.05


@contextlib.contextmanager
def hold(path: Path, *, timeout_s: float, purpose: str) -> Iterator[None]:
    """Hold the lock file ``path`` for the ``with`` block, for ``purpose`` (e.g. "writing
    baseline file x.json"), waiting at most ``timeout_s`` seconds.

    Raises :class:`UnsafePathError` when ``path`` is a symbolic link and
    :class:`LockTimeoutError`, naming the file and its holder, when the wait runs out.
    """
    path = Path(path)
    if path.is_symlink():
        raise UnsafePathError(_symlink_message(path, purpose))
    lock = FileLock(str(path), timeout=timeout_s)
    try:
        lock.acquire()
    except Timeout:
        raise LockTimeoutError(_timeout_message(path, timeout_s, purpose)) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a link planted between the check and the open
            raise UnsafePathError(_symlink_message(path, purpose)) from None
        raise GpuPerfError(f"cannot open the lock file {path} ({purpose}): {exc.strerror or exc}") from None
    try:
        with _holder_recorded(path):
            yield
    finally:
        lock.release()


def machine_lock_dir() -> Path:
    """The folder of the machine-wide locks: ``$GPU_PERF_LOCK_DIR``, else ``/tmp``."""
    return Path(os.environ.get(LOCK_DIR_ENV) or DEFAULT_LOCK_DIR)


@contextlib.contextmanager
def hold_machine_wide(path: Path, *, timeout_s: float, purpose: str) -> Iterator[None]:
    """Hold the machine-wide lock file ``path`` (see the module doc) for the ``with`` block,
    waiting at most ``timeout_s`` seconds; errors as :func:`hold`'s."""
    import fcntl  # POSIX only; imported here so the module still loads elsewhere

    path = Path(path)
    fd = _open_machine_wide(path, purpose)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES):
                    raise GpuPerfError(f"cannot lock {path} ({purpose}): {exc.strerror or exc}") from None
            if time.monotonic() >= deadline:
                raise LockTimeoutError(_timeout_message(path, timeout_s, purpose))
            time.sleep(_POLL_S)
        with _holder_recorded(path):
            yield
    finally:
        os.close(fd)  # releases the lock


@contextlib.contextmanager
def _holder_recorded(path: Path) -> Iterator[None]:
    """Who holds the lock ``path``, written beside it for the ``with`` block (a waiter's timeout names them)."""
    mine = _write_holder(path)
    try:
        yield
    finally:
        _clear_holder(path, mine)


def _open_machine_wide(path: Path, purpose: str) -> int:
    """A read-only descriptor of the lock file ``path``, created (mode 0666) when missing."""
    _check_lock_folder(path.parent, purpose)
    nofollow, cloexec = getattr(os, "O_NOFOLLOW", 0), getattr(os, "O_CLOEXEC", 0)
    while True:
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL | nofollow | cloexec, 0o666)
            except FileExistsError:
                continue  # created meanwhile by another process: open that one
            except OSError as exc:
                raise GpuPerfError(f"cannot create the lock file {path} ({purpose}): {exc.strerror or exc}") from None
            os.fchmod(fd, 0o666)  # the umask would keep other users' processes out
            return fd
        _require_lockable(mode, path, purpose)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | nofollow | cloexec)
        except FileNotFoundError:
            continue  # removed meanwhile
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # a link planted since the lstat
                raise UnsafePathError(_symlink_message(path, purpose)) from None
            raise GpuPerfError(
                f"cannot open the lock file {path} ({purpose}): {exc.strerror or exc}; remove it, or set "
                f"{LOCK_DIR_ENV} to a folder every process of this machine can write"
            ) from None
        try:
            _require_lockable(os.fstat(fd).st_mode, path, purpose)
        except BaseException:
            os.close(fd)
            raise
        return fd


def _require_lockable(mode: int, path: Path, purpose: str) -> None:
    if stat.S_ISLNK(mode):
        raise UnsafePathError(_symlink_message(path, purpose))
    if not stat.S_ISREG(mode):
        raise UnsafePathError(
            f"the lock file {path} ({purpose}) is not a regular file (mode {stat.filemode(mode)}); "
            "remove it, and it is recreated as a plain file"
        )


def _check_lock_folder(folder: Path, purpose: str) -> None:
    """The folder must exist, and be sticky where every user can write it: otherwise another
    user could delete or replace the lock file while it is held."""
    try:
        st = os.stat(folder)
    except OSError as exc:
        raise GpuPerfError(
            f"the lock folder {folder} ({purpose}) cannot be used: {exc.strerror or exc}; create it, or set "
            f"{LOCK_DIR_ENV} to a folder every process of this machine can write"
        ) from None
    if not stat.S_ISDIR(st.st_mode):
        raise GpuPerfError(f"the lock folder {folder} ({purpose}) is not a folder; set {LOCK_DIR_ENV} to a folder")
    if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        raise UnsafePathError(
            f"the lock folder {folder} ({purpose}) is writable by every user but lacks the sticky bit, so another "
            f"user could replace a lock while it is held; run `chmod +t {folder}` or set {LOCK_DIR_ENV}"
        )


def _timeout_message(path: Path, timeout_s: float, purpose: str) -> str:
    return (
        f"gave up after {timeout_s:g} s waiting for the lock {path} ({purpose}); {describe_holder(path)}. "
        "Wait for that process to finish or stop it; the lock frees itself when its holder exits."
    )


def describe_holder(path: Path) -> str:
    """What ``<path>.holder`` says about the process holding the lock ``path``."""
    text = _read_holder(Path(str(path) + HOLDER_SUFFIX))
    return f"it is held by {text}" if text else "its holder left no record (it may be an older pytest-gpuperf)"


def _symlink_message(path: Path, purpose: str) -> str:
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    return (
        f"the lock file {path} ({purpose}) is a symbolic link to {target!r}; locking it could "
        "truncate the link's target. Delete the link; the lock file is recreated as a plain file."
    )


def _holder_text() -> str:
    since = datetime.now(timezone.utc).isoformat(timespec="seconds")
    command = "".join(c for c in " ".join(sys.argv) if c.isprintable())[:120]
    return f"pid {os.getpid()} on {socket.gethostname()} since {since} ({command})"


def _write_holder(path: Path) -> str | None:
    """Record this process as the holder; None when the record cannot be written (a holder file
    of another user in a shared folder), which costs only the name in a later timeout message."""
    text = _holder_text()
    try:
        atomic_write_text(Path(str(path) + HOLDER_SUFFIX), text + "\n", fsync=False)
    except OSError:
        return None
    return text


def _clear_holder(path: Path, mine: str | None) -> None:
    holder = Path(str(path) + HOLDER_SUFFIX)
    if mine is None or _read_holder(holder) != mine:
        return
    with contextlib.suppress(OSError):
        holder.unlink()


def _read_holder(holder: Path) -> str | None:
    """The holder record's text; None when absent, unreadable or not a regular file (a FIFO
    planted there must not hang the message about a lock)."""
    try:
        fd = os.open(holder, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        raw = fh.read(_HOLDER_MAX_CHARS)
    text = "".join(c for c in raw.decode("utf-8", "replace") if c.isprintable()).strip()
    return text or None
