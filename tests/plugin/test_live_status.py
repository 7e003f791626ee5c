"""The live status line: drawn below pytest's cursor, throttled, cut to the terminal, erased (CPU only)."""

from __future__ import annotations

import io
from typing import Callable

import pytest

from pytest_gpuperf._plugin import live_status
from pytest_gpuperf._plugin.live_status import LiveStatus

ERASE_AT_COLUMN_12 = "\x1b[1B\r\x1b[2K\x1b[1A\x1b[13G"


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def status(column: int | None = 12, width: int = 200) -> tuple[LiveStatus, io.StringIO, Clock]:
    out, clock = io.StringIO(), Clock()
    return LiveStatus(out, column=lambda: column, width=lambda: width, clock=clock), out, clock


def test_the_line_is_drawn_below_the_cursor_which_returns_to_its_column_and_is_erased_after() -> None:
    live, out, clock = status()
    with live.measuring("test_claim", "'fast' vs 'base'", 1.0) as on_rounds:
        clock.t += 0.5
        on_rounds(40)
    text = out.getvalue()
    assert text.startswith(
        "\n\r\x1b[2Kgpu-perf: test_claim: 'fast' vs 'base': waiting for the GPU, warming up, 0.0 s"
        " (sampling budget 1 s; run: 0 measured in 0 s)\x1b[1A\x1b[13G"
    ), "drawn at once, before any round: the wait for the GPU and the warm-up show too"
    assert "'fast' vs 'base': 40 rounds, 0.5 s (sampling budget 1 s; run: 0 measured in 0 s)" in text
    assert text.endswith("\x1b[1A\x1b[13G" + ERASE_AT_COLUMN_12)  # back to column 13 (1-based), then erased
    assert text.count("\n") == 1, "one new line, opened once, never another"


def test_redraws_are_throttled_and_replace_the_line_in_place() -> None:
    live, out, clock = status()
    with live.measuring("test_a", "'k'", 1.0) as on_rounds:
        on_rounds(10)  # as soon as the first draw: not drawn
        clock.t += 0.1
        on_rounds(20)  # too soon: not drawn
        clock.t += 0.2
        on_rounds(30)
    text = out.getvalue()
    assert "10 rounds" not in text and "20 rounds" not in text and "30 rounds" in text
    assert text.count("\n") == 1 and text.count("\x1b[2K") == 3, "drawn, redrawn in place, erased"


def test_the_run_so_far_counts_measurements_and_their_time() -> None:
    live, out, clock = status()
    for seconds in (2.0, 3.0):
        with live.measuring("test_a", "'k'", 1.0):
            clock.t += seconds
    with live.measuring("test_b", "'k'", 1.0) as on_rounds:
        clock.t += 1.0
        on_rounds(5)
    assert "test_b: 'k': 5 rounds, 1.0 s (sampling budget 1 s; run: 2 measured in 6 s)" in out.getvalue()
    assert (live.measured, live.seconds) == (3, 6.0)


def _first_drawn(out: io.StringIO) -> str:
    return out.getvalue().split("\x1b[2K", 1)[1].split("\x1b", 1)[0]


def test_the_line_is_cut_to_the_terminal_width() -> None:
    live, out, _ = status(width=30)
    with live.measuring("test_with_a_very_long_name", "'a_variant' vs 'another_one'", 1.0):
        pass
    assert _first_drawn(out) == "gpu-perf: test_with_a_very_lo"


def test_characters_wider_than_one_cell_are_escaped_so_the_line_cannot_wrap() -> None:
    live, out, _ = status()
    with live.measuring("test_\u5909\u6570", "'\u00e9t\u00e9'", 1.0):
        pass
    drawn = _first_drawn(out)
    assert drawn.isascii() and drawn.startswith("gpu-perf: test_\\u5909\\u6570: '\\xe9t\\xe9'")


def test_a_line_whose_place_pytest_changed_is_given_up_not_moved() -> None:
    columns = iter([12, 20])
    live, out, clock = status()
    live._column = lambda: next(columns)  # type: ignore[method-assign]
    with live.measuring("test_a", "'k'", 1.0) as on_rounds:
        clock.t += 0.5
        on_rounds(10)  # pytest's cursor moved (column 20): nothing more is drawn
    text = out.getvalue()
    assert text.count("\x1b[2K") == 1 and "10 rounds" not in text, "drawn once, then neither redrawn nor erased"


@pytest.mark.parametrize("column", [None, 80, 95])
def test_nothing_is_drawn_or_erased_where_pytests_cursor_is_unknown(column: int | None) -> None:
    live, out, _ = status(column=column, width=80)
    with live.measuring("test_a", "'k'", 1.0) as on_rounds:
        on_rounds(10)
    assert out.getvalue() == ""
    assert live.measured == 1


