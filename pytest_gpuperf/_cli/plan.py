"""``gpuperf plan REPORT... [--target 3%] [--budget 240s]``: per-test budgets that reach a target
detectable slowdown within a total of GPU seconds, from the noise the reports measured
(``_plan.checks`` models each check, ``_plan.allocate`` chooses the budgets)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_gpuperf._plan.allocate import Plan, make_plan
from pytest_gpuperf._plan.checks import Check, Unit, checks_of, units_of
from pytest_gpuperf._report.render import report_records
from pytest_gpuperf._report.table import markdown_table, text_table
from pytest_gpuperf._store.reports import load_report

if TYPE_CHECKING:
    from pytest_gpuperf._cli.arguments import Subparsers

LISTED = 5  # unreachable checks named per reason in the text output


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "plan",
        help="propose per-test budgets (gpu_perf(budget=...)) that reach a target detectable slowdown "
        "within a total of GPU seconds, from saved reports",
    )
    p.add_argument("reports", nargs="+", metavar="REPORT", help="saved --gpu-perf-json reports (.json or .json.gz)")
    p.add_argument(
        "--target", type=_fraction, default=0.03, metavar="PCT", help="detectable slowdown to reach, e.g. 3%% (default)"
    )
    p.add_argument(
        "--budget", type=_seconds, metavar="SECONDS", help="total GPU seconds for the timed tests, e.g. 240s"
    )
    p.add_argument("--min-budget", type=_seconds, default=1.0, metavar="SECONDS", help="least budget per test (1 s)")
    p.add_argument("--max-budget", type=_seconds, default=30.0, metavar="SECONDS", help="most budget per test (30 s)")
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    # By place and its occurrence in the report: a variant may be checked twice.
    checks: dict[tuple[str, int], Check] = {}
    units: dict[str, list[Unit]] = {}
    for path in args.reports:
        data = load_report(Path(path))
        budget, tolerance = _setting(data, "budget", 1.0), _setting(data, "tolerance", 0.05)
        records = report_records(data)
        seen: dict[str, int] = {}
        for c in checks_of(records, budget, tolerance):
            key = (c.where, seen.setdefault(c.where, 0))
            seen[c.where] += 1
            if key not in checks or c.h0 > checks[key].h0:  # the noisiest run of each check
                checks[key] = c
        by_function: dict[str, list[Unit]] = {}
        for u in units_of(records, budget):
            by_function.setdefault(u.function, []).append(u)
        units.update(by_function)  # a later report's units replace an earlier one's
    plan = make_plan(
        list(checks.values()),
        [u for us in units.values() for u in us],
        args.target,
        args.budget,
        args.min_budget,
        args.max_budget,
    )
    if args.format == "json":
        json.dump(plan_json(plan), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write("\n".join(plan_lines(plan, len(args.reports), markdown=args.format == "markdown")) + "\n")
    return 0


def plan_lines(plan: Plan, reports: int, markdown: bool = False) -> list[str]:
    checks = sum(len(f.checks) for f in plan.functions)
    lines = [
        f"gpuperf plan: {checks} checks in {len(plan.functions)} test functions, from {reports} report(s); "
        f"target: a detectable slowdown of {_pct(plan.target)}"
    ]
    if plan.total is not None and not plan.fits:
        lines.append(
            f"no plan fits {plan.total:g} GPU s: even the least budget everywhere takes {plan.gpu_planned:.0f} s"
        )
    elif plan.reached > plan.target:
        lines.append(f"within {plan.total:g} GPU s the budgets reach {_pct(plan.reached)}, not {_pct(plan.target)}")
    lines.append(
        f"GPU seconds: {plan.gpu_now:.1f} as run, {plan.gpu_planned:.1f} planned (each timed unit as run, plus "
        "the change in its seconds of data: an upper bound where sampling stopped before its budget)"
    )
    rows = [["test function", "checks", "budget now", "proposed", "worst now", "worst then", "GPU s now", "planned"]]
    for f in plan.functions:
        rows.append(
            [
                f.function,
                str(len(f.checks)),
                f"{f.budget_now:g} s",
                f"{f.budget:g} s",
                _pct_or_none(f.worst_now()) if f.checks else "-",
                (_pct_or_none(f.worst_then()) if f.reachable else "-")
                + (f" ({len(f.unreachable)} unreachable)" if f.unreachable else ""),
                f"{f.gpu_now:.1f}",
                f"{f.gpu_planned:.1f}",
            ]
        )
    lines += ["", *(markdown_table(rows, right=(1, 6, 7), code=(0,)) if markdown else text_table(rows)).splitlines()]
    unreachable = [c for f in plan.functions for c in f.unreachable]
    if unreachable:
        lines += ["", f"{len(unreachable)} check(s) cannot catch {_pct(plan.reached)} at any budget up to the most:"]
        by_reason: dict[str, list[Check]] = {}
        for c in unreachable:
            by_reason.setdefault(c.unreachable_because(plan.reached).kind, []).append(c)
        for group in by_reason.values():
            lines.append(f"  {len(group)} where {group[0].unreachable_because(plan.reached).why}; e.g.")
            lines += [f"    {c.where} ({c.kind}): {c.unreachable_because(plan.reached).figure}" for c in group[:LISTED]]
            if len(group) > LISTED:
                lines.append(f"    ... and {len(group) - LISTED} more (--format json lists them all)")
    assumed = [c for f in plan.functions for c in f.checks if not c.modelled]
    if assumed:
        lines += [
            "",
            f"{len(assumed)} check(s) lacked an estimate in the report: their whole interval is taken to narrow",
        ]
    changed = [f for f in plan.functions if f.units and abs(f.budget - f.budget_now) > 1e-9]
    if changed:
        lines += ["", "markers to set (on each test function):"]
        lines += [f"  {f.function}: @pytest.mark.gpu_perf(budget={f.budget:g})" for f in changed]
    return lines


def plan_json(plan: Plan) -> dict[str, Any]:
    return {
        "target": plan.target,
        "reached": plan.reached,
        "total_gpu_seconds": plan.total,
        "fits": plan.fits,
        "gpu_seconds_now": plan.gpu_now,
        "gpu_seconds_planned": plan.gpu_planned,
        "functions": [
            {
                "function": f.function,
                "budget_now": f.budget_now,
                "budget": f.budget,
                "worst_detectable_now": f.worst_now(),
                "worst_detectable_then": f.worst_then(),
                "gpu_seconds_now": f.gpu_now,
                "gpu_seconds_planned": f.gpu_planned,
                "checks": [c.where for c in f.checks],
                "unreachable": [
                    {"where": c.where, **c.unreachable_because(plan.reached)._asdict()} for c in f.unreachable
                ],
            }
            for f in plan.functions
        ],
    }


def _setting(data: Mapping[str, Any], name: str, default: float) -> float:
    settings = data.get("settings")
    try:
        return float(settings[name]) if isinstance(settings, Mapping) and name in settings else default
    except (TypeError, ValueError):
        return default


def _fraction(text: str) -> float:
    """``3%`` or ``0.03``."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a percentage such as 3% or a fraction such as 0.03, got {text!r}"
        ) from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must lie between 0% and 100%, got {text!r}")
    return value


def _seconds(text: str) -> float:
    """``240s`` or ``240``."""
    try:
        value = float(text[:-1] if text.endswith("s") else text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds such as 240s, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text!r}")
    return value


def _pct(x: float) -> str:
    return f"{100 * x:.3g}%"


def _pct_or_none(x: float | None) -> str:
    return "none (undecidable)" if x is None else _pct(x)
