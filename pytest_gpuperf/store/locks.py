"""File locks that refuse symlinks, give up after a timeout and say who holds them.

``filelock`` (3.20.1 and later) opens lock files with ``O_NOFOLLOW``; the check here comes
first anyway, so a planted link gets a message that names it rather than ``ELOOP``. The
holder of a lock writes ``<lock>.holder`` (pid, host, start time, command) beside it: the lock
file itself cannot carry it, because every waiter opens it with ``O_TRUNC``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
import sys
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

from filelock import FileLock, Timeout

from pytest_gpuperf.errors import GpuPerfError, LockTimeoutError, UnsafePathError
from pytest_gpuperf.store.files import atomic_write_text

__all__ = ["HOLDER_SUFFIX", "describe_holder", "hold"]

HOLDER_SUFFIX = ".holder"
_HOLDER_MAX_CHARS = 300  # a holder file is read for a message only; a planted one stays short


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
        raise LockTimeoutError(
            f"gave up after {timeout_s:g} s waiting for the lock {path} ({purpose}); {describe_holder(path)}. "
            "Wait for that process to finish or stop it; the lock frees itself when its holder exits."
        ) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a link planted between the check and the open
            raise UnsafePathError(_symlink_message(path, purpose)) from None
        raise GpuPerfError(f"cannot open the lock file {path} ({purpose}): {exc.strerror or exc}") from None
    try:
        mine = _write_holder(path)
        try:
            yield
        finally:
            _clear_holder(path, mine)
    finally:
        lock.release()


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
