"""What pytest collects from every family's perf and compile-time tests, shared by this folder's tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TESTS = ("test_perf.py", "test_static.py")


@pytest.fixture(scope="session")
def family_node_ids() -> set[str]:
    """The node ids of tests/<family>/test_perf.py and test_static.py, every family (collection
    needs no GPU; ``-o addopts=`` keeps the slow tier in)."""
    found = (ROOT / "tests" / f.parent.name / name for f in (ROOT / "kernels").glob("*/family.py") for name in TESTS)
    paths = sorted(p.relative_to(ROOT).as_posix() for p in found if p.is_file())
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *paths],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {line for line in proc.stdout.splitlines() if "::" in line}
