"""A report's results shaped for its charts: the family of each test, the rows of each panel,
the sweeps (one test function over a number in its id), labels that fit, the ranges a value must
lie in to be drawn, and the colour of each verdict. Plain data in, plain data out: no matplotlib."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

MAX_LABEL = 76  # characters of a row's label
MAX_SLUG = 80  # characters of a chart's file name
MIN_SWEEP_POINTS = 3  # distinct values of the number a sweep runs over
# Values drawn on each panel; a row outside (a hostile or broken report: 1e308 s, a negative
# speedup) is left out of the chart with a note, and still listed in index.html's table.
TIME_RANGE = (1e-12, 1e6)  # seconds
SPEEDUP_RANGE = (1e-6, 1e6)
FRACTION_RANGE = (0.0, 1e3)
DELTA_RANGE = (-0.99, 100.0)  # change against the baseline, as a fraction
# The colour of a verdict, in the charts and the index's table alike.
VERDICT_COLOURS = {
    "pass": "#2e7d32",
    "fail": "#c62828",
    "inconclusive": "#ef6c00",
    "measured": "#1f5fa8",
    "recorded": "#1f5fa8",
    "improved": "#00838f",
    "contended": "#888888",
}
OTHER_COLOUR = "#555555"


def family_of(nodeid: str) -> str:
    """``tests/qkv/test_perf.py::test_x[a]`` -> ``qkv``; a test file at the top level -> its stem."""
    parts = PurePosixPath(nodeid.split("::", 1)[0]).parts
    if len(parts) >= 3 and parts[0] == "tests":
        return parts[1]
    if len(parts) >= 2:
        return parts[-2]
    return PurePosixPath(parts[0]).stem if parts else "tests"


def short_test(nodeid: str) -> str:
    """The test's name and parameters without the module and the ``test_`` prefix."""
    name = nodeid.split("::", 1)[-1]
    return name.removeprefix("test_")


def clip(text: str, limit: int = MAX_LABEL) -> str:
    if len(text) <= limit:
        return text
    keep = (limit - 1) // 2
    return text[:keep] + "\u2026" + text[-(limit - 1 - keep) :]


def clipped_label(test: str, extra: str = "", sep: str = " \u00b7 ") -> str:
    """``test · extra`` within MAX_LABEL characters: the test's name is shortened before its parameters."""
    full = f"{test}{sep}{extra}" if extra else test
    if len(full) <= MAX_LABEL:
        return full
    name, bracket, params = test.partition("[")
    room = MAX_LABEL - (len(full) - len(name))
    if room >= 8:
        return f"{name[: room - 1]}\u2026{bracket}{params}" + (f"{sep}{extra}" if extra else "")
    return clip(full)


def _common_suffix(keys: Sequence[str]) -> str:
    """The longest ``_``-separated tail shared by all ``keys`` (``a_bandwidth_fraction``, ``b_bandwidth_fraction``)."""
    if not keys:
        return ""
    split = [k.split("_") for k in keys]
    tail: list[str] = []
    for parts in zip(*(reversed(p) for p in split), strict=False):
        if len(set(parts)) != 1:
            break
        tail.insert(0, parts[0])
    return "_".join(tail)


def slug(family: str) -> str:
    """A file name for ``family``'s chart: safe characters, short enough for any file system."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", family).strip(".") or "family"
    if len(slug) > MAX_SLUG:
        import hashlib

        slug = slug[: MAX_SLUG - 9] + "-" + hashlib.sha256(family.encode("utf-8", "replace")).hexdigest()[:8]
    return slug


def plottable(
    row: Mapping[str, Any], span: tuple[float, float], keys: Sequence[str] = ("low", "value", "high")
) -> bool:
    """Whether the row's numbers are finite, inside ``span`` and ordered low <= value <= high."""
    values = [row[k] for k in keys]
    if not all(isinstance(v, float) and math.isfinite(v) and span[0] <= v <= span[1] for v in values):
        return False
    return list(values) == sorted(values)


def _number(value: Any) -> float:
    """``value`` as a float; NaN for anything that is not a number within the float range."""
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return math.nan


