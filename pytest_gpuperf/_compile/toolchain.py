"""What identifies a build's toolchain, for the cache keys, and which arguments nvcc cannot take.

A compiler is identified by its resolved path and its ``--version`` text (probed once per
process and executable). For nvcc that is not enough: it runs a host compiler (``gcc``/``g++``
found on its PATH, or ``-ccbin``/``NVCC_CCBIN``) and its own cicc, ptxas, fatbinary and nvlink,
and it reads flags from the environment. ``nvcc --dryrun`` (milliseconds) prints exactly the
commands it would run, so every program it names is resolved as nvcc would resolve it and
identified: host compilers by path and version, nvcc's own tools by path, size and mtime.

nvcc hands paths and flags to those commands through ``/bin/sh`` inside double quotes: a source
named ``k`touch x`.cu`` runs ``touch x``. :func:`refuse_shell_metacharacters` stops such an
argument before nvcc sees it.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
from collections.abc import Sequence
from pathlib import Path

from pytest_gpuperf._compile.run import run_tool
from pytest_gpuperf.errors import UnsafePathError

__all__ = [
    "BUILD_ENV_VARS",
    "SHELL_METACHARACTERS",
    "environment_identity",
    "nvcc_identity",
    "refuse_shell_metacharacters",
    "tool_identity",
    "tool_version",
]

# Read by nvcc (its flags, host compiler and nvcc.profile variables) or by the host compiler
# (header and library search, the driver's own programs): each changes what a build produces.
BUILD_ENV_VARS: tuple[str, ...] = (
    "NVCC_PREPEND_FLAGS",
    "NVCC_APPEND_FLAGS",
    "NVCC_CCBIN",
    "INCLUDES",
    "LIBRARIES",
    "CUDAFE_FLAGS",
    "PTXAS_FLAGS",
    "CPATH",
    "C_INCLUDE_PATH",
    "CPLUS_INCLUDE_PATH",
    "LIBRARY_PATH",
    "GCC_EXEC_PREFIX",
    "COMPILER_PATH",
)
SHELL_METACHARACTERS = "$`\"';&|<>\n\\"
_VERSION_TIMEOUT_S = 60.0
_DRYRUN_VAR_RE = re.compile(r"^#\$ ([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_DRYRUN_EXPAND_RE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
_FILE_UTILITIES = frozenset({"rm", "cp", "mv", "mkdir"})  # nvcc's clean-up steps build nothing


def refuse_shell_metacharacters(argument: str | os.PathLike[str], what: str) -> None:
    """Raise :class:`UnsafePathError` when ``argument`` (``what``: "source file", "flag", ...)
    holds a character that nvcc's shell would interpret: ``$ ` " ' ; & | < >``, a backslash or a
    newline."""
    text = os.fspath(argument)
    bad = sorted({c for c in text if c in SHELL_METACHARACTERS})
    if bad:
        shown = ", ".join("newline" if c == "\n" else repr(c) for c in bad)
        raise UnsafePathError(
            f"{what} {text!r} contains {shown}: nvcc passes its arguments to sub-commands through /bin/sh, "
            "which would interpret them (a name with $(...) or backticks runs a command). Rename or move it "
            "to a path without $ ` \" ' ; & | < > \\ or newlines."
        )


def tool_version(path: str | os.PathLike[str]) -> str:
    """``<tool> --version`` output (stdout, else stderr), probed once per process for each
    executable file (a replaced file, with a new size or mtime, is probed again). Raises
    OSError when it cannot run; a nonzero exit is part of the text."""
    real = os.path.realpath(path)
    st = os.stat(real)
    return _version_of(real, st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _version_of(real: str, size: int, mtime_ns: int) -> str:
    done = run_tool([real, "--version"], timeout_s=_VERSION_TIMEOUT_S)
    text = done.stdout.strip() or done.stderr.strip()
    return text if done.returncode == 0 else f"exit {done.returncode}: {text}"


def tool_identity(path: str | os.PathLike[str]) -> str:
    """The resolved path of a tool and its ``--version`` text."""
    return f"{os.path.realpath(path)}\n{tool_version(path)}"


def environment_identity() -> str:
    """The values of :data:`BUILD_ENV_VARS` that are set, one ``NAME=value`` per line."""
    return "\n".join(f"{name}={os.environ[name]}" for name in BUILD_ENV_VARS if name in os.environ)


def nvcc_identity(nvcc: str | os.PathLike[str], arguments: Sequence[str]) -> str:
    """Everything about the toolchain that can change what ``nvcc <arguments> <source>``
    builds: nvcc's path, version and nvcc.profile, every program its dry run names (host
    compilers with their version), and :func:`environment_identity`."""
    nvcc_path = os.path.realpath(nvcc)
    lines = [tool_identity(nvcc_path), environment_identity()]
    profile = Path(nvcc_path).with_name("nvcc.profile")
    if profile.is_file():
        lines.append(profile.read_text(errors="replace"))
    top = Path(nvcc_path).parent.parent
    env = tuple((name, os.environ.get(name, "")) for name in ("PATH", *BUILD_ENV_VARS))
    programs, note = _dryrun_programs(nvcc_path, tuple(arguments), env)
    if note:
        lines.append(note)
    for program in programs:
        lines.append(_program_identity(program, top))
    return "\n".join(lines)


def _program_identity(program: str, nvcc_top: Path) -> str:
    real = os.path.realpath(program)
    try:
        st = os.stat(real)
    except OSError:
        return f"{program}: missing"
    if Path(real).is_relative_to(nvcc_top):  # cicc, ptxas, ...: no common --version
        return f"{real} {st.st_size} {st.st_mtime_ns}"
    try:
        return f"{real}\n{tool_version(real)}"
    except OSError as exc:
        return f"{real}: {exc}"


@functools.lru_cache(maxsize=64)
def _dryrun_programs(
    nvcc: str, arguments: tuple[str, ...], env: tuple[tuple[str, str], ...]
) -> tuple[tuple[str, ...], str]:
    """The programs ``nvcc --dryrun`` would run for ``arguments`` (resolved on the PATH nvcc
    sets), and a note when the dry run failed. ``env`` is part of the memo key only."""
    try:
        done = run_tool(
            [nvcc, "--dryrun", *arguments, "gpuperf-probe.cu", "-o", os.devnull], timeout_s=_VERSION_TIMEOUT_S
        )
    except OSError as exc:
        return (), f"dry run failed: {exc}"
    variables: dict[str, str] = {}
    programs: dict[str, None] = {}
    for line in (done.stdout + "\n" + done.stderr).splitlines():
        if not line.startswith("#$ "):
            continue
        assignment = _DRYRUN_VAR_RE.match(line)
        if assignment:
            variables[assignment.group(1)] = assignment.group(2).strip()
            continue
        try:
            words = shlex.split(line[3:])
        except ValueError:
            continue
        if not words or words[0] in _FILE_UTILITIES:
            continue
        name = _DRYRUN_EXPAND_RE.sub(lambda m: variables.get(m.group(1), ""), words[0])
        found = name if "/" in name else shutil.which(name, path=variables.get("PATH", os.environ.get("PATH")))
        programs.setdefault(found or f"{name} (not found)")
    note = "" if done.returncode == 0 else f"dry run exit {done.returncode}: {done.stderr.strip()[:500]}"
    return tuple(programs), note
