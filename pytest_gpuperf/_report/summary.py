"""Human and machine-readable reports: failure tables, the terminal summary, the JSON report."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_gpuperf._report.table import text_table
from pytest_gpuperf._store.schema_versions import REPORT_SCHEMA

if TYPE_CHECKING:
    from pytest_gpuperf._gates.regression import RegressionCheck
    from pytest_gpuperf._report.records import Record
    from pytest_gpuperf._store.baselines import BaselineChange, BaselineEntry
    from pytest_gpuperf._timing.results import Comparison, Measurement
    from pytest_gpuperf._timing.summaries import ComparisonSummary


def fmt_time(seconds: float | None) -> str:
    """Seconds in the unit that keeps three significant digits readable (ns, µs, ms, s)."""
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.4g} {unit}"
    return f"{seconds / 1e-9:.4g} ns"


def _ci(low: float, high: float, fmt: str = "{:.4g}") -> str:
    return "[" + fmt.format(low) + ", " + fmt.format(high) + "]"


def _measurement_row(m: Measurement) -> list[str]:
    return [
        m.name,
        fmt_time(m.median_s),
        "[" + fmt_time(m.ci_low_s) + ", " + fmt_time(m.ci_high_s) + "]",
        f"{100 * m.spread:.2f}%",
        f"n={m.n}",
        f"{m.mode}/{m.method}" + (" THROTTLED" if m.throttled else ""),
    ]


def format_comparison_failure(c: Comparison) -> str:
    """The table printed when a speedup claim fails or stays undecided."""
    if c.verdict.value == "fail":
        head = f"speedup gate FAILED: {c.fast.name!r} vs {c.baseline.name!r} must be >= {c.at_least:.3f}x"
        why = "the whole interval lies below the required margin"
    else:
        head = f"speedup gate INCONCLUSIVE: {c.fast.name!r} vs {c.baseline.name!r} must be >= {c.at_least:.3f}x"
        if c.estimate is not None and not c.estimate.independent:
            why = "no gate decides on this run's batches (note below)"
        else:
            why = "the interval contains the margin even after re-sampling; lower the margin or raise --gpu-perf-budget"
    rows = [
        ["variant", "median", f"{100 * c.fast.confidence:g}% CI", "noise (IQR)", "samples", "mode"],
        _measurement_row(c.fast),
        _measurement_row(c.baseline),
    ]
    basis = (
        f"batch means over {c.rounds} interleaved rounds, look {c.looks} of {c.schedule_looks}"
        if c.estimate
        else f"{c.rounds} interleaved rounds, too few to batch"
    )
    return (
        f"{head}\n{text_table(rows, indent='  ')}\n"
        f"  speedup   {c.speedup:.4f}x  {_ci(c.ci_low, c.ci_high)} ({100 * c.confidence:g}% CI, {basis})\n"
        f"  required  >= {c.at_least:.4f}x: {why}" + "".join(f"\n  note      {note}" for note in c.notes)
    )


def format_regression_failure(
    m: Measurement, entry: BaselineEntry, check: RegressionCheck, device_key: str, path: Path
) -> str:
    rows = [
        ["", "median", f"{100 * m.confidence:g}% CI", "samples", "recorded"],
        [
            "now",
            fmt_time(m.median_s),
            "[" + fmt_time(m.ci_low_s) + ", " + fmt_time(m.ci_high_s) + "]",
            str(m.n),
            "this run",
        ],
        [
            "baseline",
            fmt_time(entry.median_s),
            "[" + fmt_time(entry.ci_low_s) + ", " + fmt_time(entry.ci_high_s) + "]",
            str(entry.n),
            entry.recorded_at,
        ],
    ]
    if check.levels:
        return _levels_failure(m, entry, check, device_key, path, text_table(rows, indent="  "))
    s = check.slowdown
    limit = 1 + check.threshold
    decided = check.verdict.value == "fail"
    head = "performance REGRESSION" if decided else "regression check INCONCLUSIVE"
    basis = (
        f"relative to {check.calibrated_by} timed in the same rounds, now and when recorded"
        if check.calibrated_by
        else "raw times: no reference kernel was timed with both runs"
    )
    if decided:
        why = "the whole interval lies above it"
    else:
        why = f"but the interval reaches below {limit:.4f}x, so the slowdown is not established"
    return (
        f"{head}: {m.name!r} is {100 * (s.estimate - 1):.1f}% slower than its stored "
        f"baseline for {device_key} ({path})\n{text_table(rows, indent='  ')}\n"
        f"  slowdown  {s.estimate:.4f}x {_ci(s.low, s.high)} ({100 * s.confidence:g}% CI, {basis})\n"
        f"  threshold {limit:.4f}x = 1 + max(tolerance {100 * check.tolerance:g}% / 2, "
        f"{'calibrated' if check.calibrated_by else 'machine'} band {100 * check.band:g}%): {why}\n"
        + (f"  note      {check.note}\n" if check.note else "")
        + _clock_note(m, entry)
        + "  If the change is intended (new hardware, an accepted trade-off), re-record with "
        "pytest --gpu-perf --gpu-perf-update-baselines"
    )


def _levels_failure(
    m: Measurement, entry: BaselineEntry, check: RegressionCheck, device_key: str, path: Path, table: str
) -> str:
    """A run judged against the levels its baseline stores (``_gates.levels``): FAIL or INCONCLUSIVE."""
    s = check.slowdown
    n = (check.level or 0) + 1
    ratios = ", ".join(f"{r:.4g}x" for r in check.levels)
    theta = 100 * check.threshold
    near = 1 / (1 + check.threshold) <= s.estimate <= 1 + check.threshold
    if check.verdict.value == "fail":
        head, where = "performance REGRESSION", f"sits at none of the {len(check.levels)} levels stored for it"
        why = f"the whole interval lies more than {theta:.3g}% from every level, and above level {n}"
    elif near:
        head, where = (
            "regression check INCONCLUSIVE",
            f"cannot be placed at level {n} of the {len(check.levels)} stored for it",
        )
        why = f"its estimate is within {theta:.3g}% of level {n}, but its interval is too wide to place it there"
    else:
        head, where = "regression check INCONCLUSIVE", f"sits at none of the {len(check.levels)} levels stored for it"
        why = f"its estimate is more than {theta:.3g}% from every level, but its interval reaches within {theta:.3g}% of level {n}"
    return (
        f"{head}: {m.name!r} {where} on {device_key} ({path}); it is {_relative(s.estimate)} level {n}\n{table}\n"
        f"  slowdown  {s.estimate:.4f}x {_ci(s.low, s.high)} against level {n} "
        f"({100 * s.confidence:g}% CI, relative to {check.calibrated_by} timed in the same rounds)\n"
        f"  levels    {ratios} the time of {check.calibrated_by}, fastest first\n"
        f"  threshold {theta:.3g}% = max(tolerance {100 * check.tolerance:g}% / 2, level band {100 * check.band:g}%) "
        f"from each level: {why}\n"
        + _clock_note(m, entry)
        + "  If the change is intended, re-record with pytest --gpu-perf --gpu-perf-update-baselines, then derive the "
        "levels again from new reports with gpuperf levels"
    )


def _relative(ratio: float) -> str:
    """'4.9% slower than' or '3.4% faster than' for a time ratio now / then."""
    return f"{100 * abs(ratio - 1):.1f}% {'slower' if ratio >= 1 else 'faster'} than"


def format_against_failure(pair: Comparison, check: RegressionCheck, label: str) -> str:
    """A variant slower than its namesake built from another revision, timed in the same rounds."""
    s = check.slowdown
    limit = 1 + check.threshold
    decided = check.verdict.value == "fail"
    head = "performance REGRESSION" if decided else "regression check INCONCLUSIVE"
    rows = [
        ["variant", "median", f"{100 * pair.fast.confidence:g}% CI", "noise (IQR)", "samples", "mode"],
        _measurement_row(pair.fast),
        _measurement_row(pair.baseline),
    ]
    why = "the whole interval lies above it" if decided else f"but the interval reaches below {limit:.4f}x"
    return (
        f"{head}: {pair.fast.name!r} is {100 * (s.estimate - 1):.1f}% slower than at {label}, timed in the same "
        f"rounds\n{text_table(rows, indent='  ')}\n"
        f"  slowdown  {s.estimate:.4f}x {_ci(s.low, s.high)} ({100 * s.confidence:g}% CI, {pair.rounds} interleaved rounds)\n"
        f"  threshold {limit:.4f}x = 1 + tolerance {100 * check.tolerance:g}% / 2: {why}"
    )


def _clock_note(m: Measurement, entry: BaselineEntry) -> str:
    """SM clocks now and at recording: under power capping a compute-bound kernel's time follows its clock."""
    before = entry.extra.get("sm_clock_mhz") or []
    now = [c.sm_clock_mhz for c in m.clocks[:1] + m.clocks[-1:]]
    if not before or not now:
        return ""
    reasons = sorted({r for c in m.clocks for r in c.reasons})
    capped = " (power capped: the clock, not the code, may explain the difference)" if "sw_power_cap" in reasons else ""
    return f"  SM clock {now[0]}-{now[-1]} MHz now, {before[0]}-{before[-1]} MHz when recorded{capped}\n"


