"""A live status line while a measurement runs: the test, the variants, the rounds taken, the
seconds spent, the sampling budget, and what the run has measured so far.

pytest prints nothing while a test runs, and a GPU suite's tests take seconds each, so without
it a user cannot tell which variant is being timed or whether the run is stuck. The line is
drawn only where it can be erased without a trace: stdout is a terminal (not a pipe or a file;
``-v`` prints one line per measurement there), the run is not quiet (``-q``), it is not an xdist
worker (workers have no terminal), ``TERM`` is not ``dumb``, and nothing but pytest writes to the
terminal during a test (output captured at the file descriptors, pytest's default, and no live
logging). It goes to the controlling terminal (``/dev/tty``), so pytest's output capture and
its bookkeeping of the current line never see it: it is drawn on the line below pytest's
cursor, which is then put back where pytest left it, and erased when the measurement ends, so
pytest's dots, words and percentages come out exactly as they would without it. Where pytest's
line changed under it, the line is given up rather than moved.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TextIO

import pytest

if TYPE_CHECKING:
    from pytest_gpuperf._timing.sampler import OnRounds

REDRAW_EVERY_S = 0.25  # a terminal redrawn faster than this only flickers
DOWN_AND_CLEAR = "\x1b[1B\r\x1b[2K"  # to the start of the line below, emptied


def _back_to(column: int) -> str:
    """Up one line, to pytest's cursor column (0-based)."""
    return f"\x1b[1A\x1b[{column + 1}G"


class LiveStatus:
    """Draws and erases the status line on ``stream``; ``column()`` says where pytest's cursor is
    (None when unknown: nothing is drawn) and ``width()`` how wide the terminal is."""

    def __init__(
        self,
        stream: TextIO,
        column: Callable[[], int | None],
        width: Callable[[], int],
        clock: Callable[[], float] = time.monotonic,
    ):
        self._stream = stream
        self._column = column
        self._width = width
        self._clock = clock
        self.measured = 0
        self.seconds = 0.0
        self._drawn_at: int | None = None  # pytest's cursor column while a line is drawn below it

    @contextlib.contextmanager
    def measuring(self, test: str, label: str, budget_s: float) -> Iterator[OnRounds]:
        """Yield the sampler's ``on_rounds`` callback for one measurement; erase the line after it.

        The line is drawn at once (the wait for the GPU, warm-up and capture come before the
        first rounds), then at most every REDRAW_EVERY_S as rounds come in. The seconds shown
        run from entering, so they include that wait; ``budget_s`` is the sampling budget."""
        began = self._clock()
        last = -REDRAW_EVERY_S

        def on_rounds(rounds: int) -> None:
            nonlocal last
            now = self._clock()
            if now - last < REDRAW_EVERY_S:
                return
            last = now
            doing = f"{rounds} rounds" if rounds else "waiting for the GPU, warming up"
            so_far = f"{self.measured} measured in {self.seconds + now - began:.0f} s"
            self._draw(
                f"gpu-perf: {test}: {label}: {doing}, {now - began:.1f} s (sampling budget {budget_s:g} s;"
                f" run: {so_far})"
            )

        on_rounds(0)
        try:
            yield on_rounds
        finally:
            self._erase()
            self.measured += 1
            self.seconds += self._clock() - began

    def _draw(self, text: str) -> None:
        column, width = self._column(), self._width()
        if column is None or column >= width:  # pytest's line wrapped: its cursor is not where we think
            return
        if self._drawn_at is not None and column != self._drawn_at:
            self._drawn_at = None  # pytest wrote meanwhile: the old line is not where we left it
            return
        # One terminal cell per character: anything else could wrap and break the moves back.
        text = text.encode("ascii", "backslashreplace").decode("ascii")[: max(0, width - 1)]
        if self._drawn_at is None:
            # A newline (scrolling at the screen's foot) opens the line below; the cursor then
            # returns by relative moves, which stay right when the screen scrolled.
            self._write(f"\n\r\x1b[2K{text}{_back_to(column)}")
            self._drawn_at = column
        else:
            self._write(f"{DOWN_AND_CLEAR}{text}{_back_to(column)}")

    def _erase(self) -> None:
        if self._drawn_at is not None and self._column() == self._drawn_at:
            self._write(DOWN_AND_CLEAR + _back_to(self._drawn_at))
        self._drawn_at = None

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except OSError:  # the terminal went away: the run goes on without the line
            pass

    def close(self) -> None:
        self._erase()
        with contextlib.suppress(OSError):
            self._stream.close()


def for_terminal(config: pytest.Config) -> LiveStatus | None:
    """A LiveStatus on the controlling terminal when the run is interactive, else None."""
    if config.get_verbosity() < 0 or hasattr(config, "workerinput"):
        return None
    # Only pytest may write to the terminal while a test runs: output captured at the file
    # descriptors (the default) and no live logging. Otherwise a print or a log line moves the
    # cursor under the line, which could then be neither found nor erased.
    if (
        getattr(config.option, "capture", "fd") != "fd"
        or config.getini("log_cli")
        or config.getoption("log_cli_level", None)
    ):
        return None
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or os.environ.get("TERM", "") in ("", "dumb"):
        return None
    isatty = getattr(reporter, "isatty", False)  # pytest's own answer for its output file
    if not (isatty() if callable(isatty) else isatty):
        return None
    try:
        stream = open("/dev/tty", "w", encoding="utf-8", errors="replace")  # closed at session end (close_live)
    except OSError:
        return None
    writer = config.get_terminal_writer()
    return LiveStatus(stream, column=lambda: writer.width_of_current_line, width=lambda: writer.fullwidth)
