"""The change-point method on generated series (pytest_gpuperf/_history/changes.py, shift.py)."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pytest_gpuperf._history.changes import Method, find_steps, noise_sigma
from pytest_gpuperf._history.shift import hodges_lehmann, mann_whitney, tail_rank
from tests.history.conftest import noisy


def test_a_five_percent_step_in_one_percent_noise_is_found_where_it_is_with_its_size() -> None:
    for seed in range(20):
        values = noisy(60, seed)
        values[40:] *= 1.05
        steps = find_steps(values)
        assert [s.index for s in steps] == [40], (seed, steps)
        step = steps[0]
        assert step.low <= 1.05 <= step.high and step.low > 1.01, (seed, step)
        assert step.p_value < 0.01 / 55


def test_pure_noise_has_no_change_over_a_hundred_series() -> None:
    found = [(seed, find_steps(noisy(60, seed))) for seed in range(100)]
    assert [f for f in found if f[1]] == []


def test_heavy_tailed_noise_has_no_change_either() -> None:
    """Student's t with 3 degrees of freedom: outliers a Gaussian would not make."""
    found = [find_steps(0.05 * np.exp(0.01 * np.random.default_rng(seed).standard_t(3, 80))) for seed in range(50)]
    assert not any(found)


def test_a_step_under_the_minimum_size_is_not_reported() -> None:
    values = noisy(60, 7, sigma=0.0005)
    values[30:] *= 1.003
    assert find_steps(values) == []
    small = find_steps(values, Method(min_change=0.001))
    assert [s.index for s in small] == [30] and small[0].low < 1.003 < small[0].high


def test_a_regression_is_found_three_runs_after_it() -> None:
    values = noisy(63, 3)
    values[60:] *= 1.05
    assert [s.index for s in find_steps(values)] == [60]
    assert find_steps(values[:62]) == []  # two runs after it: segments hold at least three


def test_two_steps_and_a_return() -> None:
    values = noisy(90, 11)
    values[30:60] *= 1.08
    steps = find_steps(values)
    assert [s.index for s in steps] == [30, 60]
    assert steps[0].size > 1.05 and steps[1].size < 1 / 1.05


def test_the_noise_estimate_ignores_a_step() -> None:
    logs = np.log(noisy(200, 5))
    stepped = logs.copy()
    stepped[100:] += 0.2
    assert noise_sigma(stepped) == pytest.approx(noise_sigma(logs), rel=0.05)
    assert noise_sigma(logs) == pytest.approx(0.01, rel=0.2)


def test_a_constant_series_and_a_short_one() -> None:
    assert find_steps([1.0] * 40) == []
    assert find_steps([1.0, 2.0, 3.0]) == []
    exact = [1.0] * 20 + [1.1] * 20
    assert [s.index for s in find_steps(exact)] == [20]


def _exact_tail_rank(m: int, n: int, confidence: float) -> int:
    """C from U's exact null distribution, by enumerating every placement of ranks."""
    counts = np.zeros(m * n + 1)
    for chosen in itertools.combinations(range(m + n), m):
        counts[sum(chosen) - m * (m - 1) // 2] += 1
    cdf = np.cumsum(counts) / counts.sum()
    return int(np.searchsorted(cdf, (1 - confidence) / 2, side="right"))


@pytest.mark.parametrize(("m", "n", "confidence"), [(10, 10, 0.95), (8, 12, 0.95), (6, 9, 0.99), (7, 11, 0.99), (3, 3, 0.99)])
def test_moses_rank_is_the_one_of_the_exact_distribution(m: int, n: int, confidence: float) -> None:
    assert tail_rank(m, n, confidence) == _exact_tail_rank(m, n, confidence)


def test_mann_whitney_is_scipys() -> None:
    a, b = [1.0, 1.2, 0.9, 1.1], [2.0, 2.2, 1.9, 2.1, 2.3]
    assert mann_whitney(a, b) == pytest.approx(2 / math.comb(9, 4))


def test_the_hodges_lehmann_interval_covers_the_shift() -> None:
    """Coverage over 400 pairs of samples at 90%: within three standard errors of 0.9."""
    covered = 0
    for seed in range(400):
        rng = np.random.default_rng(seed)
        a, b = rng.normal(0, 1, 8), rng.normal(0.5, 1, 12)
        shift = hodges_lehmann(a, b, 0.9)
        covered += shift.low <= 0.5 <= shift.high
    assert covered / 400 >= 0.9 - 3 * math.sqrt(0.09 / 400)


def test_three_against_three_has_no_bounded_interval_at_99_percent() -> None:
    shift = hodges_lehmann([0.0, 0.1, 0.2], [1.0, 1.1, 1.2], 0.99)
    assert shift.estimate == pytest.approx(1.0) and shift.low == -math.inf and shift.high == math.inf
