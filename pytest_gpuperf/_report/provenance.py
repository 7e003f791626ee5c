"""Where a result came from: the code's commit, branch and dirty flag, and the software versions.

Written into every JSON report and every baseline file an update writes, so a figure can be
traced to the code that produced it.
"""

from __future__ import annotations

import functools
import platform
import subprocess
from pathlib import Path
from typing import Any


@functools.lru_cache(maxsize=8)
def provenance(rootdir: Path) -> dict[str, Any]:
    """Commit, branch and dirty flag of the git checkout at ``rootdir`` (None where it is not one),
    and the versions of Python, pytest and pytest-gpuperf."""
    import pytest

    from pytest_gpuperf._version import __version__

    commit = _git(rootdir, "rev-parse", "HEAD")
    status = _git(rootdir, "status", "--porcelain", "--untracked-files=no") if commit else None
    return {
        "commit": commit,
        "branch": _git(rootdir, "rev-parse", "--abbrev-ref", "HEAD") if commit else None,
        "dirty": bool(status) if status is not None else None,
        "python": platform.python_version(),
        "pytest": pytest.__version__,
        "pytest_gpuperf": __version__,
    }


def _git(rootdir: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(rootdir), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None
