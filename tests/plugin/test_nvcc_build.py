"""The nvcc build cache, on CPU, with a stand-in compiler script (plus one real build if nvcc exists)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_gpuperf._compile import nvcc as nvcc_module
from pytest_gpuperf._compile.nvcc import (
    BuildResult,
    NvccBuildError,
    NvccNotFound,
    NvccTimeout,
    build_shared_library,
    find_nvcc,
    parse_perf_warnings,
)
from pytest_gpuperf.errors import GpuPerfUsageError, UnsafePathError
from tests.plugin.fake_tools import DEPENDENCY_PASS

REPO_ROOT = Path(__file__).resolve().parents[2]

# Written by a real nvcc 13.0 building a CUTLASS Ping-pong GEMM without -DNDEBUG (names shortened).
C7510_LOG = textwrap.dedent(
    """\
    ptxas info    : (C7510) Potential Performance Loss: wgmma.mma_async instructions are serialized due to wgmma pipeline crossing function boundary at a function call in the function '_ZN7cutlass13device_kernelIN...'
    ptxas info    : 4123 bytes gmem
    ptxas info    : Compiling entry function '_ZN7cutlass13device_kernelIN...' for 'sm_90a'
    ptxas info    : Function properties for _ZN7cutlass13device_kernelIN...
        8 bytes stack frame, 8 bytes spill stores, 16 bytes spill loads
    ptxas info    : Used 168 registers, used 2 barriers, 8 bytes cumulative stack size
    """
)
CLEAN_LOG = textwrap.dedent(
    """\
    ptxas info    : 11 bytes gmem
    ptxas info    : Compiling entry function '_ZN7cutlass13device_kernelIN...' for 'sm_90a'
    ptxas info    : Function properties for _ZN7cutlass13device_kernelIN...
        0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 168 registers, used 2 barriers
    """
)

FAKE_NVCC = """\
#!{python}
# Stands in for nvcc: answers --version, counts builds, can sleep (with a child that sleeps too),
# fail, edit a header mid-build, or print a chosen log.
import os, subprocess, sys, time
args = sys.argv[1:]
if "--version" in args:
    print(os.environ.get("FAKE_NVCC_VERSION", "fake nvcc, release 0.0"))
    sys.exit(0)
if "--dryrun" in args:  # names no host compiler
    sys.exit(0)
if "-M" in args:  # the dependency pass: follow #include "..." from the folder, then -I folders
{dependency_pass}count_file = os.environ.get("FAKE_NVCC_COUNT")
if count_file:
    with open(count_file, "a") as f:
        f.write("build\\n")
if os.environ.get("FAKE_NVCC_PIDS"):  # this process and a child of its own, like cicc under nvcc
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    with open(os.environ["FAKE_NVCC_PIDS"], "w") as f:
        f.write(f"{{os.getpid()}} {{child.pid}}\\n")
time.sleep(float(os.environ.get("FAKE_NVCC_SLEEP", "0")))
if os.environ.get("FAKE_NVCC_TOUCH"):  # a header edited while the build runs
    with open(os.environ["FAKE_NVCC_TOUCH"], "a") as f:
        f.write("// edited during the build\\n")
out = args[args.index("-o") + 1]
text = "".join(open(a).read() for a in args if a.endswith(".cu"))
if "PARTIAL" in text:
    open(out, "w").write("half a library")
    sys.exit(1)
if "#error" in text:
    print("source.cu(1): error: planted failure", file=sys.stderr)
    sys.exit(2)
