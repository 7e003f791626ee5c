"""``gpuperf levels``: the levels of each calibrated variant in saved reports, found by
``_gates.levels.find_levels`` and, with ``--write``, stored in its baseline entry (``_store.levels``).

The reports are runs of unchanged code (A/A runs, ideally on several machines of one GPU model).
The levels of every variant with two or more levels at least twice the band apart are stored; a
variant seen at one level keeps its single baseline: storing one level would fail the first run
at another.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_gpuperf._cli.arguments import CommandLineError, setting_type
from pytest_gpuperf._gates.levels import MIN_RUNS, find_levels, is_narrow, too_close
from pytest_gpuperf._gates.stats import Estimate
from pytest_gpuperf._plugin.options import BY_NAME
from pytest_gpuperf._store.baselines import BaselineEntry, BaselineStore, module_file_name, parse_estimate
from pytest_gpuperf._store.jsonio import finite_number
from pytest_gpuperf._store.layout import DEFAULT_DIR
from pytest_gpuperf._store.levels import Placed, levels_json, source_of
from pytest_gpuperf._store.reports import load_report
from pytest_gpuperf.errors import GpuPerfError

if TYPE_CHECKING:
    from pytest_gpuperf._cli.arguments import Subparsers


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "levels",
        help="find the levels of kernels that hold one of a few times per run; store them in their baselines",
        description="Read saved --gpu-perf-json reports of several runs (A/A runs of unchanged code, on several "
        "machines of one GPU model) and find, for each variant calibrated against a reference kernel, the levels "
        "its time relative to the reference sat at: runs whose interval reaches no further than --band from their "
        "estimate, grouped within --band; a group of --min-runs or more runs is a level. With --write, the levels of "
        "every variant that has two or more, at least twice --band apart, are stored in its baseline entry; its "
        "regression check then passes a run that sits at a level (within --gpu-perf-level-noise, with an interval as "
        "narrow) or across two, and fails one clear of every level and slower than one (docs/statistics.md). A report "
        "given twice counts once. Exit 1 when --write could not store a variant's levels.",
    )
    p.add_argument("reports", nargs="+", metavar="REPORT", help="a saved report (.json or .json.gz)")
    p.add_argument(
        "--dir", default=DEFAULT_DIR, metavar="DIR", help=f"baseline folder to store levels in (default: {DEFAULT_DIR})"
    )
    p.add_argument(
        "--band",
        type=setting_type("level-noise"),
        default=BY_NAME["level-noise"].default,
        metavar="FRACTION",
        help="how narrow a run must be, and how close to a level's first run (default: %(default)g)",
    )
    p.add_argument(
        "--min-runs", type=_at_least_two, default=2, metavar="N", help="runs that make a level (default: %(default)s)"
    )
    p.add_argument(
        "--only", action="append", metavar="GLOB", help="only the keys (test::variant) that match; repeat for more"
    )
    p.add_argument("--write", action="store_true", help="store the levels found in the baseline entries")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    text, status = command(
        [Path(r) for r in args.reports],
        Path(args.dir),
        band=args.band,
        min_runs=args.min_runs,
        only=args.only or (),
        write=args.write,
    )
    sys.stdout.write(text)
    return status


def _at_least_two(text: str) -> int:
    value = int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"must be at least 2 runs, got {value}")
    return value


@dataclass(frozen=True)
class CalibratedRun:
    """One calibrated measurement of a variant in one report."""

    report: int  # index into the command's reports
    estimate: Estimate
    confidence: float


@dataclass
class CalibratedVariant:
    """Every calibrated run of one variant on one GPU model, against one reference."""

    device_key: str
    module: str
    key: str
    reference: str
    runs: list[CalibratedRun] = field(default_factory=list)


@dataclass(frozen=True)
class Found:
    """One variant's levels and what the command did with them."""

    variant: CalibratedVariant
    levels: Placed
    narrow: int  # runs narrow enough to place at a level
    outcome: str  # what was or would be done


