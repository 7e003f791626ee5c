"""Session end never loses the run: the JSON report first, every other output attempted on its
own, each outcome a summary line; bad paths and bad baseline files are one clear line."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest

from pytest_gpuperf._store.baselines import module_file_name

THREE_MODULES = {
    "test_a": "from pytest_gpuperf import Variant\n\ndef test_k(gpu_perf):\n    gpu_perf.measure(Variant('k', lambda: None))\n",
    "test_b": "from pytest_gpuperf import Variant\n\ndef test_k(gpu_perf):\n    gpu_perf.measure(Variant('k', lambda: None))\n",
    "test_c": "from pytest_gpuperf import Variant\n\ndef test_k(gpu_perf):\n    gpu_perf.measure(Variant('k', lambda: None))\n",
}
DEVICE = "fake-gpu-sm90-132sm-80gib"


def test_one_unwritable_baseline_file_stops_nothing_else(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    pytester.makepyfile(**THREE_MODULES)
    folder = pytester.path / "baselines" / DEVICE
    folder.mkdir(parents=True)
    (folder / "test_b.json").mkdir()  # a folder where test_b's file must go: it cannot be written
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-update-baselines", "--gpu-perf-json=out/report.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "*gpu-perf: JSON report *out/report.json",
        f"*gpu-perf: baselines *{DEVICE}/test_a.json (1 entries)",
        f"*gpu-perf: baselines *{DEVICE}/test_b.json NOT written: *",
        f"*gpu-perf: baselines *{DEVICE}/test_c.json (1 entries)",
    ])
    assert json.loads((folder / "test_c.json").read_text())["entries"]
    report = json.loads((pytester.path / "out" / "report.json").read_text())
    assert {c["file"].rsplit("/", 1)[-1] for c in report["baseline_changes"]} == {"test_a.json", "test_c.json"}
    assert "Traceback" not in result.stdout.str()


def test_an_unwritable_report_is_a_line_and_the_baselines_are_still_written(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None]
) -> None:
    pytester.makepyfile(test_a=THREE_MODULES["test_a"])
    (pytester.path / "blocked").write_text("a file where the report's folder should be\n")
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-update-baselines", "--gpu-perf-json=blocked/report.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["*gpu-perf: JSON report *blocked/report.json NOT written: *"])
    assert (pytester.path / "baselines" / DEVICE / "test_a.json").exists()
    assert "Traceback" not in result.stdout.str()


@pytest.mark.parametrize(
    ("option", "make"),
    [
        ("--gpu-perf-baselines=conftest.py", None),  # an existing file given as the baselines folder
        ("--gpu-perf-json=reports", "reports"),  # an existing folder given as the report file
        ("--gpu-perf-plots=conftest.py", None),
    ],
)
def test_paths_that_cannot_serve_are_usage_errors_at_start(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], option: str, make: str | None
) -> None:
    if make:
        (pytester.path / make).mkdir()
    pytester.makepyfile(test_a=THREE_MODULES["test_a"])
    result = pytester.runpytest("--gpu-perf", option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: pytest-gpuperf: {option.split('=')[0]} * must name a *, and it is not; give another path"])
    assert "Traceback" not in result.stderr.str()


def test_a_bad_baseline_file_fails_before_any_timing_in_one_line(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None]
) -> None:
    pytester.makepyfile(test_a=THREE_MODULES["test_a"])
    folder = pytester.path / "baselines" / DEVICE
    folder.mkdir(parents=True)
    (folder / "test_a.json").write_bytes(b"\xff\xfe not text")
    result = pytester.runpytest("--gpu-perf", "-p", "no:randomly")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*baseline file *{DEVICE}/test_a.json*"])
    failure = result.stdout.str().split("= FAILURES =")[1].split("short test summary")[0]
    assert "pytest_gpuperf" not in failure and "Traceback" not in failure, failure
    assert "gpu-perf summary" not in result.stdout.str() or "test_k  k" not in result.stdout.str()  # nothing was timed


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("tests/merge/test_perf.py", "tests.merge/test_perf.py"),
        ("tests/merge test/test_perf.py", "tests/merge.test/test_perf.py"),
        ("tests/merge_test/test_perf.py", "tests/merge-test/test_perf.py"),
        ("tests/méta/test_perf.py", "tests/m.ta/test_perf.py"),
        ("outside-rootdir/home/a/test_x.py", "outside-rootdir/home/b/test_x.py"),
        ("a" * 300 + "/test_x.py", "a" * 300 + "/test_y.py"),
    ],
)
def test_module_paths_never_share_a_baseline_file(a: str, b: str) -> None:
    assert module_file_name(a) != module_file_name(b)
    assert len(module_file_name(a).encode()) <= 200


def test_existing_baseline_file_names_are_kept() -> None:
    assert module_file_name("tests/merge_attn_states/test_perf.py") == "tests.merge_attn_states.test_perf.json"
    for path in Path(__file__).parents[2].glob("baselines/*/tests.*.json"):
        module = path.name[: -len(".json")].replace(".", "/") + ".py"
        assert module_file_name(module) == path.name
