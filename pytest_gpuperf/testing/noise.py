"""Time-indexed noise for the fake backend: what real GPU timings do, one model per effect.

Every model returns, for a sequence of samples in the order they were taken, the log of the
factor each sample's time is multiplied by. Models keep their state between calls, so a run
is one continuous process in simulated time; compose several by listing them. A model is
*shared* when one process acts on every variant alike (a GPU clock, the machine), or per
variant when each variant has its own (a kernel's power-capped level, its own jitter).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

__all__ = [
    "Noise",
    "Lognormal",
    "StudentT",
    "Outliers",
    "Drift",
    "AR1",
    "TwoLevel",
    "MachineOffset",
    "MachineScale",
    "Step",
    "Alternating",
]


class Noise(Protocol):
    def log_factors(self, names: Sequence[str], times: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """log(factor) of each sample; ``names[i]`` is its variant, ``times[i]`` its start in seconds."""


@dataclass
class Lognormal:
    """Independent per-sample jitter, log-normal with sigma ``sigma``."""

    sigma: float

    def log_factors(self, names: Sequence[str], times: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return rng.normal(0.0, self.sigma, len(names))


@dataclass
class StudentT:
    """Heavy-tailed independent jitter: ``scale`` times a Student t with ``df`` degrees of freedom."""

    df: float = 3.0
    scale: float = 0.01

    def log_factors(self, names: Sequence[str], times: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return self.scale * rng.standard_t(self.df, len(names))


@dataclass
class Outliers:
    """A fraction ``rate`` of samples take ``factor`` times as long (a preempted replay)."""

    rate: float = 0.02
    factor: float = 1.5

    def log_factors(self, names: Sequence[str], times: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return np.where(rng.random(len(names)) < self.rate, math.log(self.factor), 0.0)


@dataclass
class Drift:
    """Every variant slows by ``per_second`` (relative) per simulated second: heating, a slow clock change."""

    per_second: float

    def log_factors(self, names: Sequence[str], times: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return np.log1p(self.per_second * np.asarray(times))


@dataclass
class AR1:
    """Autocorrelated jitter: x_k = rho x_(k-1) + e_k with stationary sigma ``sigma``, stepping once
    per sample of the same variant (``shared=False``) or once per sample of any (``shared=True``)."""

    rho: float
    sigma: float = 0.01
    shared: bool = False
    _state: dict[str, float] = field(default_factory=dict, repr=False)

    def log_factors(self, names: Sequence[str], times: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        from scipy.signal import lfilter

        out = np.zeros(len(names))
        keys = ["*"] * len(names) if self.shared else list(names)
        innovation = self.sigma * math.sqrt(1.0 - self.rho**2)
        for key in dict.fromkeys(keys):
            idx = np.array([i for i, k in enumerate(keys) if k == key])
            e = rng.normal(0.0, innovation, idx.size)
            if key not in self._state:
                self._state[key] = float(rng.normal(0.0, self.sigma))
                e[0] = self._state[key] - self.rho * self._state[key]  # start in the stationary state
            x, _ = lfilter([1.0], [1.0, -self.rho], e, zi=[self.rho * self._state[key]])
            self._state[key] = float(x[-1])
            out[idx] = x
        return out


@dataclass
class TwoLevel:
    """A clock or power state that switches between two levels ``ratio`` apart.

    Markov switching (``switch_probability`` per sample) or power-cap-like dwell (levels held for
    exponentially distributed times of mean ``dwell_s`` simulated seconds); one level process for
    every variant (``shared=True``, a GPU clock) or one per variant, or for ``variant`` alone.
    """

    ratio: float = 1.1
    switch_probability: float | None = None
    dwell_s: float | None = None
    shared: bool = True
    variant: str | None = None  # only this variant has the levels (a kernel's own power-capped level)
    _level: dict[str, int] = field(default_factory=dict, repr=False)
    _next_switch: dict[str, float] = field(default_factory=dict, repr=False)

    def log_factors(self, names: Sequence[str], times: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        out = np.zeros(len(names))
        keys = ["*"] * len(names) if self.shared else list(names)
        for i, key in enumerate(keys):
            if self.variant is not None and names[i] != self.variant:
                continue
            if key not in self._level:
                self._level[key] = int(rng.integers(2))
                if self.dwell_s is not None:
                    self._next_switch[key] = float(times[i]) + rng.exponential(self.dwell_s)
            if self.dwell_s is not None:
                while times[i] >= self._next_switch[key]:
                    self._level[key] ^= 1
                    self._next_switch[key] += rng.exponential(self.dwell_s)
            elif self.switch_probability and rng.random() < self.switch_probability:
                self._level[key] ^= 1
            out[i] = self._level[key] * math.log(self.ratio)
        return out


@dataclass
class MachineOffset:
    """This machine runs every kernel, references included, ``factor`` times as long as the one the
    baselines were recorded on (a slower chip of the same model, another power cap)."""

    factor: float

    def log_factors(self, names: Sequence[str], times: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return np.full(len(names), math.log(self.factor))


@dataclass
class MachineScale:
    """This machine runs each kernel ``factors[name]`` times as long as the one the baselines were
    recorded on (``default`` for kernels not named): kernels bound by different units (copy
    bandwidth, tensor cores, neither) move by different amounts between chips of one model, so a
    kernel and its reference need not move alike."""

    factors: Mapping[str, float]
    default: float = 1.0

    def log_factors(self, names: Sequence[str], times: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return np.log([self.factors.get(name, self.default) for name in names])


@dataclass
class Step:
    """``variant`` takes ``factor`` times as long from ``from_s`` simulated seconds on."""

    variant: str
    factor: float
    from_s: float

    def log_factors(self, names: Sequence[str], times: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        hit = (np.asarray(names) == self.variant) & (np.asarray(times) >= self.from_s)
        return np.where(hit, math.log(self.factor), 0.0)


@dataclass
class Alternating:
    """``variant`` takes ``factor`` times as long in every other ``period_s`` of simulated time
    (a square wave: a kernel whose power-capped clock flips between two levels on a schedule)."""

    variant: str
    factor: float
    period_s: float

    def log_factors(self, names: Sequence[str], times: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        slow = (np.asarray(names) == self.variant) & ((np.asarray(times) // self.period_s) % 2 == 1)
        return np.where(slow, math.log(self.factor), 0.0)
