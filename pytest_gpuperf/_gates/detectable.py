"""What a check can see: the smallest slowdown it catches at its own error rate.

A regression check FAILs when the interval of R = t_now / t_stored lies wholly above 1 + θ
(``verdict``). Write h for the interval's half-width on the log scale, (ln high - ln low) / 2.
A run whose log-estimate X is centred on the true ln R, with the spread this run measured, FAILs
when X - h > ln(1 + θ). For a true slowdown of

    detectable slowdown D = (1 + θ) exp(2h) - 1

that needs X to land no more than h below its centre; h is at least z(c) standard errors (a t
quantile at confidence c, widened for correlation), so this happens with probability at least
(1 + c) / 2: the check misses a slowdown of D no more often than a quiet run's interval lies
wholly on one side of the truth. Smaller slowdowns are caught less often; below θ, never.

A speedup claim (``assert_speedup(fast, baseline, at_least=m)``) FAILs when its interval's upper
end lies below m. With the same argument it fails with probability at least (1 + c) / 2 once the
true speedup is m exp(-2h) or less: the fast variant running exp(2h) - 1 slower than the margin
allows. That is the claim's detectable slowdown.

No gate decides on batches that are not independent, so such a check detects nothing (None),
whatever its interval. A check against stored levels uses the same formula against the level
it is judged against; a slowdown that lands within θ of a higher stored level is read as that
level and passes (``levels``), which D does not describe.
"""

from __future__ import annotations

import math

from pytest_gpuperf._gates.stats import Interval

__all__ = ["log_halfwidth", "detectable_slowdown", "detectable_claim_slowdown"]


def log_halfwidth(interval: Interval) -> float:
    """h = (ln high - ln low) / 2; infinite for an interval that reaches zero or infinity."""
    if not (interval.low > 0 and math.isfinite(interval.high) and interval.high >= interval.low):
        return math.inf
    return (math.log(interval.high) - math.log(interval.low)) / 2.0


def detectable_slowdown(slowdown: Interval, threshold: float, independent: bool = True) -> float | None:
    """D = (1 + θ) exp(2h) - 1 of a regression check (module doc); None where it cannot FAIL."""
    return _widened(1.0 + threshold, log_halfwidth(slowdown), independent)


def detectable_claim_slowdown(speedup: Interval, independent: bool = True) -> float | None:
    """exp(2h) - 1 of a speedup claim: how much slower than its margin the fast variant must be
    for the claim to FAIL at its error rate (module doc); None where it cannot FAIL."""
    return _widened(1.0, log_halfwidth(speedup), independent)


def _widened(base: float, h: float, independent: bool) -> float | None:
    if not independent or not math.isfinite(h) or h > 300:
        return None
    return base * math.exp(2.0 * h) - 1.0
