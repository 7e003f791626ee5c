"""Running git and reading what it prints, within a cap.

What git prints is read in chunks, and the command is stopped once it passes the cap: a
baseline file committed at 300 MiB, read whole by ``gpuperf diff --git`` and then parsed, took
gigabytes of memory. A blob's size is asked first (``blob_size``, ``git cat-file -s``), so an
oversized file is refused before any of it is read. The caps are those of the JSON reader
(``jsonio.MAX_JSON_BYTES``): nothing git prints here is worth reading past it.
"""

from __future__ import annotations

import subprocess
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_gpuperf._store import jsonio
from pytest_gpuperf.errors import GpuPerfError

_STDERR_CHARS = 4000  # what is kept of git's complaint, for a message


@dataclass(frozen=True)
class GitRun:
    returncode: int
    stdout: bytes
    stderr: str


def run_git(args: Sequence[str], cwd: Path, *, limit: int | None = None, timeout_s: float = 120.0) -> GitRun:
    """``git ARGS`` in ``cwd``: its exit status, what it printed (at most ``limit`` bytes, default
    ``jsonio.MAX_JSON_BYTES``) and the start of its error output.

    Raises ``GpuPerfError`` (one line naming the command) when git is not installed, prints more
    than ``limit`` or runs past ``timeout_s``; the command is stopped then.
    """
    limit = jsonio.MAX_JSON_BYTES if limit is None else limit
    command = " ".join(["git", *args])
    with tempfile.TemporaryFile() as err:  # a file, not a pipe: git never blocks on its error output
        try:
            proc = subprocess.Popen(
                ["git", *args], cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err
            )
        except FileNotFoundError:
            raise GpuPerfError(f"git is not installed (running {command})") from None
        timer = threading.Timer(timeout_s, proc.kill)
        timer.start()
        try:
            with proc:
                assert proc.stdout is not None
                try:
                    out = jsonio.read_capped(proc.stdout, limit)
                except jsonio.TooLarge:
                    proc.kill()
                    raise GpuPerfError(
                        f"{command} printed more than {_size(limit)}, more than pytest-gpuperf reads; it was stopped"
                    ) from None
                code = proc.wait()
        finally:
            timed_out = not timer.is_alive()
            timer.cancel()
        if timed_out and code != 0:
            raise GpuPerfError(f"{command} ran past {timeout_s:g} s and was stopped")
        err.seek(0)
        text = err.read(_STDERR_CHARS).decode("utf-8", "replace")
    return GitRun(code, out, text)


def blob_size(spec: str, cwd: Path) -> int | None:
    """The size in bytes of the blob ``spec`` (``<commit>:<path>``), or None when git cannot tell."""
    done = run_git(["cat-file", "-s", spec], cwd, limit=64)
    try:
        return int(done.stdout.decode("ascii", "replace").strip()) if done.returncode == 0 else None
    except ValueError:
        return None


def _size(limit: int) -> str:
    mib = 1024 * 1024
    return f"{limit // mib} MiB" if limit >= mib and limit % mib == 0 else f"{limit:,} bytes"
