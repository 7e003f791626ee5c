"""Statistics behind every number the plugin prints.

Timings of one run are not independent: a GPU's clocks, temperature and power state move
slowly, so consecutive samples are correlated (lag-1 correlation up to 0.96 was measured on
power-capped H100 GEMMs). Every gate therefore judges a *batch-means* estimate
(``batch_estimate``): the series of log-times (or of per-round log-ratios) is cut into
``BATCHES`` consecutive batches; the estimate is the mean of the batch medians, and its
standard error their standard deviation over sqrt(BATCHES), with a Student t interval on
BATCHES - 1 degrees of freedom. Batches far longer than the series' correlation time are
nearly independent, so the interval holds; ``Estimate.independent`` says whether they are
(batch length >= ``BATCH_FACTOR`` times the integrated autocorrelation time implied by the
series' rank lag-1 autocorrelation), and no gate decides on an estimate where they are not.

- The median of a variant's samples also gets a distribution-free order-statistic interval
  (``median_ci``), reported for runs too short to cut into batches.
- A ratio against a stored baseline combines both estimates' standard errors on the log scale.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

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


def _exp(x: float) -> float:
    """exp(x), infinite past the float range (an interval of a wildly uncertain stored estimate)."""
    return math.exp(x) if x < 709.0 else math.inf


BATCHES = 10  # consecutive batches of one series
BATCH_FACTOR = 6.0  # a batch must span this many integrated autocorrelation times
MIN_BATCH = 2  # samples per batch below which no batch estimate is made


@dataclass(frozen=True)
class Estimate:
    """A location on the log scale with a batch-means standard error (see the module doc)."""

    center: float  # mean of the batch medians of the log values
    se: float  # standard error of ``center``
    df: int  # degrees of freedom of its t interval
    n: int  # values the estimate was made from
    lag1: float = 0.0  # rank lag-1 autocorrelation of the series, clipped to [0, 0.99]
    batch_size: int = 0
    needed_batch_size: int = 0
    batch_low: float = -math.inf  # the lowest and highest batch median (log scale)
    batch_high: float = math.inf

    @property
    def independent(self) -> bool:
        """Whether the batches are long enough next to the series' correlation time."""
        return self.batch_size >= self.needed_batch_size

    @property
    def inflation(self) -> float:
        """What the standard error is multiplied by: sqrt(needed / actual batch length) when the
        batches are too short to be independent (a batch mean's variance falls in proportion to
        its length once batches are long enough), else 1."""
        if self.independent or self.batch_size <= 0:
            return 1.0
        return math.sqrt(self.needed_batch_size / self.batch_size)

    def interval(self, confidence: float) -> Interval:
        """The estimate and its interval on the original (exp) scale, widened by ``inflation``."""
        from scipy import stats as sps  # lazily: loading the plugin must stay cheap

        half = float(sps.t.ppf(0.5 + confidence / 2.0, max(self.df, 1))) * self.se * self.inflation
        return Interval(_exp(self.center), _exp(self.center - half), _exp(self.center + half), confidence)

    def minus(self, other: Estimate) -> Estimate:
        """The difference of two independent estimates (a log-ratio), Welch-style degrees of freedom."""
        se = math.hypot(self.se, other.se)
        return Estimate(
            self.center - other.center,
            se,
            max(1, min(self.df, other.df)),
            min(self.n, other.n),
            max(self.lag1, other.lag1),
            min(self.batch_size, other.batch_size),
            max(self.needed_batch_size, other.needed_batch_size),
        )  # the batches of two runs do not pair up: no batch range for a difference

    def summary(self) -> dict[str, float]:
        return {
            "log_center": self.center,
            "log_se": self.se,
            "df": self.df,
            "n": self.n,
            "lag1": self.lag1,
            "batch_size": self.batch_size,
            "needed_batch_size": self.needed_batch_size,
            "batch_low": self.batch_low,
            "batch_high": self.batch_high,
        }


def estimate_from_interval(interval: Interval, df: int = 30) -> Estimate:
    """An estimate for a result that stored only a median and its interval (a normal
    approximation on the log scale; its batches are taken to be independent)."""
    se = log_sigma(interval)
    return Estimate(math.log(interval.estimate), se if math.isfinite(se) else 0.0, df, df + 1)


def rank_lag1(values: Sequence[float] | np.ndarray) -> float:
    """Lag-1 autocorrelation of the ranks of ``values`` (robust to outliers), in [-1, 1]."""
    from scipy import stats as sps  # lazily: loading the plugin must stay cheap

    r = sps.rankdata(np.asarray(values, dtype=np.float64))
    r -= r.mean()
    denominator = float((r * r).sum())
    return float((r[1:] * r[:-1]).sum() / denominator) if denominator > 0 else 0.0


def batch_estimate(log_values: Sequence[float] | np.ndarray, batches: int = BATCHES) -> Estimate | None:
    """Batch-means estimate of the location of ``log_values`` (in the order taken); None when
    there are fewer than ``MIN_BATCH`` values per batch. The earliest values that do not fill
    a batch are left out."""
    x = np.asarray(log_values, dtype=np.float64)
    size = x.size // batches
    if size < MIN_BATCH:
        return None
    medians = np.median(x[x.size - size * batches :].reshape(batches, size), axis=1)
    rho = min(max(rank_lag1(x), 0.0), 0.99)
    needed = math.ceil(BATCH_FACTOR * (1.0 + rho) / (1.0 - rho))
    se = float(medians.std(ddof=1)) / math.sqrt(batches)
    return Estimate(
        float(medians.mean()),
        se,
        batches - 1,
        int(x.size),
        rho,
        size,
        needed,
        float(medians.min()),
        float(medians.max()),
    )


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

    z = float(sps.norm.ppf(0.5 + interval.confidence / 2.0))
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
