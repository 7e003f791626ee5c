"""Installing the plugin changes nothing in a suite that does not use it (CPU only)."""
from __future__ import annotations

import json
import subprocess
import sys
from typing import Callable

import pytest

FOREIGN_PROJECT = """
import pytest
from hypothesis import given, settings, strategies as st

settings.register_profile("mine", deadline=50)
settings.load_profile("mine")

@pytest.fixture
def gpu():
    return "the project's own gpu fixture"

@pytest.mark.gpu
def test_own_marker():
    pass

def test_own_fixture(gpu):
    assert gpu == "the project's own gpu fixture"

def test_profile_kept():
    assert settings.default.deadline is not None and settings.default.deadline.total_seconds() == 0.05
"""


def test_a_foreign_projects_gpu_marker_fixture_and_profile_keep_working(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nmarkers =\n    gpu: the project's own marker\n")
    pytester.makepyfile(FOREIGN_PROJECT)
    result = pytester.runpytest("-p", "no:cacheprovider")  # no GPU, no CuPy needed
    result.assert_outcomes(passed=3)


def test_the_plugins_device_fixture_still_skips_without_a_gpu(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(cc="none")
    pytester.makepyfile("def test_a(gpuperf_device):\n    pass\n\n\ndef test_b(gpu):\n    pass\n")
    result = pytester.runpytest("-rs")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*no GPU: fake: this machine has no GPU*"])


def test_the_gpu_perf_hypothesis_profile_is_loaded_only_when_asked(pytester: pytest.Pytester) -> None:
    # data_too_large is suppressed by the gpu-perf profile only: hypothesis's own "ci" profile, which it
    # loads when $CI is set, also turns the deadline off, so the deadline cannot tell the two apart.
    pytester.makepyfile(
        "from hypothesis import HealthCheck, settings\n\n\n"
        "def test_profile():\n"
        "    assert HealthCheck.data_too_large in settings.default.suppress_health_check, settings.default\n"
    )
    # Subprocesses: a profile loaded by one in-process run would stay loaded for the next.
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(failed=1)
    pytester.runpytest_subprocess("--hypothesis-profile=gpu-perf", "-p", "no:cacheprovider").assert_outcomes(passed=1)


BENCH_TEST = """
from pytest_gpuperf import Variant

def test_claim(gpu_perf):
    gpu_perf.measure(Variant("k", lambda: None))
"""


def test_pytest_benchmark_stays_quiet_unless_asked(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(times={"k": 10e-6})
    pytester.makepyfile(BENCH_TEST)
    result = pytester.runpytest("--gpu-perf")
    result.assert_outcomes(passed=1)
    assert "benchmark 'gpu: test_claim'" not in result.stdout.str()
    result = pytester.runpytest("--gpu-perf", "--benchmark-json=bench.json")
    result.assert_outcomes(passed=1)
    data = json.loads((pytester.path / "bench.json").read_text())
    assert data["machine_info"]["gpu"]["key"] == "fake-gpu-sm90-132sm-80gib"
    assert [b["name"] for b in data["benchmarks"]] == ["test_claim::k"]


def test_the_plugin_runs_without_pytest_benchmark(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(times={"k": 10e-6})
    pytester.makepyfile(BENCH_TEST)
    pytester.runpytest("--gpu-perf", "-p", "no:benchmark").assert_outcomes(passed=1)


# CPU time of this process, not wall time: other processes on a busy runner do not add to it.
IMPORT_COST = """
import time
t = time.process_time(); import pytest; t_pytest = time.process_time() - t
t = time.process_time(); import pytest_gpuperf.plugin; t_plugin = time.process_time() - t
import sys
heavy = sorted(m for m in ("numpy", "scipy", "cupy", "torch", "hypothesis", "filelock") if m in sys.modules)
print(t_pytest, t_plugin, ",".join(heavy))
"""


def test_loading_the_plugin_is_cheap_and_imports_nothing_heavy() -> None:
    """About 26 ms of CPU on a 2-core x86 machine; the bound is generous for slow runners."""
    # the least of three fresh interpreters: a busy runner's cache misses slow one start, not what the plugin costs
    runs = [
        subprocess.run([sys.executable, "-c", IMPORT_COST], capture_output=True, text=True, check=True).stdout.split()
        for _ in range(3)
    ]
    for out in runs:
        heavy = out[2] if len(out) > 2 else ""
        assert heavy == "", f"loading the plugin imported {heavy}"
    plugin_s = min(float(out[1]) for out in runs)
    assert plugin_s < 0.15, f"importing the plugin took {1e3 * plugin_s:.0f} ms"


# Written at the very end of the run, after the plugin's terminal summary and session finish.
HEAVY_AT_EXIT = """
import sys

def pytest_unconfigure(config):
    heavy = sorted(m for m in ("numpy", "scipy") if m in sys.modules)
    (config.rootpath / "heavy.txt").write_text(",".join(heavy))
"""


def test_a_plain_run_imports_no_numpy_or_scipy(pytester: pytest.Pytester) -> None:
    """pytest start-up, collection, a non-perf test and the end of the run, --gpu-perf off: what
    the plugin loads stays light (a fresh interpreter, so nothing an earlier test imported counts)."""
    pytester.makeconftest(HEAVY_AT_EXIT)
    pytester.makepyfile("def test_plain():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["gpu-perf: off*"])  # the plugin was loaded
    assert (pytester.path / "heavy.txt").read_text() == "", "a run without --gpu-perf imported these"


TWO_TESTS = """
from pytest_gpuperf import Variant

def test_claim(gpu_perf):
    gpu_perf.assert_speedup(Variant("fast", lambda: None), Variant("slow", lambda: None), at_least=1.1)

def test_one(gpu_perf):
    gpu_perf.measure(Variant("k", lambda: None))
"""


def test_progress_under_verbose_and_the_time_report(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(times={"fast": 10e-6, "slow": 12e-6, "k": 5e-6})
    pytester.makepyfile(test_two=TWO_TESTS)
    result = pytester.runpytest("--gpu-perf", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([
        "gpu-perf  test_claim: fast vs slow  1.*x ?1.*, 1.*? (>= 1.100)  pass",
        "gpu-perf  test_one::k  5.* us ?*?  measured",
        "gpu-perf time: * s measuring (warm-up and capture included), by module:",
        "  * s  test_two.py",
        "slowest 2 measurement(s):",
    ])
    quiet = pytester.runpytest("--gpu-perf", "-q")
    assert "gpu-perf  test_one::k" not in quiet.stdout.str()


MIXED = """
from pytest_gpuperf import Variant

def test_fast_path(gpu_perf):
    gpu_perf.measure(Variant("k", lambda: None))

def test_plain():
    pass
"""


def test_fixture_users_are_marked_and_only_selects_them(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(times={"k": 5e-6})
    pytester.makepyfile(MIXED)
    result = pytester.runpytest("--gpu-perf", "-m", "gpu_perf")
    result.assert_outcomes(passed=1, deselected=1)
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-only")
    result.assert_outcomes(passed=1, deselected=1)


GPU_AND_CPU = """
import pytest
from pytest_gpuperf import Variant

def test_timed(gpu_perf):
    gpu_perf.measure(Variant("k", lambda: None))

def test_on_the_device(gpuperf_device):
    pass

def test_counted(gpu_counters):
    pass

@pytest.mark.sm90
def test_hopper_only():
    pass

def test_plain():
    pass

@pytest.fixture
def gpu():  # a project's own fixture of the plugin's old name: not the GPU
    return "mine"

def test_own_gpu_fixture(gpu):
    assert gpu == "mine"
"""


def test_gpu_only_keeps_the_tests_that_use_the_gpu(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(cc="9.0", times={"k": 5e-6})
    pytester.makepyfile(GPU_AND_CPU)
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-gpu-only", "-v")
    result.assert_outcomes(passed=3, skipped=1, deselected=2)  # test_counted: no --gpu-perf-counters
    result.stdout.fnmatch_lines(["*test_timed PASSED*", "*test_on_the_device PASSED*", "*test_hopper_only PASSED*"])
    assert "test_plain" not in result.stdout.str() and "test_own_gpu_fixture" not in result.stdout.str()
    everything = pytester.runpytest("--gpu-perf")
    everything.assert_outcomes(passed=5, skipped=1)


def test_an_override_that_wraps_the_device_fixture_still_uses_the_gpu(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None]
) -> None:
    """A project fixture named like the plugin's that requests the one it overrides reaches the GPU;
    one that does not request it hides it."""
    fake_gpu(cc="9.0")
    pytester.makepyfile(
        test_wraps="import pytest\n\n@pytest.fixture\ndef gpuperf_device(gpuperf_device):\n    return gpuperf_device\n\n"
        "def test_wrapped(gpuperf_device):\n    assert gpuperf_device.sm_count\n",
        test_hides="import pytest\n\n@pytest.fixture\ndef gpuperf_device():\n    return 'mine'\n\n"
        "def test_hidden(gpuperf_device):\n    assert gpuperf_device == 'mine'\n",
    )
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-gpu-only", "-v")
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(["*test_wrapped PASSED*"])


def test_help_shows_every_default_and_what_each_option_takes(pytester: pytest.Pytester) -> None:
    out = pytester.runpytest("--help").stdout.str()
    text = " ".join(out.split())
    for fragment in (
        "[LEVEL, default 0.99;",  # confidence
        "[number, default 1; env GPU_PERF_BUDGET",
        "[{warn,fail}, default warn;",
        "[{pass,skip,fail}, default pass;",
        "[{cold,hot}, default cold;",
        "[ordinal or auto, default auto;",
        "[architectures, default sm_80,sm_90;",
    ):
        assert fragment in text, fragment


@pytest.mark.parametrize("spelling", ["sm80,sm90", "sm_80,sm_90", "8.0,9.0"])
def test_static_archs_accept_the_markers_spellings(pytester: pytest.Pytester, spelling: str) -> None:
    pytester.makepyfile("def test_a():\n    pass\n")
    pytester.runpytest(f"--gpu-perf-static-archs={spelling}").assert_outcomes(passed=1)


def test_the_no_gpu_line_counts_perf_tests_skipped_because_timing_is_off(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None]
) -> None:
    fake_gpu(cc="none")
    pytester.makepyfile(MIXED + "\n\ndef test_gpu(gpuperf_device):\n    pass\n")
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines([
        "no GPU (fake: this machine has no GPU): 1 GPU correctness tests and 0 perf tests skipped "
        "(and 1 perf tests skipped because timing is off)*"
    ])


def test_report_settings_keep_their_types(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(times={"k": 5e-6})
    pytester.makepyfile(BENCH_TEST)
    pytester.runpytest("--gpu-perf", "--gpu-perf-json=r.json").assert_outcomes(passed=1)
    report = json.loads((pytester.path / "r.json").read_text())
    settings = report["settings"]
    assert settings["enabled"] is True and settings["tolerance"] == 0.05
    assert settings["static_archs"] == ["sm_80", "sm_90"] and settings["json_path"].endswith("r.json")
    assert settings["sources"]["json"] == "the command line (--gpu-perf-json)"
    assert set(report["provenance"]) >= {"commit", "branch", "dirty", "python", "pytest", "pytest_gpuperf"}
