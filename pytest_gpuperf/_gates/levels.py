"""Kernels with levels: a time relative to the reference that sits at one of a few values per run.

A power-capped kernel can hold one of two or more levels for a whole run (on H100s, Ping-pong
GEMM at 8192^3 sat either about 7.55 or about 8.85 times the reference GEMM's time, 17% apart,
while the reference and Cooperative did not move). Within a run such a level looks perfectly
stable, so no within-run statistic tells it from a regression, and a single stored baseline
needs a band wider than the distance between the levels. A baseline that stores every level
can be checked to a few percent instead.

Finding levels (``find_levels``), from the calibrated estimates of earlier runs of one variant:
    1. keep the runs whose interval (at ``confidence``) reaches no further than ``band`` from
       their estimate on either side: runs that visited two levels have wide intervals;
    2. sort them and group each run with the first of the current group while it lies within
       ``band`` of it (log scale), else start a new group;
    3. a group of at least ``min_runs`` runs is a level: the mean of its runs' log centres, with
       standard error sqrt((s^2 + mean(se_i^2)) / k) over its k runs (s the spread of the centres,
       se_i each run's own, widened where its batches were correlated) and the runs' summed
       degrees of freedom;
    4. levels less than twice ``band`` apart are a spread of values, not levels (``too_close``):
       a run between them would be within ``band`` of both.

Judging a run against levels L_1 < ... < L_k (``judge_levels``), with θ = max(τ/2, band); "within
θ of L" means between L / (1 + θ) and L (1 + θ). Each level gets the regression rule of
``verdict`` (FAIL and IMPROVED only on independent batches), giving V_i on the interval of
now / L_i; then
    PASS          the run sat at a level: its estimate lies within θ of some level and its interval
                  reaches no further than θ from the estimate on either side; or the run visited
                  two levels: its lowest batch median lies within θ of L_i, its highest within θ of
                  a higher L_j, and its estimate between L_i and L_j; or its estimate lies below
                  L_1 and V_1 is PASS (faster than every level, not established: as against a
                  single baseline, a faster estimate is never undecided)
    IMPROVED      otherwise, every V_i is IMPROVED (the whole interval more than θ below every level)
    FAIL          otherwise, every V_i is FAIL or IMPROVED and one is FAIL: the whole interval lies
                  more than θ from every level, slower than at least one
    INCONCLUSIVE  otherwise: near a level with an interval too wide to place it there, or off every
                  level with an interval that reaches within θ of one
The slowdown reported is against the level the run sits at (the nearest of those it may sit at,
or the nearest it visited), the nearest level below it (FAIL), the fastest level (IMPROVED, or
faster than every level), or the nearest level (INCONCLUSIVE).
A run between two levels is read as the lower level slowed down; a true speed-up of the higher
level that lands there also fails, and its message names both levels. A slowdown that lands
within θ of a higher level (13-20% on the H100 example) is not told from that level. Levels
less than 2θ apart cannot be told apart at that θ: ``too_close`` says so, and the regression
check then does not use them.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_gpuperf._gates.stats import Estimate, Interval
from pytest_gpuperf._gates.verdict import Verdict, regression_threshold, regression_verdict

MIN_RUNS = 2


@dataclass(frozen=True)
class LevelCheck:
    """The verdict against a set of levels and the level it is reported against."""

    verdict: Verdict
    level: int  # index into the levels, fastest first
    slowdown: Interval  # now / that level
    independent: bool


def is_narrow(run: Estimate, confidence: float, band: float) -> bool:
    """Whether ``run``'s interval reaches no further than ``band`` from its estimate on either side."""
    iv = run.interval(confidence)
    return iv.high <= iv.estimate * (1.0 + band) and iv.low >= iv.estimate / (1.0 + band)


