"""Git repositories for the plugin's tests: a git command in a folder, and a commit of its tree."""
from __future__ import annotations

import subprocess
from pathlib import Path

AUTHOR = ("-c", "user.email=t@example.com", "-c", "user.name=t")  # git commit's identity in a bare environment


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def commit(root: Path, message: str) -> None:
    """Everything under ``root`` (new files included), committed as ``message``."""
    git(root, "add", ".")
    git(root, *AUTHOR, "commit", "-q", "-m", message)