def collect(reports: Sequence[Mapping[str, Any]], only: Sequence[str] = ()) -> list[CalibratedVariant]:
    """Every calibrated, uncontended measurement in ``reports``, grouped by GPU model, module,
    key and reference; ``only`` (globs of keys) keeps those that match one. A variant measured
    more than once in one report counts once (its first measurement): a level is made of runs."""
    variants: dict[tuple[str, str, str, str], CalibratedVariant] = {}
    for index, report in enumerate(reports):
        for test in report.get("tests", []):
            for record in test.get("measurements", []):
                found = _calibrated_run(record)
                if found is None or (only and not any(fnmatch.fnmatchcase(found[0][2], p) for p in only)):
                    continue
                group, estimate, confidence = found
                variant = variants.setdefault(group, CalibratedVariant(*group))
                if not variant.runs or variant.runs[-1].report != index:
                    variant.runs.append(CalibratedRun(index, estimate, confidence))
    return [variants[k] for k in sorted(variants)]


def _calibrated_run(record: Any) -> tuple[tuple[str, str, str, str], Estimate, float] | None:
    """(device key, module, key, reference), the calibrated estimate and the confidence of a report's
    measurement record; None for one that is contended, uncalibrated or malformed."""
    if not isinstance(record, dict) or record.get("verdict") == "contended":
        return None
    m = record.get("measurement")
    if not isinstance(m, dict) or not isinstance(cal := m.get("calibration"), dict):
        return None
    device = record.get("device")
    group = (
        device.get("key") if isinstance(device, dict) else device,
        record.get("module"),
        record.get("key"),
        cal.get("reference"),
    )
    estimate = parse_estimate(cal)
    confidence = finite_number(m.get("confidence"))
    if estimate is None or confidence is None or not 0.5 < confidence < 1:
        return None
    if not all(isinstance(x, str) for x in group):
        return None
    return (str(group[0]), str(group[1]), str(group[2]), str(group[3])), estimate, confidence


def levels_of(variant: CalibratedVariant, band: float, min_runs: int) -> tuple[Placed, int]:
    """The variant's levels, each with the reports its runs came from, and how many runs were narrow."""
    confidence = min(run.confidence for run in variant.runs)
    estimates = [run.estimate for run in variant.runs]
    levels = find_levels(estimates, confidence, band, min_runs)
    narrow = sum(is_narrow(e, confidence, band) for e in estimates)
    return [(level, sorted({variant.runs[i].report for i in members})) for level, members in levels], narrow


def _distinct(paths: Sequence[Path], reports: Sequence[Mapping[str, Any]]) -> tuple[list[int], list[str]]:
    """The indexes of the reports to use, and a line for each one skipped as a copy of an earlier
    one (the same content, under the same or another name): a copy is not another run."""
    seen: dict[str, Path] = {}
    keep, skipped = [], []
    for i, (path, report) in enumerate(zip(paths, reports, strict=True)):
        digest = hashlib.sha256(json.dumps(report, sort_keys=True).encode()).hexdigest()
        if digest in seen:
            skipped.append(f"{path}: the same report as {seen[digest]}, counted once")
            continue
        seen[digest] = path
        keep.append(i)
    return keep, skipped


def _blocker(entry: BaselineEntry | None, variant: CalibratedVariant, path: Path) -> str | None:
    """Why the variant's levels cannot be stored in ``entry``, or None."""
    if entry is None:
        return f"no baseline entry in {path}: record one first (pytest --gpu-perf --gpu-perf-update-baselines)"
    cal = entry.calibration()
    if cal is None or cal[0] != variant.reference:
        got = cal[0] if cal else "no reference"
        return f"the entry in {path} was recorded against {got}, the reports against {variant.reference}"
    return None


