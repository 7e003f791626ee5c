"""Per-test budgets that reach a target detectable slowdown within a total of GPU seconds.

A ``gpu_perf(budget=...)`` marker sits on a test function, so a budget is proposed per function:
the most data any of its checks needs to catch the target (``Check.data_needed``), at least
``min_budget`` (a shorter run cannot see a level that holds longer) and at most ``max_budget``; a
check that needs more, or that no budget brings to the target (its band, or its stored
baseline's own interval), is listed as unreachable and does not set its function's budget. The
plan's GPU seconds are the sum of its timed units' (``checks.Unit.planned_s``).

With a total, the plan takes the smallest common target, from the one asked for upwards in steps
of ``STEP`` up to ``HIGHEST_TARGET``, whose GPU seconds fit in it; when none fits, the plan is
``min_budget`` everywhere and says that it does not fit.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pytest_gpuperf._plan.checks import Check, Unit

__all__ = ["FunctionPlan", "Plan", "make_plan"]

STEP = 0.001
HIGHEST_TARGET = 0.5


@dataclass(frozen=True)
class FunctionPlan:
    function: str
    checks: tuple[Check, ...]
    units: tuple[Unit, ...]
    budget: float  # proposed
    unreachable: tuple[Check, ...]

    @property
    def budget_now(self) -> float:
        return max((u.budget_s for u in self.units), default=0.0)

    @property
    def gpu_now(self) -> float:
        return sum(u.gpu_s for u in self.units)

    @property
    def gpu_planned(self) -> float:
        return sum(u.planned_s(self.budget) for u in self.units)

    def worst_now(self) -> float | None:
        """The largest detectable slowdown among its checks as run (None: one could not decide)."""
        return _worst(c.detectable_at(c.data_s) for c in self.checks)

    def worst_then(self) -> float | None:
        """The same at the proposed budget, over the checks that can reach the target."""
        return _worst(c.detectable_at(self.budget) for c in self.checks if c not in self.unreachable)

    @property
    def reachable(self) -> int:
        return len(self.checks) - len(self.unreachable)


@dataclass(frozen=True)
class Plan:
    target: float  # the target asked for
    reached: float  # the target the budgets reach (above ``target`` when the total did not allow it)
    total: float | None
    fits: bool  # the planned GPU seconds are within ``total`` (True without one)
    functions: tuple[FunctionPlan, ...]

    @property
    def gpu_now(self) -> float:
        return sum(f.gpu_now for f in self.functions)

    @property
    def gpu_planned(self) -> float:
        return sum(f.gpu_planned for f in self.functions)


def make_plan(
    checks: Sequence[Check],
    units: Sequence[Unit],
    target: float,
    total: float | None = None,
    min_budget: float = 1.0,
    max_budget: float = 30.0,
) -> Plan:
    by_function: dict[str, list[Check]] = defaultdict(list)
    for c in checks:
        by_function[c.function].append(c)
    units_of: dict[str, list[Unit]] = defaultdict(list)
    for u in units:
        units_of[u.function].append(u)
    names = sorted(set(by_function) | set(units_of))

    def at(goal: float, fixed: float | None = None) -> Plan:
        functions = tuple(_function(n, by_function[n], units_of[n], goal, min_budget, max_budget, fixed) for n in names)
        planned = sum(f.gpu_planned for f in functions)
        return Plan(target, goal, total, total is None or planned <= total, functions)

    goal = target
    plan = at(goal)
    while not plan.fits and goal < HIGHEST_TARGET:
        goal = round(goal + STEP, 6)
        plan = at(goal)
    return plan if plan.fits else at(target, fixed=min_budget)


def _function(
    name: str,
    checks: list[Check],
    units: list[Unit],
    goal: float,
    min_budget: float,
    max_budget: float,
    fixed: float | None,
) -> FunctionPlan:
    needed: list[float] = []
    unreachable: list[Check] = []
    for c in checks:
        seconds = c.data_needed(goal)
        if seconds is None or seconds > max_budget:
            unreachable.append(c)
        else:
            needed.append(seconds)
    budget = fixed if fixed is not None else max([min_budget, *needed])
    return FunctionPlan(name, tuple(checks), tuple(units), math.ceil(budget * 100) / 100, tuple(unreachable))


def _worst(values: Iterable[float | None]) -> float | None:
    found = list(values)
    if any(v is None for v in found):
        return None
    return max((v for v in found if v is not None), default=0.0)
