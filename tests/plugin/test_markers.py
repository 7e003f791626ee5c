"""Arch markers, GPU skips and the --gpu-perf switch, on fake devices."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from pytest_gpuperf._plugin.arch import parse_arch

MARKED_TESTS = """
import pytest

@pytest.mark.sm80
def test_needs_80(gpu):
    pass

@pytest.mark.sm90
def test_needs_90():
    pass

@pytest.mark.sm90(exact=True)
def test_needs_9x():
    pass

@pytest.mark.gpu_arch("sm_89")
def test_needs_89():
    pass

def test_plain_cpu():
    pass
"""


@pytest.mark.parametrize(
    ("cc", "passed", "skipped"),
    [
        ("7.5", ["test_plain_cpu"], ["test_needs_80", "test_needs_90", "test_needs_9x", "test_needs_89"]),
        ("8.0", ["test_plain_cpu", "test_needs_80"], ["test_needs_90", "test_needs_9x", "test_needs_89"]),
        ("9.0", ["test_plain_cpu", "test_needs_80", "test_needs_90", "test_needs_9x", "test_needs_89"], []),
        ("10.0", ["test_plain_cpu", "test_needs_80", "test_needs_90", "test_needs_89"], ["test_needs_9x"]),
    ],
)
def test_arch_markers_skip_by_capability(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], cc: str, passed: list[str], skipped: list[str]
) -> None:
    fake_gpu(cc=cc)
    pytester.makepyfile(MARKED_TESTS)
    result = pytester.runpytest("-rs", "--strict-markers")
    result.assert_outcomes(passed=len(passed), skipped=len(skipped))
    for name in skipped:
        assert any(name in line or "needs compute capability" in line for line in result.outlines)
    if skipped:
        result.stdout.fnmatch_lines([f"*gpu-perf: needs compute capability*Fake GPU with compute capability {cc}*"])


def test_exact_marker_reason_says_exactly(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(cc="10.0")
    pytester.makepyfile("import pytest\n@pytest.mark.sm90(exact=True)\ndef test_wgmma():\n    pass\n")
    result = pytester.runpytest("-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*needs compute capability 9.x*exactly*@pytest.mark.sm90(exact=True)*Fake GPU*10.0*"])


def test_no_gpu_skips_gpu_tests_and_runs_the_rest(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(cc="none")
    pytester.makepyfile(MARKED_TESTS)
    result = pytester.runpytest("-rs")
    result.assert_outcomes(passed=1, skipped=4)
    result.stdout.fnmatch_lines(["*gpu-perf: no GPU: fake: this machine has no GPU*"])


def test_plugin_loads_and_skips_without_cupy(pytester: pytest.Pytester) -> None:
    """No conftest hooks: the real probe runs. On a CUDA-less machine it must skip, not error."""
    pytester.makepyfile("def test_on_gpu(gpu):\n    pass\n\ndef test_cpu():\n    pass\n")
    result = pytester.runpytest_subprocess("-rs", "-p", "no:cacheprovider")
    outcomes = result.parseoutcomes()
    assert result.ret == pytest.ExitCode.OK
    assert outcomes.get("passed", 0) + outcomes.get("skipped", 0) == 2
    if outcomes.get("skipped"):  # the usual case in CI: the reason says why there is no GPU
        result.stdout.fnmatch_lines(["*SKIPPED*gpu-perf: no GPU: *"])


def test_perf_tests_skip_without_flag_naming_it(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    pytester.makepyfile(
        """
        from pytest_gpuperf import Variant

        def test_timed(gpu_perf):
            gpu_perf.measure(Variant("k", lambda: None))

        def test_correct(gpu):
            assert gpu.arch == "sm_90"
        """
    )
    result = pytester.runpytest("-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*perf test, timing is off: run pytest with --gpu-perf*"])
    result = pytester.runpytest("--gpu-perf")
    result.assert_outcomes(passed=2)


def test_markers_are_registered(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    for line in ("@pytest.mark.sm80*at least 8.0*", "@pytest.mark.sm90*exact=True: 9.x only*", "@pytest.mark.gpu_perf(*",
                 "@pytest.mark.gpu_perf_for(pattern, **settings): settings for the GPUs whose baseline folder name*"):
        result.stdout.fnmatch_lines([line])
    assert "@pytest.mark.gpu:" not in result.stdout.str()  # a generic name is left to the project


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ('@pytest.mark.gpu_arch("sm_7x")', "*gpu_arch: unknown GPU architecture 'sm_7x'*"),
        ('@pytest.mark.gpu_arch("sm_99")', "*compute capability 9.9 does not exist*"),
        ("@pytest.mark.sm90(exactly=True)", "*sm90 got unknown keyword(s)*exactly*only exact= is accepted*"),
        ("@pytest.mark.sm90(exact='yes')", "*exact=...) must be True or False*"),
        ("@pytest.mark.sm95", "*@pytest.mark.sm95 is not an architecture marker: the known ones are @pytest.mark.sm80 "
                              "and @pytest.mark.sm90*compute capability 9.5 does not exist*gpu_arch('sm_89')*"),
        ("@pytest.mark.sm_95", "*@pytest.mark.sm_95 is not an architecture marker*@pytest.mark.sm80 and "
                               "@pytest.mark.sm90*"),
        ("@pytest.mark.sm_90", "*@pytest.mark.sm_90 is not an architecture marker*for sm_90 write @pytest.mark.sm90 "
                               "or @pytest.mark.gpu_arch('sm_90')*"),
        ("@pytest.mark.sm89", "*not an architecture marker*for sm_89 write @pytest.mark.gpu_arch('sm_89')*"),
        ("@pytest.mark.gpu_perf(tolerence=0.1)", "*unknown keyword 'tolerence'*expected one of*tolerance*"),
        ("@pytest.mark.gpu_perf(tolerance=2)", "*invalid value 2 for gpu_perf_tolerance from @pytest.mark.gpu_perf on*"),
        ("@pytest.mark.gpu_perf_for(tolerance=0.1)", "*gpu_perf_for takes one pattern of baseline folder names*"),
        ('@pytest.mark.gpu_perf_for("a-*", "b-*")', "*gpu_perf_for takes one pattern*"),
        ('@pytest.mark.gpu_perf_for("nvidia-h200-*", band=0.1)', "*unknown keyword 'band' in @pytest.mark.gpu_perf_for*"),
        ('@pytest.mark.gpu_perf_for("nvidia-h200-*", machine_noise=-1)',
         "*invalid value -1 for gpu_perf_machine_noise from @pytest.mark.gpu_perf_for on*"),
    ],
)
def test_bad_markers_are_usage_errors_naming_the_test(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], source: str, message: str
) -> None:
    pytester.makepyfile(f"import pytest\n{source}\ndef test_marked():\n    pass\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    result.stderr.fnmatch_lines(["*test_marked*"])


def test_the_device_spells_its_architecture_as_nvcc_and_keeps_its_baseline_key() -> None:
    """``arch`` is nvcc's ``sm_90``; the key, which names the folders of stored baselines and
    evidence, keeps the compact ``sm90`` it always had."""
    from pytest_gpuperf.testing import fake_device

    h100 = fake_device((9, 0), name="NVIDIA H100 80GB HBM3", memory_gib=79)
    assert h100.arch == "sm_90"
    assert h100.key == "nvidia-h100-80gb-hbm3-sm90-132sm-79gib"
    h200 = fake_device((9, 0), name="NVIDIA H200", memory_gib=140)
    assert (h200.arch, h200.key) == ("sm_90", "nvidia-h200-sm90-132sm-140gib")
    for gpu in (h100, h200):
        assert (Path(__file__).parents[2] / "baselines" / gpu.key).is_dir()
    assert fake_device((10, 0), name="NVIDIA B200").arch == "sm_100"
    assert fake_device((10, 0), name="NVIDIA B200").key.startswith("nvidia-b200-sm100-")
    assert parse_arch(h100.arch) == ((9, 0), False)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("sm_80", ((8, 0), False)),
        ("sm90", ((9, 0), False)),
        ("8.9", ((8, 9), False)),
        ("sm_90a", ((9, 0), True)),
        ("sm_100a", ((10, 0), True)),
        ("compute_86", ((8, 6), False)),
    ],
)
def test_parse_arch(text: str, expected: tuple[tuple[int, int], bool]) -> None:
    assert parse_arch(text) == expected


@pytest.mark.parametrize("text", ["", "sm", "sm_8", "ampere", "sm_9.0.1", "sm_1"])
def test_parse_arch_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="unknown GPU architecture"):
        parse_arch(text)


BANDED = """
import pytest
from pytest_gpuperf import Variant

