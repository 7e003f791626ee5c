"""Options, ini twins, environment variables and their one precedence."""
from __future__ import annotations

from typing import Callable

import pytest

from pytest_gpuperf._plugin.options import SETTINGS

SHOW_TOLERANCE = """
import pytest

def test_show(gpu_perf):
    print("TOLERANCE=%s" % gpu_perf.settings.tolerance)

@pytest.mark.gpu_perf(tolerance=0.3)
def test_marked(gpu_perf):
    print("TOLERANCE=%s" % gpu_perf.settings.tolerance)
"""


def test_every_option_has_help_and_an_ini_twin(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    for s in SETTINGS:
        result.stdout.fnmatch_lines([f"*{s.flag}*"])
        result.stdout.fnmatch_lines([f"*{s.ini} (*"])
        assert s.help


@pytest.mark.parametrize(
    ("ini", "env", "cli", "plain", "marked"),
    [
        (None, None, None, 0.05, 0.3),
        ("0.2", None, None, 0.2, 0.3),
        ("0.2", "0.15", None, 0.15, 0.3),
        ("0.2", "0.15", "0.1", 0.1, 0.3),
        (None, None, "0.1", 0.1, 0.3),
    ],
)
def test_precedence_marker_cli_env_ini(
    pytester: pytest.Pytester,
    fake_gpu: Callable[..., None],
    monkeypatch: pytest.MonkeyPatch,
    ini: str | None,
    env: str | None,
    cli: str | None,
    plain: float,
    marked: float,
) -> None:
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n" + (f"gpu_perf_tolerance = {ini}\n" if ini else ""))
    if env:
        monkeypatch.setenv("GPU_PERF_TOLERANCE", env)
    pytester.makepyfile(SHOW_TOLERANCE)
    args = ["--gpu-perf", "-s"] + ([f"--gpu-perf-tolerance={cli}"] if cli else [])
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines([f"*TOLERANCE={plain}*", f"*TOLERANCE={marked}*"])


def test_enable_from_ini_and_env(pytester: pytest.Pytester, fake_gpu: Callable[..., None], monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile("def test_t(gpu_perf):\n    pass\n")
    pytester.makeini("[pytest]\ngpu_perf = true\n")
    pytester.runpytest().assert_outcomes(passed=1)
    monkeypatch.setenv("GPU_PERF", "0")  # env beats ini
    pytester.runpytest().assert_outcomes(skipped=1)
    pytester.runpytest("--gpu-perf").assert_outcomes(passed=1)  # command line beats env


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("cli", "*invalid value 'abc' for gpu_perf_tolerance from the command line (--gpu-perf-tolerance)*between 0 and 1*"),
        ("env", "*invalid value 'abc' for gpu_perf_tolerance from the environment variable GPU_PERF_TOLERANCE*"),
        ("ini", "*invalid value 'abc' for gpu_perf_tolerance from the ini file (tox.ini, key gpu_perf_tolerance)*"),
    ],
)
def test_bad_value_names_its_source(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], monkeypatch: pytest.MonkeyPatch, where: str, message: str
) -> None:
    pytester.makepyfile("def test_t():\n    pass\n")
    args: list[str] = []
    if where == "cli":
        args.append("--gpu-perf-tolerance=abc")
    elif where == "env":
        monkeypatch.setenv("GPU_PERF_TOLERANCE", "abc")
    else:
        pytester.makeini("[pytest]\ngpu_perf_tolerance = abc\n")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("--gpu-perf-inconclusive=maybe", "*expected one of warn, fail*"),
        ("--gpu-perf-missing-baseline=ignore", "*expected one of pass, skip, fail*"),
        ("--gpu-perf-cache=warm", "*expected one of cold, hot*"),
        ("--gpu-perf-device=gpu1", "*expected 'auto' or a CUDA device ordinal*"),
        ("--gpu-perf-budget=-1", "*expected a positive number*"),
        ("--gpu-perf-confidence=0.3", "*between 0.5 and 1*"),
    ],
)
def test_bad_choices(pytester: pytest.Pytester, flag: str, message: str) -> None:
    pytester.makepyfile("def test_t():\n    pass\n")
    result = pytester.runpytest(flag)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_header_lines(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    pytester.makepyfile("def test_t():\n    pass\n")
    pytester.runpytest().stdout.fnmatch_lines(["gpu-perf: off (perf tests are skipped; run with --gpu-perf to time them)"])
    result = pytester.runpytest("--gpu-perf")
    result.stdout.fnmatch_lines(
        [
            "gpu-perf: on; GPU 0: Fake GPU (compute capability 9.0, 132 SMs, 80 GiB, L2 50 MiB)",
            "gpu-perf: driver 0.0-fake, CUDA runtime 0.0, CuPy none; cache mode cold; baselines: *fake-gpu-sm90-132sm-80gib",
        ]
    )
    fake_gpu(cc="none")
    pytester.runpytest("--gpu-perf").stdout.fnmatch_lines(["gpu-perf: on, but no GPU: fake: this machine has no GPU; *"])
    fake_gpu()
    pytester.runpytest("--gpu-perf", "--gpu-perf-update-baselines").stdout.fnmatch_lines(
        ["gpu-perf: --gpu-perf-update-baselines: this run's measurements replace the stored baselines of fake-gpu-*"]
    )


@pytest.mark.parametrize("off", ["--no-gpu-perf", "--gpu-perf=0", "--gpu-perf=false", "--gpu-perf=off", "--gpu-perf=False"])
def test_the_command_line_turns_timing_off_over_ini_and_env(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], monkeypatch: pytest.MonkeyPatch, off: str
) -> None:
    fake_gpu(times={"k": 10e-6})
    pytester.makepyfile("def test_t(gpu_perf):\n    pass\n")
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\ngpu_perf = true\n")
    monkeypatch.setenv("GPU_PERF", "1")
    pytester.runpytest().assert_outcomes(passed=1)
    result = pytester.runpytest(off)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["gpu-perf: off*"])
    pytester.runpytest(off, "--gpu-perf").assert_outcomes(passed=1)  # the last switch wins
    pytester.runpytest("--gpu-perf", off).assert_outcomes(skipped=1)


