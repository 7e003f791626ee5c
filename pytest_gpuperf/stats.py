"""Statistics behind every number the plugin prints.

- The median of a variant's samples gets a distribution-free confidence interval from
  order statistics (exact for any continuous distribution, no resampling).
- The speed ratio of two variants measured interleaved is the median of the *paired*
  per-round ratios, so slow drift (clocks, temperature) cancels; its interval is the
  percentile bootstrap computed exactly, so the same samples always give the same verdict.
- A ratio against a stored baseline combines both medians' intervals on the log scale.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

@dataclass(frozen=True)
class Interval:
    """A point estimate with a two-sided confidence interval."""

    estimate: float
    low: float
    high: float
    confidence: float

    @property
    def rel_halfwidth(self) -> float:
        """Half the interval's width relative to the estimate (0.01 = ±1%)."""
        if self.estimate == 0:
            return math.inf
        return (self.high - self.low) / (2.0 * abs(self.estimate))

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high


def median_ci(samples: Sequence[float], confidence: float) -> Interval:
    """Median with an order-statistic confidence interval.

    For sorted samples x(1..n), P(x(j) <= median <= x(n-j+1)) = 1 - 2 P(Bin(n, 1/2) <= j-1).
    With too few samples for the requested confidence the interval is the full range.
    """
    from scipy import stats as sps  # lazily: loading the plugin must stay cheap

    x = np.sort(np.asarray(samples, dtype=np.float64))
    n = x.size
    if n == 0:
        raise ValueError("median_ci needs at least one sample")
    med = float(np.median(x))
    alpha = 1.0 - confidence
    k = int(sps.binom.ppf(alpha / 2.0, n, 0.5))
    if k >= 0 and sps.binom.cdf(k, n, 0.5) > alpha / 2.0:
        k -= 1
    if k < 0:
        return Interval(med, float(x[0]), float(x[-1]), confidence)
    return Interval(med, float(x[k]), float(x[n - k - 1]), confidence)


def bootstrap_median_ci(samples: Sequence[float], confidence: float) -> Interval:
    """Percentile-bootstrap interval of the median, computed exactly instead of by resampling.

    A resample's median is the k-th smallest sample x(k) exactly when at least
    m = ceil(n/2) of its n draws are <= x(k), so P(median* <= x(k)) = P(Bin(n, k/n) >= m)
    (Efron 1982). Reading the percentiles off that distribution gives the interval
    infinitely many resamples would give: deterministic, and O(n log n) instead of
    thousands of medians.
    """
    from scipy import stats as sps  # lazily: loading the plugin must stay cheap

    x = np.sort(np.asarray(samples, dtype=np.float64))
    n = x.size
    if n == 0:
        raise ValueError("bootstrap_median_ci needs at least one sample")
    est = float(np.median(x))
    if n < 3:
        return Interval(est, float(x[0]), float(x[-1]), confidence)
    p = np.arange(1, n + 1) / n
    alpha = 1.0 - confidence
    # P(median* <= x(k)) = P(Bin(n, k/n) >= m): m = ceil(n/2) for the lower median,
    # floor(n/2) + 1 for the upper; for even n the low end uses the lower median and the
    # high end the upper one, so neither end is biased toward a verdict.
    cdf_lower = sps.binom.sf((n + 1) // 2 - 1, n, p)
    cdf_upper = sps.binom.sf(n // 2, n, p)
    lo = int(np.searchsorted(cdf_lower, alpha / 2.0, side="left"))
    hi = int(np.searchsorted(cdf_upper, 1.0 - alpha / 2.0, side="left"))
    return Interval(est, float(x[min(lo, n - 1)]), float(x[min(hi, n - 1)]), confidence)


def paired_ratios(numerator: Sequence[float], denominator: Sequence[float]) -> np.ndarray:
    """The paired ratios numerator[i] / denominator[i], in the order taken."""
    num = np.asarray(numerator, dtype=np.float64)
    den = np.asarray(denominator, dtype=np.float64)
    if num.shape != den.shape or num.size == 0:
        raise ValueError("paired_ratios needs two equally long, non-empty sample lists")
    return num / den


@dataclass(frozen=True)
class LevelShift:
    """Consecutive stretches of one run whose medians differ beyond chance."""

    lowest_median: float
    highest_median: float
    p_value: float

    def summary(self) -> dict[str, float]:
        return {"lowest_median": self.lowest_median, "highest_median": self.highest_median, "p_value": self.p_value}


def level_shift(
    samples: Sequence[float], parts: int = 4, alpha: float = 1e-3, min_effect: float = 0.02
) -> LevelShift | None:
    """Whether ``samples`` (in the order taken) moved between levels during the run.

    The run (at least 7 samples per stretch, so the sampler's 30-sample minimum is judged) is
    cut into ``parts`` consecutive stretches. A shift is reported when a
    Kruskal-Wallis test rejects "all stretches share one distribution" at ``alpha`` and the
    stretches' medians differ by at least ``min_effect`` (relative). Independent noise
    triggers it with probability below ``alpha``. A GPU whose clocks or power state switch
    between levels (a power-capped GEMM on an H100) triggers it, and then no interval of this
    run describes another run on another chip.
    """
    from scipy import stats as sps  # lazily: loading the plugin must stay cheap

    x = np.asarray(samples, dtype=np.float64)
    if parts < 2 or x.size < 7 * parts:
        return None
    stretches = np.array_split(x, parts)
    medians = [float(np.median(s)) for s in stretches]
    low, high = min(medians), max(medians)
    if low <= 0 or high / low - 1.0 < min_effect:
        return None
    p_value = float(sps.kruskal(*stretches).pvalue)
    return LevelShift(low, high, p_value) if p_value < alpha else None


def log_sigma(interval: Interval) -> float:
    """Standard error of log(estimate) implied by a symmetric-on-log-scale interval."""
    from scipy import stats as sps  # lazily: loading the plugin must stay cheap

    z = sps.norm.ppf(0.5 + interval.confidence / 2.0)
    if interval.low <= 0 or interval.high <= 0:
        return math.inf
    return (math.log(interval.high) - math.log(interval.low)) / (2.0 * z)


def ratio_of_medians_ci(now: Interval, before: Interval, confidence: float, extra_sigma: float = 0.0) -> Interval:
    """now / before for two independent medians, combining their uncertainty on the log scale.

    ``extra_sigma`` adds, in quadrature, a relative spread neither interval can see: the drift
    between runs and between physical GPUs of one model (measured 1-3% on H200s).
    """
    from scipy import stats as sps  # lazily: loading the plugin must stay cheap

    sigma = math.sqrt(log_sigma(now) ** 2 + log_sigma(before) ** 2 + math.log1p(extra_sigma) ** 2)
    z = sps.norm.ppf(0.5 + confidence / 2.0)
    log_r = math.log(now.estimate) - math.log(before.estimate)
    return Interval(math.exp(log_r), math.exp(log_r - z * sigma), math.exp(log_r + z * sigma), confidence)


def relative_spread(samples: Sequence[float]) -> float:
    """Interquartile range over the median: a robust noise figure (0.01 = 1%)."""
    x = np.asarray(samples, dtype=np.float64)
    q1, med, q3 = np.percentile(x, [25, 50, 75])
    return float((q3 - q1) / med) if med else math.inf
