"""Statistics behind every number the plugin prints.

Timings of one run are not independent: a GPU's clocks, temperature and power state move
slowly, and a kernel can hold a level of its own for a while, so consecutive samples are
correlated (lag-1 correlation up to 0.96 was measured on power-capped H100 GEMMs). Every gate
therefore judges a *batch-means* estimate (``batch_estimate``): the series of log-times (or of
per-round log-ratios) is cut into ``BATCHES`` consecutive batches; the estimate is the mean of
the batch medians, and its standard error their standard deviation over sqrt(BATCHES), widened
by sqrt(1 + tau / batch length) for what correlation remains between neighbouring batches, with a
Student t interval on BATCHES - 1 degrees of freedom. ``Estimate.independent`` says whether the
batches may decide a gate: each batch spans at least ``BATCH_FACTOR`` integrated autocorrelation
times tau (estimated directly from the series, ``integrated_time``), and the batch medians pass
von Neumann's test for serial correlation at ``SERIAL_ALPHA`` (``serial_p``); a series whose
level moved during the run fails it. No gate decides on an estimate whose batches are not
independent.

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
BATCH_FACTOR = 2.0  # a batch must span this many integrated autocorrelation times to decide
MIN_BATCH = 2  # samples per batch below which no batch estimate is made
SERIAL_ALPHA = 0.01  # von Neumann's test on the batch medians: below this p, the level moved


@dataclass(frozen=True)
class Estimate:
    """A location on the log scale with a batch-means standard error (see the module doc)."""

    center: float  # mean of the batch medians of the log values
    se: float  # standard error of ``center`` (before ``inflation``)
    df: int  # degrees of freedom of its t interval
    n: int  # values the estimate was made from
    lag1: float = 0.0  # rank lag-1 autocorrelation of the series, clipped to [0, 0.99] (reported only)
    batch_size: int = 0
    needed_batch_size: int = 0  # ceil(BATCH_FACTOR * tau): the batch length that may decide
    batch_low: float = -math.inf  # the lowest and highest batch median (log scale)
    batch_high: float = math.inf
    tau: float = 0.0  # integrated autocorrelation time of the series, in values
    serial_p: float = 1.0  # p-value of von Neumann's test on the batch medians (1: not tested)

    @property
    def independent(self) -> bool:
        """Whether the batches may decide a gate: long enough next to the series' correlation time,
        and their medians free of serial correlation (a level that moved during the run)."""
        return self.batch_size >= self.needed_batch_size and self.serial_p >= SERIAL_ALPHA

    @property
    def level_moved(self) -> bool:
        """Whether the batch medians are serially correlated: the series' level moved during the run."""
        return self.serial_p < SERIAL_ALPHA

    @property
    def inflation(self) -> float:
        """What the standard error is multiplied by: sqrt(1 + tau / batch length). Neighbouring
        batches share about tau / (2 x batch length) of their variance, which the spread of
        the batch medians does not show; the factor covers it (1 for independent values)."""
        if self.batch_size <= 0 or self.tau <= 0:
            return 1.0
        return math.sqrt(1.0 + self.tau / self.batch_size)

    def interval(self, confidence: float) -> Interval:
        """The estimate and its interval on the original (exp) scale, widened by ``inflation``."""
        from scipy import stats as sps  # lazily: loading the plugin must stay cheap

        half = float(sps.t.ppf(0.5 + confidence / 2.0, max(self.df, 1))) * self.se * self.inflation
        return Interval(_exp(self.center), _exp(self.center - half), _exp(self.center + half), confidence)

    def minus(self, other: Estimate) -> Estimate:
        """The difference of two independent estimates (a log-ratio), Welch-style degrees of freedom.

        Each side's standard error enters widened by its own inflation; the difference may decide
        only where both sides may."""
        se = math.hypot(self.se * self.inflation, other.se * other.inflation)
        both = self.independent and other.independent
        return Estimate(
            self.center - other.center,
            se,
            max(1, min(self.df, other.df)),
            min(self.n, other.n),
            max(self.lag1, other.lag1),
            min(self.batch_size, other.batch_size),
            0 if both else max(self.needed_batch_size, other.needed_batch_size, self.batch_size + 1),
            serial_p=min(self.serial_p, other.serial_p),
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
            "tau": self.tau,
            "serial_p": self.serial_p,
        }


def estimate_from_interval(interval: Interval, df: int = 30) -> Estimate:
    """An estimate for a result that stored only a median and its interval (a normal
    approximation on the log scale; its batches are taken to be independent)."""
    se = log_sigma(interval)
    return Estimate(math.log(interval.estimate), se if math.isfinite(se) else 0.0, df, df + 1)