@pytest.mark.gpu_perf(machine_noise=0.16, calibrated_noise=0.16)
@pytest.mark.gpu_perf_for("Fake-GPU-sm90-*", calibrated_noise=0.03)  # matched lowercased
@pytest.mark.gpu_perf_for("nvidia-h100-*", calibrated_noise=0.5)
def test_band(gpu_perf):
    gpu_perf.measure(Variant("k", lambda: None))
"""


def test_gpu_perf_for_sets_a_band_on_the_gpus_it_names(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    """A baseline recorded at 10 us, then a 10% slower kernel: inside the test's 16% band on every
    GPU, outside the 3% band that gpu_perf_for gives the fake GPU's folder."""
    pytester.makepyfile(BANDED)
    fake_gpu(times={"k": 10e-6}, spread=0.002)
    pytester.runpytest("--gpu-perf", "--gpu-perf-update-baselines").assert_outcomes(passed=1)
    (folder,) = (pytester.path / "baselines").iterdir()
    assert folder.name.startswith("fake-gpu-sm90-")
    fake_gpu(times={"k": 11e-6}, spread=0.002)
    result = pytester.runpytest("--gpu-perf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*performance REGRESSION: 'k' is 1?.?% slower*", "*threshold 1.0300x*band 3%*"])
    fake_gpu(times={"k": 11e-6}, spread=0.002, FAKE_NAME="Other GPU")  # another folder: no baseline, no band change
    folder.rename(folder.with_name(folder.name.replace("fake-gpu", "other-gpu")))
    pytester.runpytest("--gpu-perf").assert_outcomes(passed=1)