def find_levels(
    runs: Sequence[Estimate], confidence: float, band: float, min_runs: int = MIN_RUNS
) -> list[tuple[Estimate, list[int]]]:
    """The levels in ``runs`` (calibrated log estimates of one variant), fastest first, each with
    the indexes of the runs it was made from (see the module doc)."""
    narrow = sorted((i for i, r in enumerate(runs) if is_narrow(r, confidence, band)), key=lambda i: runs[i].center)
    groups: list[list[int]] = []
    for i in narrow:
        if groups and runs[i].center - runs[groups[-1][0]].center <= math.log1p(band):
            groups[-1].append(i)
        else:
            groups.append([i])
    return [(_pooled([runs[i] for i in g]), sorted(g)) for g in groups if len(g) >= min_runs]


def too_close(levels: Sequence[Estimate], band: float) -> float | None:
    """The smallest relative distance between adjacent ``levels`` when it is under twice ``band``, else None."""
    gaps = [math.expm1(b.center - a.center) for a, b in itertools.pairwise(levels)]
    closest = min(gaps, default=math.inf)
    return closest if closest < 2 * band else None


def _pooled(group: Sequence[Estimate]) -> Estimate:
    centers = [r.center for r in group]
    spread = statistics.stdev(centers) if len(centers) > 1 else 0.0
    own = statistics.fmean((r.se * r.inflation) ** 2 for r in group)
    return Estimate(
        statistics.fmean(centers),
        math.sqrt((spread**2 + own) / len(group)),
        sum(r.df for r in group),
        sum(r.n for r in group),
    )


def judge_levels(
    now: Estimate, levels: Sequence[Estimate], confidence: float, tolerance: float, band: float
) -> LevelCheck:
    """``now`` (a calibrated log estimate) against ``levels`` (fastest first), by the module doc's rule."""
    if not levels:
        raise ValueError("judge_levels needs at least one level")
    # A level's standard error already holds its runs' correlation; the batches that decide whether
    # the difference is widened are this run's.
    diffs = [
        dataclasses.replace(now.minus(level), batch_size=now.batch_size, needed_batch_size=now.needed_batch_size)
        for level in levels
    ]
    slowdowns = [d.interval(confidence) for d in diffs]
    verdicts = [regression_verdict(s, tolerance, band, d.independent) for s, d in zip(slowdowns, diffs, strict=True)]
    theta = regression_threshold(tolerance, band)
    reach = math.log1p(theta)
    distance = [abs(d.center) for d in diffs]
    near = [i for i in range(len(levels)) if distance[i] <= reach]
    at = near if is_narrow(now, confidence, theta) else []
    visited = _visited_two(now, levels, reach)
    if at or visited:
        verdict, level = Verdict.PASS, min(at or visited, key=distance.__getitem__)
    elif all(v is Verdict.IMPROVED for v in verdicts):
        verdict, level = Verdict.IMPROVED, 0
    elif now.center < levels[0].center and verdicts[0] is Verdict.PASS:
        verdict, level = Verdict.PASS, 0
    elif all(v in (Verdict.FAIL, Verdict.IMPROVED) for v in verdicts):
        verdict, level = Verdict.FAIL, max(i for i, v in enumerate(verdicts) if v is Verdict.FAIL)
    else:
        verdict, level = Verdict.INCONCLUSIVE, min(range(len(levels)), key=distance.__getitem__)
    return LevelCheck(verdict, level, slowdowns[level], diffs[level].independent)


def _visited_two(now: Estimate, levels: Sequence[Estimate], reach: float) -> list[int]:
    """The levels ``now``'s lowest and highest batch medians sit within ``reach`` (log scale) of, when
    they are two different levels with its estimate between them (a run that moved between levels)."""

    def near(log_value: float) -> list[int]:
        return [i for i, level in enumerate(levels) if abs(log_value - level.center) <= reach]

    for i in near(now.batch_low):
        for j in near(now.batch_high):
            if i < j and levels[i].center <= now.center <= levels[j].center:
                return [i, j]
    return []