def command(
    report_paths: Sequence[Path],
    baselines: Path,
    *,
    band: float,
    min_runs: int = MIN_RUNS,
    only: Sequence[str] = (),
    write: bool = False,
) -> tuple[str, int]:
    """``gpuperf levels``: the output and the exit status (1 when ``write`` could not store a
    variant's levels; what was stored meanwhile is listed)."""
    if band <= 0:
        raise CommandLineError(
            f"--band must be above 0, got {band:g}: no run would be narrow enough to place at a level"
        )
    loaded = [load_report(path) for path in report_paths]
    keep, skipped = _distinct(report_paths, loaded)
    paths, reports = [report_paths[i] for i in keep], [loaded[i] for i in keep]
    sources = [source_of(path, report) for path, report in zip(paths, reports, strict=True)]
    store = BaselineStore(baselines)
    found: list[Found] = []
    pending: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for variant in collect(reports, only):
        levels, narrow = levels_of(variant, band, min_runs)
        path = store.path_for(variant.device_key, variant.module)
        gap = too_close([level for level, _ in levels], band)
        if len(levels) < 2:
            outcome = "one level: its baseline stays" if levels else "no level: too few narrow runs"
        elif gap is not None:
            outcome = f"levels only {100 * gap:.1f}% apart, under twice the band: a spread, not levels; nothing stored"
        else:
            blocker = _blocker(store.lookup(variant.device_key, variant.module, variant.key), variant, path)
            if blocker:
                outcome = "NOT stored: " + blocker
            else:
                outcome = f"stored in {path}" if write else f"would be stored in {path} (--write)"
                fields = levels_json(levels, variant.reference, band, sources)
                pending.setdefault((variant.device_key, variant.module), {})[variant.key] = fields
        found.append(Found(variant, levels, narrow, outcome))
    if write:
        found = _write(store, pending, found)
    failed = write and any(f.outcome.startswith("NOT stored") for f in found)
    return "".join(f"skipped {line}\n" for line in skipped) + format_found(found, band, min_runs), 1 if failed else 0


def _write(
    store: BaselineStore, pending: Mapping[tuple[str, str], Mapping[str, dict[str, Any]]], found: list[Found]
) -> list[Found]:
    """Store each file's levels on its own (atomically, under its lock); a file that cannot be
    written marks its variants NOT stored with the reason, and the other files are still written."""
    problems: dict[tuple[str, str, str], str] = {}
    for (device_key, module), by_key in sorted(pending.items()):
        path = store.path_for(device_key, module)
        try:
            gone = store.amend(path, {k: {"levels": v} for k, v in by_key.items()})
        except GpuPerfError as exc:
            problems.update({(device_key, module, k): str(exc) for k in by_key})
            continue
        problems.update({(device_key, module, k): f"the entry left {path} meanwhile" for k in gone})
    return [
        Found(f.variant, f.levels, f.narrow, "NOT stored: " + problems[where])
        if (where := (f.variant.device_key, f.variant.module, f.variant.key)) in problems
        else f
        for f in found
    ]


def format_found(found: Sequence[Found], band: float, min_runs: int) -> str:
    """The command's output: the rule, then one line per variant with its runs, levels and outcome."""
    if not found:
        return "no calibrated measurements in these reports (levels are found among calibrated runs only)\n"
    lines = [
        f"Levels: runs whose interval reaches no further than {100 * band:g}% from their estimate, grouped within "
        f"{100 * band:g}%; a group of {min_runs} or more runs is a level (time relative to the reference)."
    ]
    for f in found:
        v = f.variant
        shown = ", ".join(f"{math.exp(level.center):.4g}x ({len(members)} runs)" for level, members in f.levels)
        lines.append(
            f"{v.device_key} {module_file_name(v.module)} {v.key} vs {v.reference}: {len(v.runs)} runs, "
            f"{f.narrow} narrow; levels: {shown or 'none'}; {f.outcome}"
        )
    return "\n".join(lines) + "\n"