FAKE_CUPY = """
__version__ = "13.3.0"


class CUDARuntimeError(RuntimeError):
    def __init__(self, status):
        self.status = status
        names = {35: "cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA runtime version",
                 100: "cudaErrorNoDevice: no CUDA-capable device is detected"}
        super().__init__(names[status])


class _Runtime:
    @staticmethod
    def getDeviceCount():
        raise CUDARuntimeError(int(__import__("os").environ["FAKE_CUDA_STATUS"]))


class cuda:
    runtime = _Runtime
"""


@pytest.mark.parametrize(
    ("driver", "status", "reason"),
    [
        (False, 35, "no NVIDIA driver or GPU on this machine (libcuda.so.1 is not installed, which CuPy reports as "
                    "cudaErrorInsufficientDriver)"),
        (True, 35, "the NVIDIA driver is older than the CUDA runtime CuPy 13.3.0 needs (cudaErrorInsufficientDriver: "
                   "CUDA driver version is insufficient for CUDA runtime version); upgrade the driver, or install "
                   "the CuPy package built for the driver's CUDA version"),
        (True, 100, "no CUDA GPU is visible (cudaErrorNoDevice: no CUDA-capable device is detected); check "
                    "CUDA_VISIBLE_DEVICES and that the GPU is attached"),
    ],
    ids=["no-driver", "old-driver", "no-device"],
)
def test_cupy_without_a_usable_gpu_says_what_this_machine_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, driver: bool, status: int, reason: str
) -> None:
    """The [gpu] extra on a machine without a driver: CUDA's own text asks for a driver upgrade."""
    import ctypes

    from pytest_gpuperf._timing import device

    (tmp_path / "cupy.py").write_text(FAKE_CUPY)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    monkeypatch.setenv("FAKE_CUDA_STATUS", str(status))
    real_cdll = ctypes.CDLL

    def cdll(name: str, *args: Any, **kwargs: Any) -> Any:
        if name != "libcuda.so.1":
            return real_cdll(name, *args, **kwargs)
        if not driver:
            raise OSError("libcuda.so.1: cannot open shared object file: No such file or directory")
        return object()

    monkeypatch.setattr(ctypes, "CDLL", cdll)
    found = device.probe(0)
    assert isinstance(found, device.NoDevice) and found.reason == reason


def test_the_header_and_skips_of_a_machine_without_a_driver(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    if Path("/proc/driver/nvidia/version").exists():
        pytest.skip("this machine has an NVIDIA driver")
    pytester.makepyfile(cupy=FAKE_CUPY, test_gpu="def test_on_gpu(gpu):\n    pass\n\ndef test_cpu():\n    pass\n")
    monkeypatch.setenv("FAKE_CUDA_STATUS", "35")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(pytester.path), os.environ.get("PYTHONPATH")])))
    result = pytester.runpytest_subprocess("-rs", "-p", "no:cacheprovider", "--gpu-perf", "test_gpu.py")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines([
        "gpu-perf: on, but no GPU: no NVIDIA driver or GPU on this machine (libcuda.so.1 is not installed, *); "
        "GPU and perf tests will be skipped",
        "SKIPPED * gpu-perf: no GPU: no NVIDIA driver or GPU on this machine *",
    ])
    assert "upgrade" not in result.stdout.str() and "driver version is insufficient" not in result.stdout.str()
