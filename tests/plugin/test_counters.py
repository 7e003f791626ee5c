"""Hardware counters without a GPU: ncu's CSV, the derived hw01 columns, finding ncu, skip
reasons, and the gpu_counters fixture end to end with a fake ncu that runs the target."""
from __future__ import annotations

import json
import os
import stat
import sys
import textwrap
from pathlib import Path
from typing import Callable

import pytest

from pytest_gpuperf._counters import metrics, ncu
from pytest_gpuperf._counters.metrics import DEFAULT_METRICS, CounterResult, Metric, parse_ncu_csv, to_base_unit
from pytest_gpuperf._counters.ncu import CounterError, CountersUnavailable, find_ncu, ncu_command, profile, profile_launches, unavailable_reason

# What `ncu --csv --page raw --print-units base` prints for two profiled launches: its own
# ==PROF== lines and the target's output around the CSV; a header, a units row, one row per
# launch; numbers with thousands separators; a metric the GPU has no value for ("n/a").
SAMPLE = textwrap.dedent(
    '''\
    ==PROF== Connected to process 4242 (/usr/bin/python3.12)
    checking qkv_base on layer0 ... ok
    ==PROF== Profiling "qkv_base" - 0: 0%....50%....100% - 9 passes
    ==PROF== Profiling "qkv_base_w2" - 1: 0%....50%....100% - 9 passes
    ==PROF== Disconnected from process 4242
    "ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","dram__bytes.sum","dram__bytes.sum.per_second","gpu__time_duration.sum","l1tex__data_bank_conflicts_pipe_lsu_mem_global_op_ld.sum","l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum","l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum","l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum","lts__t_sectors_srcunit_tex_op_read.sum","lts__t_sectors_srcunit_tex_op_write.sum","sm__sass_data_bytes_mem_global_op_ld.sum","smsp__inst_executed.sum","smsp__inst_executed_op_shared_ld.sum","smsp__issue_active.avg.pct_of_peak_sustained_active","smsp__thread_inst_executed.sum"
    "","","","","","","","","","","","byte","byte/second","nsecond","","","request","sector","sector","sector","byte","inst","inst","%","inst"
    "0","4242","python3.12","gpu","qkv_base","1","7","(256, 1, 1)","(528, 1, 1)","0","9.0","15,728,640","42,000,000,000","371,000","2,500,000","0","5,702,400","94,089,600","3,000,000","475,200","729,907,200","21,000,000","0","4.2","638,668,800"
    "1","4242","python3.12","gpu","qkv_base_w2","1","7","(256, 1, 1)","(528, 1, 1)","0","9.0","15,728,640","390,000,000,000","40,000","0","0","5,702,400","14,256,000","n/a","475,200","729,907,200","21,000,000","0","31.5","638,668,800"
    '''
)


