"""The two-sample rank statistics that confirm a change point and measure it.

``mann_whitney`` is SciPy's two-sided Mann-Whitney U test (``scipy.stats.mannwhitneyu``, method
"auto": the exact distribution for small samples without ties, else the normal approximation).
``hodges_lehmann`` is the Hodges-Lehmann estimate of the shift between two samples (the median of
all pairwise differences, Hodges & Lehmann 1963) with Moses' distribution-free interval
(Hollander & Wolfe, *Nonparametric Statistical Methods*, 3rd ed., section 4.3): the C-th smallest
and C-th largest of those differences, C from U's exact distribution (SciPy's, where m n is at
most ``EXACT_MAX_PAIRS``) or else its normal approximation, floor(mn/2 - z sqrt(mn(m + n + 1)/12))
with z the normal quantile of (1 + confidence)/2.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = ["EXACT_MAX_PAIRS", "Shift", "hodges_lehmann", "mann_whitney", "tail_rank"]


class Shift(NamedTuple):
    """The shift of ``after`` against ``before`` and its interval (``-inf``/``inf`` where the
    samples are too small for a bounded interval at the confidence asked)."""

    estimate: float
    low: float
    high: float


def mann_whitney(before: npt.ArrayLike, after: npt.ArrayLike) -> float:
    """The two-sided p-value of the Mann-Whitney U test that both samples come from one distribution."""
    from scipy.stats import mannwhitneyu

    return float(mannwhitneyu(before, after, alternative="two-sided", method="auto").pvalue)


EXACT_MAX_PAIRS = 10_000  # m * n up to which C comes from U's exact distribution


@functools.cache
def tail_rank(m: int, n: int, confidence: float) -> int:
    """C of Moses' interval (module doc): the largest c with P(U <= c - 1) <= (1 - confidence) / 2;
    below 1 where no bounded interval exists."""
    alpha = (1.0 - confidence) / 2.0
    if m * n > EXACT_MAX_PAIRS:
        from scipy.stats import norm

        z = float(norm.ppf(1.0 - alpha))
        return math.floor(m * n / 2.0 - z * math.sqrt(m * n * (m + n + 1) / 12.0))
    low, high = 0, m * n // 2 + 1  # P(U <= low - 1) = 0 <= alpha; past the middle it exceeds alpha
    while high - low > 1:
        c = (low + high) // 2
        if _u_at_most(c - 1, m, n) <= alpha:
            low = c
        else:
            high = c
    return low


def _u_at_most(u: int, m: int, n: int) -> float:
    """P(U <= u) under the null hypothesis, from SciPy's exact distribution: two samples built to
    have U = u (each of the m values above as many of the n as the count it is given)."""
    if u < 0:
        return 0.0
    from scipy.stats import mannwhitneyu

    above = [min(n, max(0, u - i * n)) for i in range(m)]  # m counts of values beaten, summing to u
    before = [k - 0.5 for k in above]
    after = [float(j) for j in range(n)]
    return float(mannwhitneyu(before, after, alternative="less", method="exact").pvalue)


def hodges_lehmann(before: npt.ArrayLike, after: npt.ArrayLike, confidence: float) -> Shift:
    """The median of all differences ``after[j] - before[i]`` and its ``confidence`` interval
    (module doc), covering the shift when the two samples differ by a shift only."""
    import numpy as np

    a, b = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    diffs = np.sort((b[:, None] - a[None, :]).ravel())
    c = tail_rank(len(a), len(b), confidence)
    estimate = float(np.median(diffs))
    if c < 1:
        return Shift(estimate, -math.inf, math.inf)
    return Shift(estimate, float(diffs[c - 1]), float(diffs[len(diffs) - c]))
