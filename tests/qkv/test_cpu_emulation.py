"""The qkv kernels' indexing, checked without a GPU.

cpu_emulation.cpp includes kernels/qkv/qkv.cu with the CUDA built-ins defined for the host
and runs every (block, thread) serially, under AddressSanitizer and UBSan: an out-of-bounds
access, a misaligned float4 or an unwritten or wrong output fails the run. This covers tails,
clamping, w2 padding, the scalar d_model path and odd grid and block sizes in CI.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.build

HERE = Path(__file__).parent
SOURCE = HERE / "cpu_emulation.cpp"
KERNEL_DIR = HERE.parent.parent / "kernels" / "qkv"
CASES = 100
SANITIZERS = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all")


def build(tmp_path: Path) -> Path:
    exe = tmp_path / "qkv_cpu_emulation"
    base = ["g++", "-std=c++17", "-O1", "-Wno-unknown-pragmas", f"-I{KERNEL_DIR}", str(SOURCE), "-o", str(exe)]
    result = subprocess.run(base[:1] + list(SANITIZERS) + base[1:], capture_output=True, text=True)
    if result.returncode != 0:
        if "sanitize" not in result.stderr and "asan" not in result.stderr:
            raise AssertionError(f"cpu_emulation.cpp failed to compile:\n{result.stderr[-4000:]}")
        pytest.skip(f"g++ cannot build with sanitizers here: {result.stderr.strip()[-300:]}")
    return exe


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to build the CPU emulation")
def test_kernels_in_cpu_emulation(tmp_path: Path) -> None:
    exe = build(tmp_path)
    result = subprocess.run([str(exe), str(CASES), "1"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    assert f"{CASES} cases, 0 failures" in result.stdout