open(out, "w").write("fake library for: " + " ".join(args))
sys.stderr.write(os.environ.get("FAKE_NVCC_LOG", "ptxas info    : Used 32 registers\\n"))
"""


@pytest.fixture
def fake_nvcc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    script = tmp_path / "bin" / "nvcc"
    script.parent.mkdir()
    script.write_text(FAKE_NVCC.format(python=sys.executable, dependency_pass=DEPENDENCY_PASS))
    script.chmod(0o755)
    monkeypatch.setenv("FAKE_NVCC_COUNT", str(tmp_path / "count.txt"))
    return script


@pytest.fixture
def project(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "include").mkdir(parents=True)
    (src / "kernel.cu").write_text('#include "dep.cuh"\n__global__ void k() {}\n')
    (src / "include" / "dep.cuh").write_text("#pragma once\nconstexpr int kDep = 1;\n")
    return src


def builds(tmp_path: Path) -> int:
    count = tmp_path / "count.txt"
    return len(count.read_text().splitlines()) if count.exists() else 0


def build(project: Path, fake_nvcc: Path, cache: Path, **kwargs: Any) -> BuildResult:
    return build_shared_library(
        [project / "kernel.cu"], include_dirs=[project / "include"], nvcc=fake_nvcc, cache_dir=cache, **kwargs
    )


def test_second_call_hits_the_cache(tmp_path: Path, project: Path, fake_nvcc: Path) -> None:
    first = build(project, fake_nvcc, tmp_path / "cache")
    second = build(project, fake_nvcc, tmp_path / "cache")
    assert (first.cached, second.cached) == (False, True)
    assert first.library == second.library and second.library.is_file()
    assert first.key == second.key
    assert second.log == first.log and (second.library.parent / "nvcc.log").is_file()
    assert builds(tmp_path) == 1


def test_command_uses_gencode_and_release_flags(tmp_path: Path, project: Path, fake_nvcc: Path) -> None:
    result = build(project, fake_nvcc, tmp_path / "cache", flags=("-DEXTRA=1",))
    assert "-gencode=arch=compute_90a,code=sm_90a" in result.command
    for flag in ("-O3", "-DNDEBUG", "-shared", "-Xptxas=-v", "-DEXTRA=1"):
        assert flag in result.command
    assert not any(arg.startswith("-arch") for arg in result.command)


@pytest.mark.parametrize("change", ["include_header", "shadowing_header", "source", "flags", "arch", "compiler_version"])
def test_key_changes_with_every_input(
    tmp_path: Path, project: Path, fake_nvcc: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    cache = tmp_path / "cache"
    first = build(project, fake_nvcc, cache)
    kwargs: dict[str, Any] = {}
    compiler = fake_nvcc
    if change == "include_header":
        (project / "include" / "dep.cuh").write_text("#pragma once\nconstexpr int kDep = 22;\n")
    elif change == "shadowing_header":  # found beside the source before the -I folder
        (project / "dep.cuh").write_text("#pragma once\nconstexpr int kDep = 3;\n")
    elif change == "source":
        (project / "kernel.cu").write_text('#include "dep.cuh"\n__global__ void k2() {}\n')
    elif change == "flags":
        kwargs["flags"] = ("-DTILE=2",)
    elif change == "arch":
        kwargs["arch"] = "sm_80"
    else:  # another compiler (a copy, so the per-process version memo sees a new executable)
        compiler = tmp_path / "bin" / "nvcc-other"
        compiler.write_text(fake_nvcc.read_text())
        compiler.chmod(0o755)
        monkeypatch.setenv("FAKE_NVCC_VERSION", "fake nvcc, release 0.1")
    second = build(project, compiler, cache, **kwargs)
    assert second.key != first.key
    assert not second.cached
    assert builds(tmp_path) == 2


def test_concurrent_processes_build_once(tmp_path: Path, project: Path, fake_nvcc: Path) -> None:
    script = textwrap.dedent(
        f"""
        from pytest_gpuperf._compile.nvcc import build_shared_library
        r = build_shared_library([{str(project / 'kernel.cu')!r}], include_dirs=[{str(project / 'include')!r}],
                                 nvcc={str(fake_nvcc)!r}, cache_dir={str(tmp_path / 'cache')!r})
        print("cached" if r.cached else "built", r.library)
        """
    )
    env = {**os.environ, "FAKE_NVCC_SLEEP": "1.5", "PYTHONPATH": str(REPO_ROOT)}
    procs = [
        subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outputs
    verdicts = sorted(out.split()[0] for out, _ in outputs)
    assert verdicts == ["built", "cached", "cached"]
    assert len({out.split()[1] for out, _ in outputs}) == 1
    assert builds(tmp_path) == 1


@pytest.mark.parametrize("planted", ["#error planted\n", "PARTIAL output then exit 1\n"])
def test_failed_build_leaves_no_entry(tmp_path: Path, project: Path, fake_nvcc: Path, planted: str) -> None:
    (project / "kernel.cu").write_text(planted)
    cache = tmp_path / "cache"
    with pytest.raises(NvccBuildError) as info:
        build(project, fake_nvcc, cache)
    assert "-o" in info.value.command
    leftovers = [p.name for sub in ("entries", "staging", "manifests") for p in (cache / "nvcc" / sub).iterdir()]
    assert leftovers == []
    (project / "kernel.cu").write_text("__global__ void k() {}\n")  # a fixed source then builds
    assert not build(project, fake_nvcc, cache).cached


def test_an_entry_without_its_manifest_is_rebuilt(tmp_path: Path, project: Path, fake_nvcc: Path) -> None:
    first = build(project, fake_nvcc, tmp_path / "cache")
    (first.library.parent / "build.json").unlink()
    second = build(project, fake_nvcc, tmp_path / "cache")
    assert not second.cached and second.library.is_file()
    assert build(project, fake_nvcc, tmp_path / "cache").cached


def test_perf_warnings_reach_the_result_and_the_cached_copy(
    tmp_path: Path, project: Path, fake_nvcc: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NVCC_LOG", C7510_LOG)
    first = build(project, fake_nvcc, tmp_path / "cache")
    second = build(project, fake_nvcc, tmp_path / "cache")
    assert len(first.perf_warnings) == 2
    assert second.perf_warnings == first.perf_warnings


def test_parse_perf_warnings() -> None:
    warnings = parse_perf_warnings(C7510_LOG)
    assert any("C7510" in w for w in warnings)
    assert any("8 bytes spill stores" in w for w in warnings)
    assert parse_perf_warnings(CLEAN_LOG) == ()
    c7508 = "ptxas warning : (C7508) Potential Performance Loss: setmaxnreg ignored; unable to determine register count at entry"
    assert parse_perf_warnings(c7508) == (c7508,)


def test_missing_nvcc_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, project: Path) -> None:
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no-cuda"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(nvcc_module, "_wheel_nvcc_candidates", lambda: [])
    with pytest.raises(NvccNotFound, match="CUDA_HOME") as info:
        find_nvcc()
    assert "pip install nvidia-cuda-nvcc" in str(info.value)
    with pytest.raises(NvccNotFound):
        build_shared_library([project / "kernel.cu"], cache_dir=tmp_path / "cache")


def test_find_nvcc_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_nvcc: Path) -> None:
    def make(path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(fake_nvcc.read_text())
        path.chmod(0o755)
        return path

    on_path = make(tmp_path / "path-bin" / "nvcc")
    wheel = make(tmp_path / "site" / "nvidia" / "cu13" / "bin" / "nvcc")
    home = make(tmp_path / "cuda" / "bin" / "nvcc")
    monkeypatch.setenv("PATH", str(on_path.parent))
    # Only this test's fake wheel: a real nvidia-cuda-nvcc wheel may be installed (the compile extra).
    monkeypatch.setattr(nvcc_module, "_wheel_nvcc_candidates", lambda: [wheel])
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    assert find_nvcc() == home
    monkeypatch.delenv("CUDA_HOME")
    assert find_nvcc() == on_path  # a wheel nvcc without cicc (nvidia-nvvm) cannot compile: skipped
    make(tmp_path / "site" / "nvidia" / "cu13" / "nvvm" / "bin" / "cicc")
    assert find_nvcc() == wheel
    wheel.unlink()
    assert find_nvcc() == on_path


def test_bad_arch_is_rejected(tmp_path: Path, project: Path, fake_nvcc: Path) -> None:
    with pytest.raises(ValueError, match="arch"):
        build(project, fake_nvcc, tmp_path / "cache", arch="sm90")


@pytest.mark.build
def test_real_nvcc_builds_clean_sm90a(tmp_path: Path) -> None:
    try:
        find_nvcc()
    except NvccNotFound as exc:
        pytest.skip(f"no nvcc: {exc}")
    source = tmp_path / "scale.cu"
    source.write_text(
        'extern "C" __global__ void scale(float* x, float s, int n) {\n'
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) x[i] *= s;\n"
        "}\n"
    )
    result = build_shared_library([source], cache_dir=tmp_path / "cache")
    assert result.library.is_file()
    assert "Used" in result.log and "registers" in result.log
    assert result.perf_warnings == ()
    assert build_shared_library([source], cache_dir=tmp_path / "cache").cached


# --------------------------------------------------------------------------------------------
# Damaged entries, killed builds, timeouts, shell metacharacters


def test_a_truncated_build_json_is_rebuilt_and_later_builds_work(tmp_path: Path, project: Path, fake_nvcc: Path) -> None:
    first = build(project, fake_nvcc, tmp_path / "cache")
    meta = first.library.parent / "build.json"
    meta.write_text(meta.read_text()[:40])
    second = build(project, fake_nvcc, tmp_path / "cache")
    assert not second.cached and second.library.read_bytes().startswith(b"fake library for: ")
    assert build(project, fake_nvcc, tmp_path / "cache").cached
    assert builds(tmp_path) == 2


@pytest.mark.parametrize("damage", ["truncated", "replaced"])
def test_a_damaged_library_is_never_served(tmp_path: Path, project: Path, fake_nvcc: Path, damage: str) -> None:
    first = build(project, fake_nvcc, tmp_path / "cache")
    good = first.library.read_bytes()
    # "replaced": same size, other bytes (a planted library), so only the sha256 can tell.
    damaged = good[: len(good) // 2] if damage == "truncated" else bytes(len(good))
    first.library.write_bytes(damaged)
    second = build(project, fake_nvcc, tmp_path / "cache")
    assert not second.cached
    assert second.library.read_bytes() != damaged and second.library.read_bytes().startswith(b"fake library for: ")
    assert builds(tmp_path) == 2


def test_a_damaged_manifest_costs_a_rebuild_only(tmp_path: Path, project: Path, fake_nvcc: Path) -> None:
    build(project, fake_nvcc, tmp_path / "cache")
    (manifest,) = (tmp_path / "cache" / "nvcc" / "manifests").iterdir()
    manifest.write_text('{"format": 1, "candidates": [')
    assert not build(project, fake_nvcc, tmp_path / "cache").cached
    assert build(project, fake_nvcc, tmp_path / "cache").cached


def test_a_header_edited_during_the_build_is_not_trusted(
    tmp_path: Path, project: Path, fake_nvcc: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NVCC_TOUCH", str(project / "include" / "dep.cuh"))
    assert not build(project, fake_nvcc, tmp_path / "cache").cached
    monkeypatch.delenv("FAKE_NVCC_TOUCH")
    # The binary may hold the header as it was before the edit: built again, then trusted.
    assert not build(project, fake_nvcc, tmp_path / "cache").cached
    assert build(project, fake_nvcc, tmp_path / "cache").cached


def test_a_killed_build_leaves_no_lasting_staging_folder(tmp_path: Path, project: Path, fake_nvcc: Path) -> None:
    script = textwrap.dedent(
        f"""
        from pytest_gpuperf._compile.nvcc import build_shared_library
        build_shared_library([{str(project / 'kernel.cu')!r}], include_dirs=[{str(project / 'include')!r}],
                             nvcc={str(fake_nvcc)!r}, cache_dir={str(tmp_path / 'cache')!r})
        """
    )
    pids = tmp_path / "pids.txt"
    env = {**os.environ, "FAKE_NVCC_SLEEP": "60", "FAKE_NVCC_PIDS": str(pids), "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", script], env=env)
    deadline = time.monotonic() + 20
    while not pids.exists() or not pids.read_text().endswith("\n"):
        assert time.monotonic() < deadline and proc.poll() is None, "the build did not start"
        time.sleep(0.05)
    proc.kill()  # SIGKILL: no clean-up runs
    proc.wait()
    for pid in pids.read_text().split():  # the orphaned compiler, which would otherwise sleep on
        os.kill(int(pid), signal.SIGKILL)
    staging = tmp_path / "cache" / "nvcc" / "staging"
    assert len(list(staging.iterdir())) == 1
    assert not build(project, fake_nvcc, tmp_path / "cache").cached  # the dead build's lock is free
    assert list(staging.iterdir()) == []


def test_staging_folders_of_live_builds_are_kept(tmp_path: Path) -> None:
    from pytest_gpuperf._compile import cache as cache_module

    cache = cache_module.BuildCache(tmp_path / "c")
    staging = cache.folder / "staging"
    here = cache_module._HOST_TAG
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(done.stdout)
    folders = {
        "dead here": staging / f"{dead_pid}-{here}-a",
        "alive here, old": staging / f"{os.getpid()}-{here}-b",
        "other host, old": staging / "123-ffffffff-c",
        "other host, fresh": staging / "123-ffffffff-d",
    }
    for folder in folders.values():
        folder.mkdir()
    two_hours_ago = time.time() - 7200
    for name in ("alive here, old", "other host, old"):
        os.utime(folders[name], (two_hours_ago, two_hours_ago))
    removed = set(cache.clean_staging())
    assert removed == {folders["dead here"], folders["other host, old"]}
    assert folders["alive here, old"].is_dir() and folders["other host, fresh"].is_dir()


def test_nvcc_past_its_timeout_is_stopped_with_its_children(
    tmp_path: Path, project: Path, fake_nvcc: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pids = tmp_path / "pids.txt"
    monkeypatch.setenv("FAKE_NVCC_SLEEP", "60")
    monkeypatch.setenv("FAKE_NVCC_PIDS", str(pids))
    start = time.monotonic()
    with pytest.raises(NvccTimeout) as info:
        build(project, fake_nvcc, tmp_path / "cache", timeout_s=1.0)
    assert time.monotonic() - start < 10
    assert str(info.value).startswith("nvcc timed out after 1 s building kernel.cu and was stopped")
    assert "GPU_PERF_NVCC_TIMEOUT" in str(info.value)
    for pid in map(int, pids.read_text().split()):
        assert gone(pid), f"process {pid} outlived the timeout"
    assert list((tmp_path / "cache" / "nvcc" / "entries").iterdir()) == []


def gone(pid: int) -> bool:
    """The process has exited (a zombie nobody reaped counts: it runs no more)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def test_the_timeout_comes_from_the_environment(
    tmp_path: Path, project: Path, fake_nvcc: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_NVCC_SLEEP", "60")
    monkeypatch.setenv("GPU_PERF_NVCC_TIMEOUT", "0.5")
    with pytest.raises(NvccTimeout, match="after 0.5 s"):
        build(project, fake_nvcc, tmp_path / "cache")
    monkeypatch.setenv("GPU_PERF_NVCC_TIMEOUT", "soon")
    with pytest.raises(GpuPerfUsageError, match="GPU_PERF_NVCC_TIMEOUT: expected a positive number of seconds, got 'soon'"):
        build(project, fake_nvcc, tmp_path / "cache")


@pytest.mark.parametrize(
    ("where", "value"),
    [
        ("source", "k$(touch EXECUTED).cu"),
        ("source", "k`touch EXECUTED`.cu"),
        ("source", 'k";touch EXECUTED;".cu'),
        ("include", "inc`touch EXECUTED`"),
        ("flag", "-DX=$(touch EXECUTED)"),
        ("cache", "cache'x"),
        ("env", "-DX=`touch EXECUTED`"),
    ],
)
def test_shell_metacharacters_are_refused_before_nvcc_runs(
    tmp_path: Path, project: Path, fake_nvcc: Path, monkeypatch: pytest.MonkeyPatch, where: str, value: str
) -> None:
    sources, includes, flags, cache = [project / "kernel.cu"], [project / "include"], (), tmp_path / "cache"
    if where == "source":
        sources = [project / value]
        sources[0].write_text("__global__ void k() {}\n")
    elif where == "include":
        includes = [project / value]
        includes[0].mkdir()
    elif where == "flag":
        flags = (value,)
    elif where == "cache":
        cache = tmp_path / value
    else:
        monkeypatch.setenv("NVCC_APPEND_FLAGS", value)
    with pytest.raises(UnsafePathError) as info:
        build_shared_library(sources, include_dirs=includes, flags=flags, nvcc=fake_nvcc, cache_dir=cache)
    message = str(info.value)
    assert "through /bin/sh" in message and "\n" not in message
    assert ("$NVCC_APPEND_FLAGS" if where == "env" else repr(value)[1:-1]) in message
    assert builds(tmp_path) == 0 and not list(tmp_path.rglob("EXECUTED")) and not Path("EXECUTED").exists()


def test_a_relative_include_flag_is_keyed_on_the_working_folder(
    tmp_path: Path, fake_nvcc: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "k.cu"
    source.write_text('#include "v.h"\n__global__ void k() {}\n')
    for folder, value in (("a", 1), ("b", 2)):
        (tmp_path / folder / "inc").mkdir(parents=True)
        (tmp_path / folder / "inc" / "v.h").write_text(f"#define VALUE {value}\n")
    results = []
    for folder in ("a", "b", "a"):
        monkeypatch.chdir(tmp_path / folder)
        results.append(build_shared_library([source], flags=("-Iinc",), nvcc=fake_nvcc, cache_dir=tmp_path / "cache"))
    assert [r.cached for r in results] == [False, False, True]
    assert results[0].key != results[1].key
