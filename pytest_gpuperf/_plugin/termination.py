"""A run stopped by SIGTERM (a CI step's timeout, ``timeout``, ``docker stop``, a scheduler's
cancel) ends as Ctrl-C ends one: pytest's own interrupt path runs the session's end, so the JSON
report, the baselines being recorded and the charts of the tests that ran are written, and the
report says the run was interrupted. A second SIGTERM kills at once, as without the plugin."""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any


class Termination:
    """SIGTERM turned into KeyboardInterrupt while the session runs (main thread, default handler only)."""

    def __init__(self) -> None:
        self.received: str | None = None  # the signal's name once one arrived
        self.active = False  # whether SIGTERM is ours now
        self._previous: Any = None

    def install(self) -> None:
        """Take SIGTERM where nobody else has: a handler the user or another plugin set is kept."""
        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return
        self._previous = signal.signal(signal.SIGTERM, self._handle)
        self.active = True

    def uninstall(self) -> None:
        if self.active:
            signal.signal(signal.SIGTERM, self._previous)
            self.active = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.received = signal.Signals(signum).name
        self.uninstall()  # the next one ends the process, whatever the session's end is doing
        raise KeyboardInterrupt(f"{self.received} received: the run ends, writing what it has")
