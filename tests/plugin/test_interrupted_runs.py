"""A run stopped from outside (SIGTERM from a CI timeout, Ctrl-C) still writes the report of the
tests that ran, and the report says it was stopped."""
from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Callable

import pytest

from pytest_gpuperf._plugin.termination import Termination
from pytest_gpuperf._report.render import format_report
from pytest_gpuperf._store.reports import load_report

STOPPED_MODULE = """
import os, signal, time
from pytest_gpuperf import Variant

def test_a(gpu_perf):
    gpu_perf.measure(Variant("a", lambda: None))

def test_b():
    os.kill(os.getpid(), getattr(signal, os.environ["STOP_SIGNAL"]))
    time.sleep(30)  # the signal ends the run long before this

def test_c(gpu_perf):
    gpu_perf.measure(Variant("c", lambda: None))
"""


@pytest.mark.parametrize(("stop", "recorded"), [("SIGTERM", "SIGTERM"), ("SIGINT", "interrupted")])
def test_a_stopped_run_writes_the_report_of_what_ran(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], monkeypatch: pytest.MonkeyPatch, stop: str, recorded: str
) -> None:
    fake_gpu(times={"a": 10e-6, "c": 10e-6})
    monkeypatch.setenv("STOP_SIGNAL", stop)
    pytester.makepyfile(test_stop=STOPPED_MODULE)
    result = pytester.runpytest_subprocess("--gpu-perf", "--gpu-perf-json=report.json", timeout=120)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    report = load_report(pytester.path / "report.json")
    assert [t["nodeid"] for t in report["tests"]] == ["test_stop.py::test_a"]
    assert report["interrupted"] == recorded
    assert f"The run was stopped ({recorded}): only the tests that ran before it are here." in format_report(report)


def test_a_run_that_ends_on_its_own_is_not_marked_stopped(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> None:
    fake_gpu(times={"a": 10e-6})
    pytester.makepyfile(test_one="from pytest_gpuperf import Variant\n\ndef test_a(gpu_perf):\n    gpu_perf.measure(Variant('a', lambda: None))\n")
    pytester.runpytest("--gpu-perf", "--gpu-perf-json=report.json").assert_outcomes(passed=1)
    report = json.loads(Path(pytester.path / "report.json").read_text())
    assert report["interrupted"] is None
    assert "stopped" not in format_report(report)
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, "the plugin gives SIGTERM back at the end"


def test_a_sigterm_handler_someone_else_set_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    def theirs(signum: int, frame: object) -> None:
        raise AssertionError("not called here")

    monkeypatch.setattr(signal, "getsignal", lambda sig: theirs)
    installed: list[object] = []
    monkeypatch.setattr(signal, "signal", lambda sig, handler: installed.append(handler))
    termination = Termination()
    termination.install()
    assert installed == [] and not termination.active


def test_the_first_sigterm_interrupts_and_the_next_one_kills() -> None:
    termination = Termination()
    termination.install()
    if not termination.active:  # raising SIGTERM unhandled would end this run
        pytest.skip("SIGTERM already has a handler in this process")
    try:
        with pytest.raises(KeyboardInterrupt, match="SIGTERM received"):
            signal.raise_signal(signal.SIGTERM)
        assert termination.received == "SIGTERM"
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        termination.uninstall()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
