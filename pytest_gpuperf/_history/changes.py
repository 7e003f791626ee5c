"""Change points of one series: found by PELT, confirmed by a rank test, measured with an interval.

The method, step by step (docs/history.md states it with its parameters):

1. The values are taken on the log scale, so a change is a ratio whatever the series' unit.
2. The noise ``sigma`` is estimated robustly from the first differences ``d`` of the log values:
   ``1.4826 * median(|d - median(d)|) / sqrt(2)`` (a step moves one difference only, so it barely
   moves this estimate; the factor makes a MAD a standard deviation; a difference of two
   independent values has twice a value's variance).
3. PELT (Killick, Fearnhead & Eckley 2012), as ``ruptures`` implements it, segments the series
   with the L2 cost (sum of squared deviations from each segment's mean, computed from running
   sums), segments of at least ``min_size`` values, and the penalty
   ``penalty_factor * sigma**2 * log(n)`` per change (``penalty_factor`` 3: the leading term
   of the modified BIC of Zhang & Siegmund 2007, stricter than the Schwarz criterion's 2).
4. Each candidate is tested against the values between its neighbours: the segment before it
   and the one after, at most ``MAX_SIDE`` values on each side, nearest first. The test is the
   two-sided Mann-Whitney U test at level ``(1 - confidence) / (n - 2 * min_size + 1)``:
   Bonferroni over every place PELT could have put a change, since the place was chosen from
   the same values.
   Its size is ``exp`` of the Hodges-Lehmann shift (after / before) with Moses' distribution-free
   interval at ``confidence`` (``shift.hodges_lehmann``).
5. A candidate that fails the test, or whose interval reaches within ``min_change`` of 1 (a
   change is kept only when its whole interval lies at or above ``1 + min_change``, or at or
   below ``1 / (1 + min_change)``), is dropped: of those failing, the one whose split lowers the
   L2 cost least (``m * n / (m + n) * (mean after - mean before)**2``; a p-value would favour
   dropping the candidate next to a short segment, whatever its step); its neighbours'
   segments merge and all are tested again, until every candidate left passes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pytest_gpuperf._history.shift import hodges_lehmann, mann_whitney

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["MAX_SIDE", "Method", "Step", "MissingLibrary", "find_steps", "noise_sigma"]

# The values each side of a change that its test and interval use, nearest first: a year of
# runs between two changes would otherwise make an interval of a million pairwise differences.
MAX_SIDE = 500
SIGMA_FLOOR = 1e-12  # a series of equal values still gets a positive penalty


@dataclass(frozen=True)
class Method:
    """The parameters of the method (see the module doc)."""

    confidence: float = 0.99
    min_change: float = 0.01
    min_size: int = 3
    penalty_factor: float = 3.0


@dataclass(frozen=True)
class Step:
    """One confirmed change: ``index`` is the position of the first value after it."""

    index: int
    size: float  # after / before
    low: float
    high: float
    p_value: float
    before: int  # values in the segment before (as tested)
    after: int


class MissingLibrary(Exception):
    """ruptures is not installed."""


def noise_sigma(logs: npt.NDArray[np.float64]) -> float:
    """The robust noise estimate of step 2."""
    import numpy as np

    d = np.diff(logs)
    if len(d) == 0:
        return SIGMA_FLOOR
    mad = float(np.median(np.abs(d - np.median(d))))
    return max(1.4826 * mad / math.sqrt(2.0), SIGMA_FLOOR)


def _cost() -> Any:
    """ruptures' L2 cost, its segment sums taken from running sums (the same values, O(1) each)."""
    try:
        import numpy as np
        from ruptures.base import BaseCost
    except ImportError:
        raise MissingLibrary from None

    class RunningSumL2(BaseCost):  # type: ignore[misc]  # ruptures has no type information, BaseCost is Any
        model = "l2-running-sums"
        min_size = 1

        def fit(self, signal: Any) -> RunningSumL2:
            self.signal = np.asarray(signal, dtype=float).reshape(-1, 1)
            values = self.signal[:, 0]
            self.sums = np.concatenate([[0.0], np.cumsum(values)])
            self.squares = np.concatenate([[0.0], np.cumsum(values * values)])
            return self

        def error(self, start: int, end: int) -> float:
            total = self.sums[end] - self.sums[start]
            return float(self.squares[end] - self.squares[start] - total * total / (end - start))

    return RunningSumL2()


def candidates(logs: npt.NDArray[np.float64], method: Method) -> list[int]:
    """PELT's change points (step 3): the index of the first value after each."""
    import ruptures

    n = len(logs)
    if n < 2 * method.min_size:
        return []
    penalty = method.penalty_factor * noise_sigma(logs) ** 2 * math.log(n)
    algo = ruptures.Pelt(custom_cost=_cost(), min_size=method.min_size, jump=1)
    ends = algo.fit(logs.reshape(-1, 1)).predict(pen=penalty)
    return [int(e) for e in ends[:-1]]


def _test(logs: npt.NDArray[np.float64], start: int, at: int, end: int, confidence: float) -> Step:
    before = logs[max(start, at - MAX_SIDE) : at]
    after = logs[at : min(end, at + MAX_SIDE)]
    shift = hodges_lehmann(before, after, confidence)
    return Step(
        at,
        math.exp(shift.estimate),
        math.exp(shift.low),
        math.exp(shift.high),
        mann_whitney(before, after),
        len(before),
        len(after),
    )


def _gain(logs: npt.NDArray[np.float64], start: int, at: int, end: int) -> float:
    """How much the L2 cost falls when ``[start, end)`` is split at ``at``."""
    before, after = logs[start:at], logs[at:end]
    m, n = len(before), len(after)
    return m * n / (m + n) * float(after.mean() - before.mean()) ** 2


def _beyond(step: Step, bound: float) -> bool:
    """Whether the step's whole interval lies beyond ``bound`` (a log ratio) on one side of 1."""
    return math.log(step.low) >= bound or math.log(step.high) <= -bound


def positions(n: int, min_size: int) -> int:
    """The places a change could have been put in ``n`` values with segments of ``min_size``."""
    return max(1, n - 2 * min_size + 1)


def confirm(logs: npt.NDArray[np.float64], found: Sequence[int], method: Method) -> list[Step]:
    """The candidates that pass step 5, each with its size, interval and p-value."""
    kept = sorted(found)
    bound = math.log1p(method.min_change)
    while kept:
        edges = [0, *kept, len(logs)]
        steps = [_test(logs, edges[i], edges[i + 1], edges[i + 2], method.confidence) for i in range(len(kept))]
        level = (1.0 - method.confidence) / positions(len(logs), method.min_size)
        failing = [s for s in steps if s.p_value > level or not _beyond(s, bound)]
        if not failing:
            return steps
        gains = {s.index: _gain(logs, edges[i], edges[i + 1], edges[i + 2]) for i, s in enumerate(steps)}
        kept.remove(min(failing, key=lambda s: gains[s.index]).index)
    return []


def find_steps(values: Sequence[float], method: Method = Method()) -> list[Step]:
    """The confirmed changes of a series of positive values, oldest first."""
    import numpy as np

    logs = np.log(np.asarray(values, dtype=float))
    return confirm(logs, candidates(logs, method), method)
