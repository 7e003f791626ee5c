"""Running a compiler or binary tool: an argument list (never a shell), a timeout, and on
timeout the whole process group ended, not just the first process.

nvcc runs cicc, ptxas and the host compiler as children; ``subprocess.run(timeout=...)`` kills
nvcc alone and then waits for its pipes, which those children keep open, so it would hang as
long as they run. Each tool starts in a session of its own and the group is killed instead.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["run_tool"]


def run_tool(
    command: Sequence[str],
    *,
    timeout_s: float,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    input_text: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``command`` and return its exit code and output (decoded as UTF-8, bad bytes replaced).

    Raises ``subprocess.TimeoutExpired`` once ``timeout_s`` has passed, after killing the process
    and everything it started; ``OSError`` when the program cannot be started.
    """
    proc = subprocess.Popen(
        list(command),
        stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        errors="replace",
        cwd=cwd,
        env=dict(env) if env is not None else None,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(input_text, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise subprocess.TimeoutExpired(list(command), timeout_s) from None
    except BaseException:  # Ctrl-C: the tool's own session does not get the terminal's signal
        _kill_group(proc)
        raise
    return subprocess.CompletedProcess(list(command), proc.returncode, out, err)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate()