def group_by_family(report: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Tests of the report per family, in report order."""
    families: dict[str, list[dict[str, Any]]] = {}
    for test in report.get("tests", []):
        families.setdefault(family_of(test["nodeid"]), []).append(test)
    return families


def _base_name(variant: str) -> str:
    """``fused@200`` -> ``fused``: the variant without the shape suffix some families add."""
    return variant.split("@", 1)[0].split("#", 1)[0]


def _named_in(test: str, *variants: str) -> bool:
    return all(_base_name(v) in test for v in variants)


def gate_of(record: Mapping[str, Any]) -> dict[str, float] | None:
    """The stored baseline's median, the gate's threshold and the change now / stored with its
    interval (as fractions: 0.05 is 5% slower) of one measurement record; None without a check."""
    reg = record.get("regression")
    if not isinstance(reg, dict):
        return None
    change = [_number(reg.get(k)) - 1.0 for k in ("slowdown", "ci_low", "ci_high")]
    threshold = _number(reg.get("threshold"))
    if not math.isfinite(threshold):  # reports before the threshold was recorded: the tolerance rule
        threshold = max(
            _number(reg.get("tolerance")) / 2.0, _number(reg.get("band")) if reg.get("band") is not None else 0.0
        )
    stored = record.get("baseline")
    return {
        "delta": change[0],
        "delta_low": change[1],
        "delta_high": change[2],
        "threshold": threshold,
        "baseline": _number(stored.get("median_s")) if isinstance(stored, dict) else math.nan,
    }


def measurement_rows(tests: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per measured variant; the variant is named unless the test id already says it.
    Rows of a checked measurement carry its ``gate_of`` numbers."""
    rows = []
    for t in tests:
        test = short_test(t["nodeid"])
        measurements = t.get("measurements", [])
        for m in measurements:
            s = m["measurement"]
            verdict = str((m.get("regression") or {}).get("verdict") or m.get("verdict") or "measured")
            alone = len(measurements) == 1 and _named_in(test, s["name"])
            rows.append(
                {
                    "label": clipped_label(test, "" if alone else s["name"]),
                    "value": _number(s["median_s"]),
                    "low": _number(s["ci_low_s"]),
                    "high": _number(s["ci_high_s"]),
                    "verdict": verdict,
                    "throttled": bool(s.get("throttled")),
                    "gate": gate_of(m),
                }
            )
    return rows


def comparison_rows(tests: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per comparison; ``fast vs baseline`` is added unless the test id already names both."""
    rows = []
    for t in tests:
        test = short_test(t["nodeid"])
        for c in t.get("comparisons", []):
            named = _named_in(test, c["fast"], c["baseline"]) and len(t.get("comparisons", [])) == 1
            rows.append(
                {
                    "label": clipped_label(test, "" if named else f"{c['fast']} vs {c['baseline']}", sep=": "),
                    "value": _number(c["speedup"]),
                    "low": _number(c["ci_low"]),
                    "high": _number(c["ci_high"]),
                    "margin": None if c.get("at_least") is None else _number(c["at_least"]),
                    "verdict": str(c.get("verdict", "measured")),
                }
            )
    return rows


def fraction_rows(tests: Iterable[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], str | None]:
    """Rows of the figures whose key contains ``fraction``, and their key when all share one."""
    found = []
    for t in tests:
        for f in t.get("figures", []):
            if "fraction" in f["key"] and f.get("value") is not None and math.isfinite(_number(f["value"])):
                found.append((short_test(t["nodeid"]), f["key"], _number(f["value"])))
    keys = sorted({key for _, key, _ in found})
    suffix = _common_suffix(keys)
    rows = []
    for test, key, value in found:
        head = key[: len(key) - len(suffix)].rstrip("_") if suffix else key
        rows.append({"label": clipped_label(test, head), "value": value})
    title = (keys[0] if len(keys) == 1 else f"<x>_{suffix} (x after the \u00b7)" if suffix else None) if keys else None
    return rows, title


_NUMBER = re.compile(r"^[0-9]+(\.[0-9]+)?([eE][0-9]+)?$")


def _id_parts(nodeid: str) -> tuple[str, list[str]] | None:
    """``path::test_x[fused-200]`` -> (``test_x``, [``fused``, ``200``]); None without parameters."""
    name = nodeid.split("::")[-1]
    func, bracket, rest = name.partition("[")
    if not bracket or not rest.endswith("]"):
        return None
    return func, rest[:-1].split("-")


def split_sweeps(tests: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[Mapping[str, Any]]]:
    """The family's sweeps, and the tests that are in none.

    A sweep is a test function whose ids split on '-' into the same number of parts, one part a
    number taking at least ``MIN_SWEEP_POINTS`` values (the most, if several are): its x axis.
    The other parts name the series. Each sweep is ``{"name", "axis", "position", "tests": [(x,
    series, test), ...]}``.
    """
    groups: dict[tuple[str, int], list[tuple[list[str], Mapping[str, Any]]]] = {}
    for t in tests:
        parts = _id_parts(str(t["nodeid"]))
        if parts is not None:
            groups.setdefault((parts[0], len(parts[1])), []).append((parts[1], t))
    sweeps: list[dict[str, Any]] = []
    swept: set[int] = set()
    for (func, width), members in groups.items():
        if len(members) < MIN_SWEEP_POINTS:
            continue
        best: tuple[int, int] | None = None
        for k in range(width):
            values = [params[k] for params, _ in members]
            if all(_NUMBER.match(v) for v in values):
                distinct = len(set(float(v) for v in values))
                if distinct >= MIN_SWEEP_POINTS and (best is None or distinct >= best[1]):
                    best = (k, distinct)
        if best is None:
            continue
        k = best[0]
        pattern = "-".join("x" if i == k else "\u00b7" for i in range(width))
        sweeps.append(
            {
                "name": func.removeprefix("test_"),
                "axis": f"x in {func.removeprefix('test_')}[{pattern}]",
                "tests": [(float(params[k]), "-".join(params[:k] + params[k + 1 :]), t) for params, t in members],
            }
        )
        swept.update(id(t) for _, t in members)
    return sweeps, [t for t in tests if id(t) not in swept]


def series_points(sweep: Mapping[str, Any], what: str) -> dict[str, list[dict[str, Any]]]:
    """Points of a sweep per series: ``what`` is "times" (each measured variant), "speedups"
    (each comparison), "deltas" (each measured variant checked against a stored baseline) or
    "fractions" (each recorded figure whose key contains ``fraction``)."""
    series: dict[str, list[dict[str, Any]]] = {}
    for x, name, t in sweep["tests"]:
        if what == "speedups":
            for c in t.get("comparisons", []):
                pair = f"{_base_name(str(c['fast']))} vs {_base_name(str(c['baseline']))}"
                label = (
                    (name or pair)
                    if len(t.get("comparisons", [])) == 1
                    else (f"{name} \u00b7 {pair}" if name else pair)
                )
                margin = None if c.get("at_least") is None else _number(c["at_least"])
                series.setdefault(label, []).append(
                    {
                        "x": x,
                        "value": _number(c["speedup"]),
                        "low": _number(c["ci_low"]),
                        "high": _number(c["ci_high"]),
                        "margin": margin,
                        "verdict": str(c.get("verdict", "measured")),
                    }
                )
            continue
        if what == "fractions":
            for f in t.get("figures", []):
                if "fraction" in str(f["key"]) and f.get("value") is not None:
                    label = f"{name} \u00b7 {f['key']}" if name else str(f["key"])
                    series.setdefault(label, []).append({"x": x, "value": _number(f["value"]), "verdict": "measured"})
            continue
        seen: dict[str, int] = {}
        measurements = t.get("measurements", [])
        for m in measurements:
            s = m["measurement"]
            variant = _base_name(str(s["name"]))
            seen[variant] = seen.get(variant, 0) + 1
            named = len(measurements) == 1 and (not name or variant in name)
            label = (name or variant) if named else (f"{name} \u00b7 {variant}" if name else variant)
            label += f" #{seen[variant]}" if seen[variant] > 1 else ""
            gate = gate_of(m)
            if what == "deltas" and gate is None:
                continue
            series.setdefault(label, []).append(
                {
                    "x": x,
                    "value": _number(s["median_s"]),
                    "low": _number(s["ci_low_s"]),
                    "high": _number(s["ci_high_s"]),
                    "verdict": str((m.get("regression") or {}).get("verdict") or m.get("verdict") or "measured"),
                    "gate": gate,
                }
            )
    return {label: sorted(points, key=lambda p: p["x"]) for label, points in series.items()}