def test_parse_reads_identity_units_and_values() -> None:
    rows = parse_ncu_csv(SAMPLE)
    assert [r["id"] for r in rows] == [0, 1]
    assert [r["kernel"] for r in rows] == ["qkv_base", "qkv_base_w2"]
    assert rows[0]["block"] == "(256, 1, 1)" and rows[0]["grid"] == "(528, 1, 1)"
    m = rows[0]["metrics"]
    assert m["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] == Metric(94_089_600.0, "sector", "94,089,600 sector")
    assert m["gpu__time_duration.sum"].value == pytest.approx(371e-6) and m["gpu__time_duration.sum"].unit == "second"
    assert m["dram__bytes.sum.per_second"].unit == "byte/second"
    assert rows[1]["metrics"]["lts__t_sectors_srcunit_tex_op_read.sum"].value is None  # "n/a"
    assert "Kernel Name" not in m and "ID" not in m


def test_parse_without_csv_gives_nothing() -> None:
    assert parse_ncu_csv("==PROF== Disconnected\n==WARNING== No kernels were profiled.\n") == []


@pytest.mark.parametrize(
    ("value", "unit", "expected", "base"),
    [
        (371.0, "usecond", 371e-6, "second"),
        (2.5, "Gbyte/second", 2.5e9, "byte/second"),
        (3.0, "Kbyte", 3e3, "byte"),
        (1.5, "cycle/nsecond", 1.5e9, "cycle/second"),
        (42.0, "%", 42.0, "%"),
        (7.0, "sector", 7.0, "sector"),
        (2.5, "Msector", 2.5e6, "sector"),  # a CSV exported without --print-units base
    ],
)
def test_units_are_converted_to_base(value: float, unit: str, expected: float, base: str) -> None:
    got, got_unit = to_base_unit(value, unit)
    assert got == pytest.approx(expected) and got_unit == base


def _result(**values: float) -> CounterResult:
    return CounterResult(kernel="k", metrics={name: Metric(v, "") for name, v in values.items()})


def test_derived_hw01_columns() -> None:
    r = _result(
        **{
            metrics.GLOBAL_LD_SECTORS: 165.0,
            metrics.GLOBAL_LD_REQUESTS: 10.0,
            metrics.GLOBAL_LD_THREAD_BYTES: 1280.0 * 4,  # 4 x 128 bytes per request: float4 loads
            metrics.GLOBAL_LD_BANK_CONFLICTS: 153.0,
            metrics.SHARED_LD_BANK_CONFLICTS: 6.0,
            metrics.SHARED_LD_INSTRUCTIONS: 3.0,
            metrics.L2_READ_SECTORS: 1000.0,
            metrics.L2_WRITE_SECTORS: 250.0,
            metrics.THREAD_INSTRUCTIONS: 3500.0,
            metrics.ISSUE_ACTIVE_PCT: 31.0,
            metrics.DURATION: 2e-6,
            metrics.DRAM_BYTES: 4000.0,
        }
    ).with_ideal(read_bytes=16_000.0, write_bytes=8000.0, iterations=1000.0)
    d = r.derived()
    assert d["SW"] == pytest.approx(16.5)
    assert d["SW/128B"] == pytest.approx(165.0 / 40.0)  # 5120 requested bytes = 40 x 128
    assert d["BXW"] == pytest.approx(15.3)
    assert d["SBXW"] == pytest.approx(2.0)
    assert d["N-Rd"] == pytest.approx(32_000 / 16_000) and d["N-Wr"] == pytest.approx(8000 / 8000)
    assert d["GB/s"] == pytest.approx((1250 * 32) / 2e-6 / 1e9)
    assert d["DRAM GB/s"] == pytest.approx(4000 / 2e-6 / 1e9)  # from bytes and time when no per_second metric
    assert d["/itr"] == pytest.approx(3.5) and d["%"] == 31.0 and d["t/us"] == pytest.approx(2.0)


def test_derived_columns_are_none_without_their_inputs() -> None:
    d = _result(**{metrics.GLOBAL_LD_SECTORS: 5.0, metrics.GLOBAL_LD_REQUESTS: 0.0}).derived()
    assert d["SW"] is None and d["N-Rd"] is None and d["/itr"] is None and d["t/us"] is None
    with pytest.raises(KeyError, match="was not collected"):
        _result().value(metrics.DURATION)


def test_command_never_touches_clocks_and_selects_one_launch() -> None:
    cmd = ncu_command("ncu", "pkg.mod:fn", {"n": 1}, kernel_regex="^k$", metrics=["a.sum", "b.sum"], launch_skip=2)
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    assert cmd[cmd.index("--kernel-name") + 1] == "regex:^k$"
    assert cmd[cmd.index("--launch-skip") + 1] == "2" and cmd[cmd.index("--launch-count") + 1] == "1"
    assert cmd[cmd.index("--metrics") + 1] == "a.sum,b.sum"
    assert cmd[cmd.index("--page") + 1] == "raw" and "--csv" in cmd
    assert cmd[cmd.index("--print-kernel-base") + 1] == "function", "kernel names without parameters"
    assert cmd[-2:] == ["pkg.mod:fn", '{"n": 1}']
    with pytest.raises(ValueError, match="module:function"):
        ncu_command("ncu", "no_colon", {}, kernel_regex="k", metrics=["a"])


# -- finding ncu and skip reasons -------------------------------------------------------------
def test_missing_ncu_names_ncu_env_and_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NCU", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(ncu, "NCU_FALLBACKS", (str(tmp_path / "cuda/bin/ncu"), str(tmp_path / "nsight-compute/*/ncu")))
    with pytest.raises(CountersUnavailable) as info:
        find_ncu()
    assert "$NCU" in info.value.reason and "PATH" in info.value.reason and "not found" in info.value.reason


def test_ncu_env_pointing_nowhere_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("NCU", str(tmp_path / "nope" / "ncu"))
    with pytest.raises(CountersUnavailable, match=r"\$NCU is set to .*nope"):
        find_ncu()


def test_ncu_is_found_on_path_then_in_nsight_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NCU", raising=False)
    folder = tmp_path / "opt" / "nsight-compute" / "2025.3.1"
    folder.mkdir(parents=True)
    fallback = _executable(folder / "ncu", "#!/bin/sh\n")
    monkeypatch.setattr(ncu, "NCU_FALLBACKS", (str(tmp_path / "none"), str(tmp_path / "opt/nsight-compute/*/ncu")))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert find_ncu() == str(fallback)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    on_path = _executable(bindir / "ncu", "#!/bin/sh\n")
    monkeypatch.setenv("PATH", str(bindir))
    assert find_ncu() == str(on_path)


@pytest.mark.parametrize(
    "line",
    [
        "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters on the target device 0.",
        "==ERROR== Failed to initialize the profiler: LibraryNotLoaded",
    ],
)
def test_counter_access_refused_gives_how_to_enable(line: str) -> None:
    reason = unavailable_reason("==PROF== Connected\n" + line + "\n")
    assert reason is not None
    assert "NVreg_RestrictProfilingToAdminUsers=0" in reason and "root" in reason
    assert unavailable_reason("==PROF== Profiling \"k\" - 0: 100% - 9 passes\n") is None


# -- profile() through a fake ncu --------------------------------------------------------------
# The fake parses the real command line, runs the target exactly as ncu would (so the runner
# and the target's PYTHONPATH are exercised), then prints SAMPLE for the requested metrics.
FAKE_NCU = textwrap.dedent(
    """\
    #!{python}
    import json, os, subprocess, sys
    argv = sys.argv[1:]
    mode = os.environ.get("FAKE_NCU_MODE", "ok")
    with open(os.environ["FAKE_NCU_LOG"], "a") as log:
        log.write(json.dumps(argv) + "\\n")
    metrics = argv[argv.index("--metrics") + 1].split(",")
    if mode == "perm":
        print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters")
        sys.exit(1)
    if mode == "unknown" and "sm__sass_data_bytes_mem_global_op_ld.sum" in metrics:
        print("==ERROR== Failed to find metric sm__sass_data_bytes_mem_global_op_ld.sum")
        sys.exit(1)
    target = argv[argv.index("--metrics") + 2:]
    done = subprocess.run(target)
    if done.returncode:
        print("==ERROR== The application returned an error code (%d)." % done.returncode)
        sys.exit(1)
    if mode == "none":
        print("==WARNING== No kernels were profiled.")
        sys.exit(0)
    sys.stdout.write(open(os.environ["FAKE_NCU_CSV"]).read())
    """
)

TARGET_MODULE = textwrap.dedent(
    """\
    import json, os

    def launch(n, out):
        with open(out, "w") as fh:
            json.dump({"n": n, "visible": os.environ.get("CUDA_VISIBLE_DEVICES")}, fh)
    """
)


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def fake_ncu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """A fake ncu in tmp_path/bin (also as $NCU); returns the log of its command lines."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    ncu = _executable(bindir / "ncu", FAKE_NCU.format(python=sys.executable))
    (tmp_path / "sample.csv").write_text(SAMPLE)
    log = tmp_path / "ncu.log"
    monkeypatch.setenv("NCU", str(ncu))
    monkeypatch.setenv("FAKE_NCU_LOG", str(log))
    monkeypatch.setenv("FAKE_NCU_CSV", str(tmp_path / "sample.csv"))

    def configure(mode: str = "ok") -> Path:
        monkeypatch.setenv("FAKE_NCU_MODE", mode)
        return log

    configure()
    return configure


def test_profile_runs_the_target_and_parses(tmp_path: Path, fake_ncu: Callable[..., Path]) -> None:
    log = fake_ncu("ok")
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "my_target.py").write_text(TARGET_MODULE)
    out = tmp_path / "ran.json"
    results = profile_launches(
        "my_target:launch", {"n": 3, "out": str(out)}, kernel_regex="^qkv_", launch_count=2, cwd=tmp_path / "proj", device=1
    )
    assert json.loads(out.read_text()) == {"n": 3, "visible": "1"}, "the target ran with its arguments, on GPU 1 only"
    assert [r.kernel for r in results] == ["qkv_base", "qkv_base_w2"]
    argv = json.loads(log.read_text().splitlines()[-1])
    assert argv[argv.index("--launch-count") + 1] == "2"
    one = profile("my_target:launch", {"n": 1, "out": str(out)}, kernel_regex="^qkv_", cwd=tmp_path / "proj",
                  ideal_read_bytes=3_000_000 * 32 / 2, iterations=182_476_800)
    assert one.kernel == "qkv_base" and one.n_rd == pytest.approx(2.0)
    assert one.instructions_per_iteration == pytest.approx(638_668_800 / 182_476_800)


def test_profile_skips_where_counters_are_refused(tmp_path: Path, fake_ncu: Callable[..., Path]) -> None:
    fake_ncu("perm")
    with pytest.raises(CountersUnavailable, match="NVreg_RestrictProfilingToAdminUsers"):
        profile("x:y", {}, kernel_regex="k", cwd=tmp_path)


def test_unknown_metric_is_dropped_after_one_retry(tmp_path: Path, fake_ncu: Callable[..., Path]) -> None:
    log = fake_ncu("unknown")
    (tmp_path / "my_target.py").write_text(TARGET_MODULE)
    r = profile("my_target:launch", {"n": 1, "out": str(tmp_path / "o.json")}, kernel_regex="k", cwd=tmp_path)
    assert r.missing == ("sm__sass_data_bytes_mem_global_op_ld.sum",)
    assert len(log.read_text().splitlines()) == 2
    assert r.sectors_per_request is not None


def test_no_matching_launch_is_an_error_naming_the_regex(tmp_path: Path, fake_ncu: Callable[..., Path]) -> None:
    fake_ncu("none")
    (tmp_path / "my_target.py").write_text(TARGET_MODULE)
    with pytest.raises(CounterError, match=r"no launch of a kernel matching regex '\^nothing\$'"):
        profile("my_target:launch", {"n": 1, "out": str(tmp_path / "o.json")}, kernel_regex="^nothing$", cwd=tmp_path)


def test_a_failing_target_is_an_error_with_its_output(tmp_path: Path, fake_ncu: Callable[..., Path]) -> None:
    fake_ncu("ok")
    with pytest.raises(CounterError, match="application returned an error code"):
        profile("no_such_module:fn", {}, kernel_regex="k", cwd=tmp_path)


# -- the gpu_counters fixture ----------------------------------------------------------------
COUNTER_TEST = textwrap.dedent(
    """\
    from kernels_target import KERNEL

    def test_counters(gpu_counters, tmp_path):
        r = gpu_counters.profile("kernels_target:launch", {"n": 1, "out": str(tmp_path / "o.json")},
                                 kernel_regex=KERNEL, ideal_read_bytes=48e6, iterations=182476800, label="base/layer0")
        assert r.sectors_per_request > 12
    """
)


@pytest.fixture
def counter_project(pytester: pytest.Pytester, fake_gpu: Callable[..., None], monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for name in ("GPU_PERF_COUNTERS", "GPU_PERF_PLOTS"):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(kernels_target=TARGET_MODULE + 'KERNEL = "^qkv_base$"\n', test_counters=COUNTER_TEST)
    return pytester


def test_fixture_skips_unless_counters_are_on(counter_project: pytest.Pytester, fake_ncu: Callable[..., Path]) -> None:
    result = counter_project.runpytest("-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*counters are off: run pytest with --gpu-perf-counters*"])


def test_fixture_skips_without_ncu(counter_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("NCU", raising=False)
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable))  # python, but no ncu
    monkeypatch.setattr(ncu, "NCU_FALLBACKS", (str(tmp_path / "none/ncu"),))
    result = counter_project.runpytest("--gpu-perf-counters", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*Nsight Compute (ncu) not found: set $NCU*PATH*"])


def test_fixture_skips_when_counters_are_refused(counter_project: pytest.Pytester, fake_ncu: Callable[..., Path]) -> None:
    fake_ncu("perm")
    result = counter_project.runpytest("--gpu-perf-counters", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*ncu cannot read this GPU's performance counters*NVreg_RestrictProfilingToAdminUsers=0*"])


def test_counters_reach_the_json_report_without_timing(counter_project: pytest.Pytester, fake_ncu: Callable[..., Path]) -> None:
    fake_ncu("ok")
    result = counter_project.runpytest("--gpu-perf-counters", "--gpu-perf-json=report.json")  # no --gpu-perf
    result.assert_outcomes(passed=1)
    report = json.loads((counter_project.path / "report.json").read_text())
    (test,) = [t for t in report["tests"] if t["nodeid"].endswith("test_counters")]
    (entry,) = test["counters"]
    assert entry["label"] == "base/layer0" and entry["kernel"] == "qkv_base"
    assert entry["derived"]["SW"] == pytest.approx(94_089_600 / 5_702_400)
    assert entry["derived"]["N-Rd"] == pytest.approx(3_000_000 * 32 / 48e6)
    assert entry["metrics"][metrics.DURATION] == {"value": pytest.approx(371e-6), "unit": "second"}
    assert set(DEFAULT_METRICS) <= set(entry["metrics"]) | set(entry["missing_metrics"])


def test_counters_setting_has_ini_and_env_twins(counter_project: pytest.Pytester, fake_ncu: Callable[..., Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPU_PERF_COUNTERS", "1")
    counter_project.runpytest().assert_outcomes(passed=1)
    monkeypatch.delenv("GPU_PERF_COUNTERS")
    counter_project.makeini("[pytest]\naddopts = -p no:cacheprovider\ngpu_perf_counters = true\n")
    counter_project.runpytest().assert_outcomes(passed=1)


def test_target_sees_only_the_profiled_gpu() -> None:
    assert ncu._visible_devices(1, None) == "1"
    assert ncu._visible_devices(1, "4,6") == "6", "ordinal 1 of a process that sees GPUs 4 and 6"
    assert ncu._visible_devices(0, "GPU-abc") == "GPU-abc"


@pytest.mark.parametrize(("value", "unit", "expected"), [(375680.0, "ns", 375.68e-6), (2.0, "us", 2e-6), (1.5, "ms", 1.5e-3)])
def test_short_time_units_from_print_units_base(value: float, unit: str, expected: float) -> None:
    """On an H200, `--print-units base` printed gpu__time_duration in "ns"."""
    from pytest_gpuperf._counters.metrics import to_base_unit

    got, base = to_base_unit(value, unit)
    assert base == "second" and got == pytest.approx(expected)