def test_a_terminal_that_went_away_does_not_stop_the_run() -> None:
    class Gone(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError("EIO")

    live = LiveStatus(Gone(), column=lambda: 0, width=lambda: 80)
    with live.measuring("test_a", "'k'", 1.0) as on_rounds:
        on_rounds(10)
    live.close()


class FakeConfig:
    """What for_terminal asks of a pytest.Config."""

    def __init__(
        self, verbosity: int = 0, isatty: bool = True, worker: bool = False, capture: str = "fd", log_cli: bool = False
    ):
        self._verbosity = verbosity
        self.option = type("Option", (), {"capture": capture})()
        self._log_cli = log_cli
        reporter = type("Reporter", (), {"isatty": staticmethod(lambda: isatty)})()
        self.pluginmanager = type("PM", (), {"get_plugin": staticmethod(lambda name: reporter)})()
        if worker:
            self.workerinput = {"workerid": "gw0"}

    def get_verbosity(self) -> int:
        return self._verbosity

    def getini(self, name: str) -> bool:
        return self._log_cli if name == "log_cli" else False

    def getoption(self, name: str, default: object = None) -> object:
        return default

    def get_terminal_writer(self) -> object:
        return type("Writer", (), {"width_of_current_line": 7, "fullwidth": 120})()


@pytest.mark.parametrize(
    ("config", "term", "shown"),
    [
        (FakeConfig(), "xterm-256color", True),
        (FakeConfig(verbosity=1), "xterm", True),
        (FakeConfig(verbosity=-1), "xterm", False),  # -q
        (FakeConfig(isatty=False), "xterm", False),  # a pipe, a CI log
        (FakeConfig(worker=True), "xterm", False),  # an xdist worker
        (FakeConfig(capture="sys"), "xterm", False),  # prints reach the terminal mid-test
        (FakeConfig(capture="no"), "xterm", False),  # -s
        (FakeConfig(log_cli=True), "xterm", False),  # live logging writes mid-test
        (FakeConfig(), "dumb", False),
        (FakeConfig(), "", False),
    ],
)
def test_the_line_is_shown_only_in_an_interactive_run(
    monkeypatch: pytest.MonkeyPatch, config: FakeConfig, term: str, shown: bool
) -> None:
    monkeypatch.setenv("TERM", term)
    monkeypatch.setattr(live_status, "open", lambda *a, **k: io.StringIO(), raising=False)
    live = live_status.for_terminal(config)  # type: ignore[arg-type]
    assert (live is not None) is shown
    if live is not None:
        with live.measuring("test_a", "'k'", 1.0) as on_rounds:
            on_rounds(3)
        assert live.measured == 1


def test_no_line_without_a_controlling_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_tty(*args: object, **kwargs: object) -> None:
        raise OSError("No such device or address: '/dev/tty'")

    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setattr(live_status, "open", no_tty, raising=False)
    assert live_status.for_terminal(FakeConfig()) is None  # type: ignore[arg-type]


def test_a_real_run_into_a_pipe_has_no_line(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TERM", "xterm")
    pytester.makeconftest(
        "from pytest_gpuperf._plugin.live_status import for_terminal\n\n"
        "def pytest_sessionstart(session):\n"
        "    print('\\nlive status:', for_terminal(session.config))\n"
    )
    pytester.makepyfile("def test_a():\n    pass\n")
    result = pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider")  # stdout is a pipe here
    result.stdout.fnmatch_lines(["live status: None"])


def test_every_measurement_of_a_run_draws_through_the_sampler(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_gpu(times={"fast": 10e-6, "base": 20e-6})
    out = io.StringIO()
    out.close = lambda: None  # type: ignore[method-assign]  # read after the run closed it
    monkeypatch.setattr(
        live_status, "for_terminal", lambda config: LiveStatus(out, column=lambda: 0, width=lambda: 200)
    )
    pytester.makepyfile(
        "from pytest_gpuperf import Variant\n\n"
        "def test_claim(gpu_perf):\n"
        "    gpu_perf.assert_speedup(Variant('fast', lambda: None), Variant('base', lambda: None), at_least=1.5)\n"
        "    gpu_perf.measure(Variant('fast', lambda: None))\n"
    )
    pytester.runpytest_inprocess("--gpu-perf").assert_outcomes(passed=1)
    text = out.getvalue()
    assert "gpu-perf: test_claim: 'fast' vs 'base': waiting for the GPU, warming up" in text
    assert "gpu-perf: test_claim: 'fast': waiting for the GPU, warming up" in text and "run: 1 measured in" in text
    assert text.count("\x1b[2K") >= 2 and text.endswith(ERASE_AT_COLUMN_12.replace("13G", "1G"))
