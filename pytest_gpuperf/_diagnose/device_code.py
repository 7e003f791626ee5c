"""A file of device code (:class:`Binary`: a cubin, or a fatbin, object or library that embeds
some) and the CUDA tools run on it: ``cuobjdump`` with a timeout, on the file itself or on a
private copy of the device code inside it."""

from __future__ import annotations

import contextlib
import dataclasses
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pytest_gpuperf._compile import nvcc as _nvcc
from pytest_gpuperf._compile.cuda_module import INSTALL_HINT, ToolchainMissing
from pytest_gpuperf._compile.run import run_tool

__all__ = ["MAX_DEVICE_CODE_BYTES", "TOOL_TIMEOUT_S", "Binary", "UnreadableBinary", "cuobjdump", "tool_input"]

TOOL_TIMEOUT_S = 300.0
MAX_DEVICE_CODE_BYTES = 1 << 30


class UnreadableBinary(RuntimeError):
    """cuobjdump could not read a binary (not device code, damaged, or it ran past its time)."""


@dataclasses.dataclass(frozen=True)
class Binary:
    """A file holding device code: a cubin, or a fatbin, object or library that embeds one."""

    path: Path
    found_in: str  # where it was found: a name of binaries.LOCATIONS ("triton cache")
    log: Path | None = None  # the build's nvcc or ptxas log, for a binary the plugin built
    offset: int = 0  # bytes before the device code: CuPy writes a hash in front of each cubin

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "found_in": self.found_in,
            "log": str(self.log) if self.log is not None else None,
            "offset": self.offset,
        }

    @classmethod
    def from_json(cls, data: Any) -> Binary:
        if not isinstance(data, dict) or not isinstance(data.get("path"), str):
            raise ValueError(f"a binary: expected an object with a path, got {data!r}")
        log = data.get("log")
        offset = data.get("offset", 0)
        if not isinstance(offset, int) or offset < 0:
            raise ValueError(f"a binary: expected a byte offset, got {offset!r}")
        return cls(Path(data["path"]), str(data.get("found_in", "")), Path(log) if log else None, offset)


def cuobjdump(binary: Path, *arguments: str) -> str:
    """``cuobjdump ARGUMENTS binary``'s output. Raises :class:`ToolchainMissing` without
    cuobjdump and :class:`UnreadableBinary` when it fails on the file."""
    try:
        tool = _nvcc.find_cuobjdump()
    except _nvcc.NvccNotFound as exc:
        raise ToolchainMissing(f"{exc} ({INSTALL_HINT})") from exc
    command = [str(tool), *arguments, str(binary)]
    try:
        done = run_tool(command, timeout_s=TOOL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise UnreadableBinary(f"`{' '.join(command)}` ran past {TOOL_TIMEOUT_S:g} s and was stopped") from None
    except OSError as exc:
        raise ToolchainMissing(f"cannot run {tool}: {exc}") from exc
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip()[:500]
        raise UnreadableBinary(f"cuobjdump cannot read {binary} (exit {done.returncode}): {said}")
    return done.stdout


@contextlib.contextmanager
def tool_input(binary: Binary) -> Iterator[Path]:
    """A path the CUDA tools can read for ``binary``: the file itself, or, for a file with bytes in
    front of its device code, a private temporary copy of the device code."""
    if binary.offset == 0:
        yield binary.path
        return
    with tempfile.TemporaryDirectory(prefix="gpuperf-diagnose-") as folder:
        copy = Path(folder) / "kernel.cubin"
        with open(binary.path, "rb") as fh:
            fh.seek(binary.offset)
            copy.write_bytes(fh.read(MAX_DEVICE_CODE_BYTES))
        yield copy