def baseline_delta(record: Mapping[str, Any]) -> str:
    """A measurement's change against its stored baseline: ``+3.1%``, ``no baseline`` (none was
    stored) or ``-`` (not checked)."""
    reg = record.get("regression")
    return f"{100 * (reg['slowdown'] - 1):+.1f}%" if reg else ("no baseline" if record.get("note") else "-")


# -- session summary ---------------------------------------------------------------
# What summary_rows' last column holds, one line for under the table; each word is a Verdict.
VERDICT_LEGEND = (
    "verdict: on a row with a speedup, the claim's verdict / the baseline check's; elsewhere the baseline "
    "check's. pass: the gate holds; fail: the whole interval lies on the failing side of the margin or threshold; "
    "inconclusive: the run could not decide (the interval straddles it, or its batches were not independent); "
    "improved: faster than the baseline beyond the threshold; measured: no gate applied (no margin, or no stored baseline); "
    "contended: another process used the GPU, not judged; recorded: stored as the new baseline; "
    "not recorded: the new baseline was refused"
)


def summary_rows(records: Iterable[Record]) -> list[list[str]]:
    """One row per measured variant: test, variant, median, CI, speedup vs required, Δ baseline, verdict."""
    records = list(records)
    speedups: dict[tuple[str, str], ComparisonSummary] = {}
    for r in records:
        if r["kind"] == "comparison":
            speedups[(r["test"], r["comparison"]["fast"])] = r["comparison"]
    rows = [["test", "variant", "median", "CI", "speedup (required)", "vs baseline", "verdict"]]
    for r in records:
        if r["kind"] == "identical":
            rev = r["identical_to"]["rev"]
            rows.append(
                [r["test"].split("::", 1)[-1], r["variant"], "not timed", "-", "-", f"identical to {rev}", r["verdict"]]
            )
            continue
        if r["kind"] != "measurement":
            continue
        m = r["measurement"]
        c = speedups.get((r["test"], m["name"]))
        speed = "-"
        verdict = r["verdict"]
        if c:
            need = f"{c['at_least']:.3f}" if c.get("at_least") is not None else "none"
            speed = f"{c['speedup']:.3f}x [{c['ci_low']:.3f}, {c['ci_high']:.3f}] ({need})"
            verdict = f"{c['verdict']}/{r['verdict']}"
        delta = baseline_delta(r)
        rows.append(
            [
                r["test"].split("::", 1)[-1],
                m["name"] + (" (throttled)" if m.get("throttled") else ""),
                fmt_time(m["median_s"]),
                "[" + fmt_time(m["ci_low_s"]) + ", " + fmt_time(m["ci_high_s"]) + "]",
                speed,
                delta,
                verdict,
            ]
        )
    return rows