def _normal_scores(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """The values replaced by the normal quantiles of their ranks (robust to outliers), centred."""
    from scipy import stats as sps  # lazily: loading the plugin must stay cheap

    x = np.asarray(values, dtype=np.float64)
    scores = np.asarray(sps.norm.ppf((sps.rankdata(x) - 0.5) / x.size), dtype=np.float64)
    return np.asarray(scores - scores.mean(), dtype=np.float64)


def rank_lag1(values: Sequence[float] | np.ndarray) -> float:
    """Lag-1 autocorrelation of the ranks of ``values`` (robust to outliers), in [-1, 1]."""
    from scipy import stats as sps  # lazily: loading the plugin must stay cheap

    r = sps.rankdata(np.asarray(values, dtype=np.float64))
    r -= r.mean()
    denominator = float((r * r).sum())
    return float((r[1:] * r[:-1]).sum() / denominator) if denominator > 0 else 0.0


def integrated_time(values: Sequence[float] | np.ndarray) -> float:
    """The integrated autocorrelation time 1 + 2 sum_k rho_k of ``values`` (in values, at least 1).

    Geyer's initial monotone sequence estimator (Geyer 1992), on the normal scores of the ranks:
    the autocorrelations are summed in adjacent pairs while the pairs stay positive, each pair
    capped by the one before. It reads the correlation off the series itself at every lag, so a
    level that switches every few hundred values counts in full, where an AR(1) reading of the
    lag-1 correlation would not.
    """
    x = _normal_scores(values)
    n = x.size
    if n < 4:
        return 1.0
    spectrum = np.fft.rfft(x, 2 * n)
    acov = np.fft.irfft(spectrum * np.conj(spectrum), 2 * n)[:n]
    if acov[0] <= 0:
        return 1.0
    rho = acov / acov[0]
    pairs = rho[0 : 2 * ((n - 1) // 2) : 2] + rho[1 : 2 * ((n - 1) // 2) + 1 : 2]
    negative = np.flatnonzero(pairs <= 0)
    positive = np.minimum.accumulate(pairs[: negative[0] if negative.size else pairs.size])
    return max(1.0, float(2.0 * positive.sum() - 1.0))


def batch_time(values: Sequence[float] | np.ndarray, size: int) -> float:
    """The correlation time that the spread of batch medians of ``size`` values implies.

    size x the variance of the batch medians over the variance a median of ``size`` independent
    values would have (pi/2 x the robust variance of single values, from their median absolute
    deviation, over ``size``). Independent values give about 1; a series whose level holds for
    longer than a batch gives batch medians that spread like single values, so ``size`` or more.
    It sees correlation that a series too short for ``integrated_time`` hides (a level switching
    a few times a run), and outliers move neither median.
    """
    x = np.asarray(values, dtype=np.float64)
    batches = x.size // size if size > 0 else 0
    if batches < 2:
        return 1.0
    medians = np.median(x[: batches * size].reshape(batches, size), axis=1)
    mad = float(np.median(np.abs(x - np.median(x))))
    single = (math.pi / 2.0) * (1.4826 * mad) ** 2
    if single <= 0:
        return 1.0
    return max(1.0, size * float(medians.var(ddof=1)) / single)


def von_neumann_p(values: Sequence[float] | np.ndarray) -> float:
    """One-sided p-value of von Neumann's ratio test for positive serial correlation.

    The ratio of the mean squared successive difference to the variance is 2 on average for
    independent values and falls when neighbours are alike (a level that held over several of
    them); its normal approximation, mean 2 and variance 4 (k - 2) / (k^2 - 1) for k values,
    gives the p-value. 1.0 for fewer than 4 values or no spread.
    """
    from scipy import stats as sps  # lazily: loading the plugin must stay cheap

    x = np.asarray(values, dtype=np.float64)
    k = x.size
    spread = float(((x - x.mean()) ** 2).sum())
    if k < 4 or spread <= 0:
        return 1.0
    ratio = float((np.diff(x) ** 2).sum()) / spread
    return float(sps.norm.cdf((ratio - 2.0) / math.sqrt(4.0 * (k - 2) / (k * k - 1))))


def batch_estimate(log_values: Sequence[float] | np.ndarray, batches: int = BATCHES) -> Estimate | None:
    """Batch-means estimate of the location of ``log_values`` (in the order taken); None when
    there are fewer than ``MIN_BATCH`` values per batch. The earliest values that do not fill
    a batch are left out."""
    x = np.asarray(log_values, dtype=np.float64)
    size = x.size // batches
    if size < MIN_BATCH:
        return None
    kept = x[x.size - size * batches :]
    medians = np.median(kept.reshape(batches, size), axis=1)
    tau = max(integrated_time(x), batch_time(kept, size))
    se = float(medians.std(ddof=1)) / math.sqrt(batches)
    return Estimate(
        float(medians.mean()),
        se,
        batches - 1,
        int(x.size),
        min(max(rank_lag1(x), 0.0), 0.99),
        size,
        math.ceil(BATCH_FACTOR * tau),
        float(medians.min()),
        float(medians.max()),
        tau,
        von_neumann_p(medians),
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
    """A run whose batch medians are serially correlated: its level moved during the run."""

    lowest_median: float  # the lowest and highest batch median, as ratios (exp scale)
    highest_median: float
    p_value: float  # von Neumann's test on the batch medians

    def summary(self) -> dict[str, float]:
        return {"lowest_median": self.lowest_median, "highest_median": self.highest_median, "p_value": self.p_value}


def level_shift(estimate: Estimate | None) -> LevelShift | None:
    """The level shift an estimate's batches show, or None (``Estimate.level_moved``).

    A level that one variant holds for a stretch of the run (a clock or power state of its own,
    a placement of its buffers) makes neighbouring batch medians alike; von Neumann's test on
    them rejects independence. Then the spread of the batches is no measure of another run, and
    no gate decides on them.
    """
    if estimate is None or not estimate.level_moved:
        return None
    return LevelShift(_exp(estimate.batch_low), _exp(estimate.batch_high), estimate.serial_p)


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