def test_plain_switches_still_take_no_value(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    """``--gpu-perf tests/x.py``: the path after the switch stays a test path."""
    fake_gpu(times={"k": 10e-6})
    pytester.makepyfile(test_a="def test_t(gpu_perf):\n    pass\n", test_b="def test_u(gpu_perf):\n    pass\n")
    pytester.runpytest("--gpu-perf", "test_a.py").assert_outcomes(passed=1)
    pytester.runpytest("--gpu-perf=1", "test_b.py").assert_outcomes(passed=1)
    result = pytester.runpytest("--gpu-perf=maybe")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*argument --gpu-perf: ignored explicit argument 'maybe'*"])


def test_every_switch_has_an_off_form(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    for s in SETTINGS:
        if s.flag_only:
            result.stdout.re_match_lines([rf"^\s+{s.no_flag}(\s|$)"])
    assert "--gpu-perf=0" not in result.stdout.str(), "the value spellings stay out of --help"


@pytest.mark.parametrize(("where", "value"), [("cli", "inf"), ("env", "Infinity"), ("ini", "inf"), ("cli", "nan")])
def test_an_endless_quiet_wait_is_refused_before_anything_waits(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], monkeypatch: pytest.MonkeyPatch, value: str, where: str
) -> None:
    """With another process on the GPU for good, an infinite wait hung the run."""
    fake_gpu(times={"k": 10e-6}, FAKE_OTHERS='[{"pid": 4242, "name": "other", "sm_percent": 50, "until_s": 1e9}]')
    pytester.makepyfile("from pytest_gpuperf import Variant\n\ndef test_k(gpu_perf):\n"
                        "    gpu_perf.measure(Variant('k', lambda: None))\n")
    args = ["--gpu-perf"]
    if where == "cli":
        args.append(f"--gpu-perf-quiet-wait={value}")
    elif where == "env":
        monkeypatch.setenv("GPU_PERF_QUIET_WAIT", value)
    else:
        pytester.makeini(f"[pytest]\naddopts = -p no:cacheprovider\ngpu_perf_quiet_wait = {value}\n")
    result = pytester.runpytest_subprocess(*args, timeout=120)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        f"ERROR: pytest-gpuperf: invalid value '{value}' for gpu_perf_quiet_wait from *: "
        "expected a finite number of seconds, 0 or more"
    ])


@pytest.mark.parametrize("where", ["cli", "env"])
def test_a_json_report_path_that_names_a_folder_is_one_usage_line(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    pytester.makepyfile("def test_t():\n    pass\n")
    (pytester.path / "existing").mkdir()
    for value, line in (
        ("reports/", "ERROR: pytest-gpuperf: invalid value 'reports/' for gpu_perf_json from *: expected the path of a "
                     "file to write, and this one names a folder (e.g. reports/report.json)"),
        ("existing", "ERROR: pytest-gpuperf: --gpu-perf-json */existing (from *) must name a file, and it is not; "
                     "give another path"),
    ):
        if where == "env":
            monkeypatch.setenv("GPU_PERF_JSON", value)
        result = pytester.runpytest("--gpu-perf", *([f"--gpu-perf-json={value}"] if where == "cli" else []))
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([line])
        assert "Traceback" not in result.stderr.str() + result.stdout.str()
    assert not (pytester.path / "reports").exists()
