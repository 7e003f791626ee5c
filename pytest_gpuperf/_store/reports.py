"""Saved ``--gpu-perf-json`` reports read back: the file, its schema, and every field a reader uses.

``load_report`` is what ``gpuperf report``, ``gpuperf check`` and the charts
(``python -m pytest_gpuperf._report.plots``) read reports through. It accepts a plain or gzipped file
(``read_json``: size-capped, binary refused), tells an unrelated JSON file from a report of
another schema version, and type-checks each field that ``gpuperf report`` or the charts
read, so a bad file is one line naming the file, the field and the value, never a traceback.
Numbers must be finite and within the float range; where the writer may have replaced a
non-finite value by null, null is accepted and shown as "-".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_gpuperf._store.baselines import schema_hint
from pytest_gpuperf._store.jsonio import finite_number, json_type, read_json, shown
from pytest_gpuperf._store.schema_versions import REPORT_SCHEMA
from pytest_gpuperf.errors import GpuPerfError


class ReportFileError(GpuPerfError):
    """A saved ``--gpu-perf-json`` report is unreadable, corrupt or of another schema."""


KIND = "report file"
# Tests plus their measurements, comparisons, figures and counter results. The biggest report
# the project keeps holds 208 tests and 275 measurements; a file past this is refused before
# its fields are checked one by one, which would take minutes (jsonio caps the parse itself).
MAX_REPORT_RESULTS = 100_000


def load_report(path: Path) -> dict[str, Any]:
    """A saved report, checked field by field where ``gpuperf report`` and the charts read it."""
    try:
        data = read_json(path, KIND, ReportFileError)
    except FileNotFoundError:
        written = path.with_suffix("") if path.suffix == ".gz" else path
        raise ReportFileError(
            f"report file {path} does not exist (write one with pytest --gpu-perf --gpu-perf-json {written})"
        ) from None
    return validate_report(data, path)


def validate_report(data: Any, path: Path) -> dict[str, Any]:
    """``data`` (a parsed report of ``path``) when every field a reader uses has its type."""
    if not isinstance(data, dict) or "schema" not in data:
        what = (
            "no 'schema' field"
            if isinstance(data, dict)
            else f"a JSON {json_type(data)}, not an object with a 'schema' field"
        )
        raise ReportFileError(
            f"{path} is not a pytest-gpuperf report ({what}); "
            f'reports are written by pytest --gpu-perf --gpu-perf-json FILE and start with "schema": "{REPORT_SCHEMA}"'
        )
    if data["schema"] != REPORT_SCHEMA:
        raise ReportFileError(
            f"report file {path}: field 'schema' must be {REPORT_SCHEMA!r}, got {shown(data['schema'])} "
            f"({_older(data, path) or schema_hint(data['schema'], REPORT_SCHEMA)})"
        )
    _Checker(path).report(data)
    return data


def _older(data: dict[str, Any], path: Path) -> str | None:
    """The advice for a report of an older version that ``gpuperf migrate`` brings up to date."""
    from pytest_gpuperf._store.schema_versions import CURRENT, MigrationError, parse_schema, readable

    try:
        found = parse_schema(data)
    except MigrationError:
        return None
    if found is None or found[0] != "report" or found[1] >= CURRENT["report"] or found[1] not in readable("report"):
        return None
    return f"an older version; gpuperf migrate {path} rewrites it as version {CURRENT['report']}"


class _Checker:
    """Raises ReportFileError at the first field of the wrong type, naming it as ``tests[0].nodeid``."""

    def __init__(self, path: Path):
        self.path = path
        self.results = 0

    def fail(self, where: str, what: str, value: Any) -> ReportFileError:
        return ReportFileError(f"report file {self.path}: field {where!r} must be {what}, got {shown(value)}")

    def obj(self, value: Any, where: str, optional: bool = False) -> dict[str, Any]:
        if value is None and optional:
            return {}
        if not isinstance(value, dict):
            raise self.fail(where, "an object" + (" or null" if optional else ""), value)
        return value

    def seq(self, value: Any, where: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(where, "a list", value)
        return value

    def text(self, value: Any, where: str, optional: bool = False) -> None:
        if not (isinstance(value, str) or (optional and value is None)):
            raise self.fail(where, "a string" + (" or null" if optional else ""), value)

    def number(self, holder: dict[str, Any], key: str, where: str, optional: bool = False) -> None:
        """Check ``holder[key]`` and store it as a float: arithmetic on a huge JSON integer would
        overflow where the same value as a float gives inf."""
        value = holder.get(key)
        number = finite_number(value)
        if number is None and not (optional and value is None):
            raise self.fail(where, "a finite number" + (" or null" if optional else ""), value)
        holder[key] = number  # an absent optional number becomes null, as the renderers index it

    def integer(self, value: Any, where: str) -> None:
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail(where, "an integer", value)

    def report(self, data: dict[str, Any]) -> None:
        self.obj(data.get("settings"), "settings", optional=True)
        for key, device in self.obj(data.get("devices", {}), "devices").items():
            self.obj(device, f"devices.{key}")
        for key, count in self.obj(data.get("summary"), "summary", optional=True).items():
            self.integer(count, f"summary.{key}")
        for j, note in enumerate(self.seq(data.get("notes", []), "notes")):
            self.text(note, f"notes[{j}]")
        for i, test in enumerate(self.seq(data.get("tests"), "tests")):
            self.test(test, f"tests[{i}]")
        for j, s in enumerate(self.seq(data.get("skipped", []), "skipped")):
            at = f"skipped[{j}]"
            self.obj(s, at)
            self.text(s.get("reason"), f"{at}.reason")
            self.integer(s.get("count"), f"{at}.count")
        for j, ch in enumerate(self.seq(data.get("baseline_changes", []), "baseline_changes")):
            at = f"baseline_changes[{j}]"
            self.obj(ch, at)
            self.text(ch.get("key"), f"{at}.key")
            self.number(ch, "new_median_s", f"{at}.new_median_s")
            self.number(ch, "old_median_s", f"{at}.old_median_s", optional=True)

    def count(self, t: dict[str, Any], at: str) -> None:
        """Raise once the tests and their results so far pass ``MAX_REPORT_RESULTS``."""
        parts = (t.get(k) for k in ("measurements", "comparisons", "figures", "counters"))
        self.results += 1 + sum(len(p) for p in parts if isinstance(p, list))
        if self.results > MAX_REPORT_RESULTS:
            raise ReportFileError(
                f"report file {self.path}: more than {MAX_REPORT_RESULTS:,} tests and results by {at}, more than "
                "pytest-gpuperf reads; split the run into several reports "
                "(or raise pytest_gpuperf._store.reports.MAX_REPORT_RESULTS)"
            )

    def test(self, t: Any, at: str) -> None:
        self.obj(t, at)
        self.count(t, at)
        self.text(t.get("nodeid"), f"{at}.nodeid")
        self.text(t.get("outcome"), f"{at}.outcome", optional=True)
        self.text(t.get("failure"), f"{at}.failure", optional=True)
        for j, m in enumerate(self.seq(t.get("measurements", []), f"{at}.measurements")):
            self.measurement(m, f"{at}.measurements[{j}]")
        for j, c in enumerate(self.seq(t.get("comparisons", []), f"{at}.comparisons")):
            cat = f"{at}.comparisons[{j}]"
            self.obj(c, cat)
            for k in ("fast", "baseline", "verdict"):
                self.text(c.get(k), f"{cat}.{k}")
            for k in ("speedup", "ci_low", "ci_high"):
                self.number(c, k, f"{cat}.{k}")
            self.number(c, "at_least", f"{cat}.at_least", optional=True)
        for j, fig in enumerate(self.seq(t.get("figures", []), f"{at}.figures")):
            fat = f"{at}.figures[{j}]"
            self.obj(fig, fat)
            self.text(fig.get("key"), f"{fat}.key")
            self.number(fig, "value", f"{fat}.value", optional=True)
            self.text(fig.get("unit"), f"{fat}.unit", optional=True)
        for j, c in enumerate(self.seq(t.get("counters", []), f"{at}.counters")):
            cat = f"{at}.counters[{j}]"
            self.obj(c, cat)
            for k in ("label", "kernel"):
                self.text(c.get(k), f"{cat}.{k}", optional=True)
            derived = self.obj(c.get("derived"), f"{cat}.derived", optional=True)
            for k in derived:
                self.number(derived, k, f"{cat}.derived.{k}", optional=True)

    def measurement(self, m: Any, at: str) -> None:
        self.obj(m, at)
        meas = self.obj(m.get("measurement"), f"{at}.measurement")
        self.text(meas.get("name"), f"{at}.measurement.name")
        for k in ("median_s", "ci_low_s", "ci_high_s"):
            self.number(meas, k, f"{at}.measurement.{k}")
        self.number(meas, "confidence", f"{at}.measurement.confidence", optional=True)
        self.text(m.get("verdict"), f"{at}.verdict")
        if m.get("regression") is not None:
            reg = self.obj(m["regression"], f"{at}.regression", optional=True)
            self.number(reg, "slowdown", f"{at}.regression.slowdown")
            self.text(reg.get("verdict"), f"{at}.regression.verdict", optional=True)