def verdict_counts(records: Iterable[Record]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for r in records:
        if r["kind"] == "comparison":
            counts["speedup " + r["comparison"]["verdict"]] += 1
        elif r["kind"] == "measurement":
            counts["baseline " + r["verdict"]] += 1
        elif r["kind"] == "identical":
            counts["identical to the revision (not timed)"] += 1
    return counts


def health_summary(records: Iterable[Record]) -> dict[str, Any]:
    """How many measurements had unknown clocks or a contended GPU, with the reasons and processes."""
    unknown: Counter[str] = Counter()
    contended: list[dict[str, Any]] = []
    for r in records:
        h = r["measurement"]["health"] if r["kind"] == "measurement" else None
        if r["kind"] != "measurement" or not h:
            continue
        if h["state"] == "unknown":
            unknown[h["unknown_reason"]] += 1
        elif h["state"] == "contended":
            contended.append({"test": r["test"], "variant": r["measurement"]["name"], "by": h["contended_by"]})
    return {
        "clocks_unknown": sum(unknown.values()),
        "unknown_reasons": dict(unknown),
        "contended": contended,
    }


def health_lines(records: Iterable[Record]) -> list[str]:
    """Summary lines on unknown clocks and contended measurements (empty when all was known and quiet)."""
    h = health_summary(records)
    lines = [
        f"gpu-perf health: clocks and throttling unknown for {n} measurement(s): {reason}"
        for reason, n in h["unknown_reasons"].items()
    ]
    if h["contended"]:
        lines.append(
            f"gpu-perf health: {len(h['contended'])} measurement(s) shared the GPU with other processes "
            "(contended: not judged against baselines, not stored):"
        )
        for c in h["contended"][:10]:
            who = "; ".join(f"pid {p['pid']} ({p['name']})" for p in c["by"])
            lines.append(f"  {c['test'].split('::', 1)[-1]}::{c['variant']}: {who}")
        if len(h["contended"]) > 10:
            lines.append(f"  ... and {len(h['contended']) - 10} more (see the JSON report)")
    return lines


def time_lines(records: Iterable[Record], slowest: int = 5) -> list[str]:
    """Where the run's measuring time went: by test module, and the slowest measurements."""
    spent: list[tuple[float, str]] = []
    for r in records:
        if r["kind"] == "measurement" and r["measurement"].get("wall_s"):
            spent.append((r["measurement"]["wall_s"], f"{r['test']}::{r['measurement']['name']}"))
        elif r["kind"] == "comparison" and r["comparison"].get("wall_s"):
            c = r["comparison"]
            spent.append((c["wall_s"], f"{r['test']}: {c['fast']} vs {c['baseline']}"))
    if not spent:
        return []
    by_module: dict[str, float] = {}
    for seconds, what in spent:
        module = what.split("::", 1)[0]
        by_module[module] = by_module.get(module, 0.0) + seconds
    lines = [f"gpu-perf time: {sum(s for s, _ in spent):.1f} s measuring (warm-up and capture included), by module:"]
    lines += [f"  {seconds:7.1f} s  {module}" for module, seconds in sorted(by_module.items(), key=lambda kv: -kv[1])]
    lines.append(f"slowest {min(slowest, len(spent))} measurement(s):")
    lines += [f"  {seconds:7.2f} s  {what}" for seconds, what in sorted(spent, reverse=True)[:slowest]]
    return lines


def progress_lines(record: Record) -> list[str]:
    """One line per finished measurement or comparison, for ``-v``."""
    test = record.get("test", "").split("::", 1)[-1]
    if record["kind"] == "measurement":
        m = record["measurement"]
        ci = "[" + fmt_time(m["ci_low_s"]) + ", " + fmt_time(m["ci_high_s"]) + "]"
        return [f"gpu-perf  {test}::{m['name']}  {fmt_time(m['median_s'])} {ci}  {record['verdict']}"]
    if record["kind"] == "identical":
        return [f"gpu-perf  {test}::{record['variant']}  not timed: {record['note']}  {record['verdict']}"]
    if record["kind"] == "comparison":
        c = record["comparison"]
        need = f" (>= {c['at_least']:.3f})" if c.get("at_least") is not None else ""
        return [
            f"gpu-perf  {test}: {c['fast']} vs {c['baseline']}  {c['speedup']:.3f}x "
            f"[{c['ci_low']:.3f}, {c['ci_high']:.3f}]{need}  {c['verdict']}"
        ]
    return []


def changed_only_lines(records: Iterable[Record], most: int = 5) -> list[str]:
    """--gpu-perf-changed-only: how many variants were proven the same as at the revision and not
    timed, how many tests were timed, and the most frequent reasons (empty when the option was off:
    no record carries either)."""
    identical = [r for r in records if r["kind"] == "identical"]
    timed: dict[str, str] = {}
    for r in records:
        if r["kind"] == "measurement" and r.get("timed_because"):
            timed.setdefault(r["test"], r["timed_because"])
    if not identical and not timed:
        return []
    revs = sorted({r["identical_to"]["rev"] for r in identical})
    tests = len({r["test"] for r in identical})
    deciding: dict[str, float] = {}  # one value per test, repeated on each of its records
    for r in records:
        if r["kind"] in ("identical", "measurement") and isinstance(r.get("deciding_s"), (int, float)):
            deciding.setdefault(r["test"], float(r["deciding_s"]))
    lines = [
        f"changed-only: {len(identical)} variant(s) in {tests} test(s) identical to {', '.join(revs) or 'the revision'}, "
        f"not timed; {len(timed)} test(s) timed"
        + (f"; deciding took {sum(deciding.values()):.1f} s over {len(deciding)} test(s)" if deciding else "")
        + (", timed because:" if timed else "")
    ]
    reasons = Counter(timed.values())
    lines += [f"  {n:4d} x {reason}" for reason, n in reasons.most_common(most)]
    if len(reasons) > most:
        lines.append(f"  and {len(reasons) - most} other reason(s) (see timed_because in the JSON report)")
    return lines


def format_changes(changes: Sequence[BaselineChange]) -> list[str]:
    lines = []
    file = None
    for ch in changes:
        if ch.file != file:
            file = ch.file
            lines.append(f"  {file}:")
        if ch.old is None:
            lines.append(f"    + {ch.key}: {fmt_time(ch.new.median_s)} (new)")
        else:
            lines.append(
                f"    ~ {ch.key}: {fmt_time(ch.old.median_s)} -> {fmt_time(ch.new.median_s)} ({100 * (ch.delta or 0):+.1f}%)"
                + _levels_change(ch)
            )
    return lines


def _levels_change(ch: BaselineChange) -> str:
    """What an update did to the replaced entry's stored levels."""
    old = ch.old.levels() if ch.old else None
    if old is None:
        return ""
    if ch.new.levels() is not None:
        return f"; its {len(old[1])} stored levels kept (the new time sits at one, or across two)"
    calibration = ch.new.calibration()
    why = (
        "the new time sits at none of them"
        if calibration is not None and calibration[0] == old[0]
        else f"the new time was not timed against their reference, {old[0]}"
    )
    return f"; its {len(old[1])} stored levels DROPPED: {why} (gpuperf levels derives them again from new reports)"


def static_lines(records: Iterable[Record], no_gpu: Counter[str], no_gpu_reason: str | None) -> list[str]:
    """The terminal summary of the compile-time tier: one row per module and architecture, the
    totals, the budgets an update changed, and which GPU parts a GPU-less run skipped."""
    static = [r for r in records if r["kind"] == "static"]
    lines: list[str] = []
    if static:
        rows = [
            [
                "module",
                "arch",
                "kernels",
                "max regs",
                "spills",
                "max SASS instrs",
                "ptxas warnings",
                "SASS facts",
                "budgets",
                "verdict",
            ]
        ]
        for r in static:
            kernels = r["kernels"]
            facts = r["facts"]
            counts = [k["sass_instructions"] for k in kernels if k.get("sass_instructions") is not None]
            rows.append(
                [
                    r["module"],
                    r["arch"],
                    str(len(kernels)),
                    str(max((k["registers"] for k in kernels), default=0)),
                    str(sum(k["spill_stores"] + k["spill_loads"] for k in kernels)) + " B",
                    str(max(counts)) if counts else "-",
                    str(len(r["ptxas_warnings"])),
                    f"{sum(f['ok'] for f in facts)}/{len(facts)}",
                    f"{sum(k['budget'] is not None for k in kernels)}/{len(kernels)}",
                    r["verdict"],
                ]
            )
        lines.append(text_table(rows))
        built = [r for r in static if not r["cached"]]
        verdicts = Counter(r["verdict"] for r in static)
        lines.append(
            "static checks: "
            + ", ".join(f"{n} {v}" for v, n in sorted(verdicts.items()))
            + f" ({len(built)} built in {sum(r['seconds'] for r in built):.1f} s, {len(static) - len(built)} from the cache "
            f"in {sum(r['seconds'] for r in static if r['cached']):.1f} s)"
        )
        unbudgeted = [r for r in static if r.get("budget_note")]
        if unbudgeted:
            lines.append(
                f"{len(unbudgeted)} static check(s) have kernels without a stored budget; record them with: "
                "pytest --gpu-perf-update-baselines"
            )
        changes = [c for r in static for c in r.get("changes", [])]
        if changes:
            lines.append(f"static budgets updated ({len(changes)} entries):")
            lines += ["  " + c["text"] for c in changes]
    if no_gpu:
        perf, gpu, other = no_gpu.get("perf", 0), no_gpu.get("gpu", 0), no_gpu.get("other", 0)
        text = f"no GPU ({no_gpu_reason}): {gpu} GPU correctness tests and {perf} perf tests skipped"
        if no_gpu.get("timing off"):
            text += f" (and {no_gpu['timing off']} perf tests skipped because timing is off)"
        if other:
            text += f", and {other} other GPU tests"
        lines.append(text + f"; static checks ran: {len(static)}")
    return lines


def build_json(
    *,
    records: Sequence[Record],
    outcomes: dict[str, str],
    failures: Mapping[str, str] | None = None,
    skip_reasons: Counter[str],
    changes: Sequence[BaselineChange],
    settings: dict[str, Any],
) -> dict[str, Any]:
    devices = {r["device"]["key"]: r["device"] for r in records if r["kind"] == "measurement"}
    tests: dict[str, dict[str, Any]] = {}
    for nodeid, outcome in outcomes.items():
        tests[nodeid] = {
            "nodeid": nodeid,
            "outcome": outcome,
            "measurements": [],
            "comparisons": [],
            "figures": [],
            "static": [],
        }
        if failures and nodeid in failures:
            tests[nodeid]["failure"] = failures[nodeid]
    for r in records:
        t = tests.setdefault(
            r["test"],
            {
                "nodeid": r["test"],
                "outcome": "unknown",
                "measurements": [],
                "comparisons": [],
                "figures": [],
                "static": [],
            },
        )
        if r["kind"] == "measurement":
            kept = {k: v for k, v in r.items() if k not in ("kind", "test", "device")}
            t["measurements"].append(kept | {"device": r["device"]["key"], "gpu_ordinal": r["device"]["ordinal"]})
        elif r["kind"] == "comparison":
            t["comparisons"].append(r["comparison"])
        elif r["kind"] == "figure":
            t["figures"].append({"key": r["key"], "value": r["value"], "unit": r["unit"]})
        elif r["kind"] == "static":  # the compile-time tier (gpu_static fixture): one module on one arch
            t["static"].append({k: v for k, v in r.items() if k not in ("kind", "test")})
        elif r["kind"] == "identical":  # --gpu-perf-changed-only: proven the same as at REV, not timed
            t.setdefault("identical", []).append({k: v for k, v in r.items() if k not in ("kind", "test")})
        elif r["kind"] == "counters":  # hardware counters of one launch (gpu_counters fixture)
            t.setdefault("counters", []).append({k: v for k, v in r.items() if k not in ("kind", "test")})
    return {
        "schema": REPORT_SCHEMA,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "settings": settings,
        "devices": devices,
        "tests": list(tests.values()),
        "skipped": [{"reason": reason, "count": n} for reason, n in skip_reasons.most_common()],
        "baseline_changes": [
            {
                "file": c.file,
                "key": c.key,
                "old_median_s": c.old.median_s if c.old else None,
                "new_median_s": c.new.median_s,
            }
            for c in changes
        ],
        "summary": dict(verdict_counts(records)),
        "health": health_summary(records),
        "sight": _sight(records, settings),
    }


def _sight(records: Sequence[Record], settings: Mapping[str, Any]) -> dict[str, Any]:
    from pytest_gpuperf._report.sight import DEFAULT_TOLERANCE, sight_json  # lazily: it loads the statistics

    try:
        tolerance = float(settings.get("tolerance", DEFAULT_TOLERANCE))
    except (TypeError, ValueError):
        tolerance = DEFAULT_TOLERANCE
    return sight_json(records, tolerance)
