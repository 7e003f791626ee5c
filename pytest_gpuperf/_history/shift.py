"""The two-sample rank statistics that confirm a change point and measure it.

``mann_whitney`` is the two-sided Mann-Whitney U test (Mann & Whitney 1947) with mid-ranks for
ties; ``hodges_lehmann`` is the Hodges-Lehmann estimate of the shift between two samples (the
median of all pairwise differences, Hodges & Lehmann 1963) with the distribution-free interval
of Moses (Hollander & Wolfe, *Nonparametric Statistical Methods*, 3rd ed., section 4.3): the
order statistics of those differences that the U distribution puts at the interval's tails.

U's null distribution is exact (the coefficients of the Gaussian binomial coefficient
``[m + n choose m]_q``, computed in floating point and normalised) while the smaller sample has
at most ``EXACT_MAX_SMALL`` values and ``m * n`` is at most ``EXACT_MAX_PAIRS``; beyond, it is
the normal approximation with a continuity correction. Ties make the exact distribution an
approximation too; timings on a continuous scale rarely tie.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["EXACT_MAX_PAIRS", "EXACT_MAX_SMALL", "Shift", "hodges_lehmann", "mann_whitney", "u_cdf"]

EXACT_MAX_SMALL = 40
EXACT_MAX_PAIRS = 200_000


class Shift(NamedTuple):
    """The shift of ``after`` against ``before`` and its interval (``-inf``/``inf`` where the
    samples are too small for a bounded interval at the confidence asked)."""

    estimate: float
    low: float
    high: float


def u_cdf(m: int, n: int) -> npt.NDArray[np.float64] | None:
    """P(U <= u) for u = 0 .. m*n under the null hypothesis; None where the normal
    approximation is used instead (see the module doc)."""
    import numpy as np

    small, large = min(m, n), max(m, n)
    if small > EXACT_MAX_SMALL or m * n > EXACT_MAX_PAIRS:
        return None
    size = small * large + small + 1
    coeffs = np.zeros(size)
    coeffs[0] = 1.0
    for i in range(1, small + 1):
        # times (1 - q^(large + i)), then divided by (1 - q^i): [large + i choose i]_q
        shift = large + i
        coeffs[shift:] -= coeffs[:-shift].copy()
        padded = np.zeros(-(-size // i) * i)
        padded[:size] = coeffs
        coeffs = np.cumsum(padded.reshape(-1, i), axis=0).reshape(-1)[:size]
        coeffs /= coeffs.sum()
    cdf = np.cumsum(coeffs[: m * n + 1])
    return np.asarray(np.minimum(cdf / cdf[-1], 1.0), dtype=np.float64)


def _normal_cdf(u: float, m: int, n: int) -> float:
    mean, sd = m * n / 2.0, math.sqrt(m * n * (m + n + 1) / 12.0)
    return 0.5 * math.erfc(-((u + 0.5 - mean) / sd) / math.sqrt(2.0))


def mann_whitney(before: npt.ArrayLike, after: npt.ArrayLike) -> float:
    """The two-sided p-value of the Mann-Whitney U test that both samples come from one distribution."""
    import numpy as np
    from scipy.stats import rankdata

    a, b = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    m, n = len(a), len(b)
    ranks = rankdata(np.concatenate([a, b]))
    u = float(ranks[:m].sum() - m * (m + 1) / 2.0)  # U of `before`
    cdf = u_cdf(m, n)
    if cdf is None:
        low, high = _normal_cdf(u, m, n), 1.0 - _normal_cdf(u - 1.0, m, n)
    else:
        low = float(cdf[math.floor(u)])
        below = math.ceil(u) - 1
        high = 1.0 - (float(cdf[below]) if below >= 0 else 0.0)
    return min(1.0, 2.0 * min(low, high))


def _tail_rank(m: int, n: int, alpha: float) -> int:
    """C: the largest c with P(U <= c - 1) <= alpha / 2 (0 when even P(U = 0) is above it)."""
    import numpy as np

    cdf = u_cdf(m, n)
    if cdf is None:
        mean, sd = m * n / 2.0, math.sqrt(m * n * (m + n + 1) / 12.0)
        from scipy.stats import norm

        return max(0, math.floor(mean - float(norm.ppf(1.0 - alpha / 2.0)) * sd))
    return int(np.searchsorted(cdf, alpha / 2.0, side="right"))


def hodges_lehmann(before: npt.ArrayLike, after: npt.ArrayLike, confidence: float) -> Shift:
    """The median of all differences ``after[j] - before[i]`` and its ``confidence`` interval:
    the C-th smallest and C-th largest difference (C from ``_tail_rank``), covering the shift
    with probability at least ``confidence`` when the two samples differ by a shift only."""
    import numpy as np

    a, b = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    diffs = np.sort((b[:, None] - a[None, :]).ravel())
    c = _tail_rank(len(a), len(b), 1.0 - confidence)
    estimate = float(np.median(diffs))
    if c < 1:
        return Shift(estimate, -math.inf, math.inf)
    return Shift(estimate, float(diffs[c - 1]), float(diffs[len(diffs) - c]))
