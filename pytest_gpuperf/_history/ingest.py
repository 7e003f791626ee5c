"""Saved reports into the history: which files, what a run's rows are, and ingesting them once.

A run is identified by the SHA-256 of its report's canonical JSON (keys sorted, no whitespace),
so the same report ingested again, gzipped or not, under any name, is recognised and left alone.
Every file of one ``ingest`` is read and checked before anything is written, and all runs are
written in one transaction: a bad file leaves the database as it was.

A folder (a downloaded CI artifact) is searched at any depth for ``*.json`` and ``*.json.gz``
files; those that are not pytest-gpuperf reports (``benchmark.json``, baselines) are passed over
and listed. A file named on the command line must be a report.
"""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_gpuperf._history.database import HistoryError, transaction
from pytest_gpuperf._store.baselines import parse_estimate
from pytest_gpuperf._store.jsonio import finite_number, read_json, shown
from pytest_gpuperf._store.reports import KIND, ReportFileError, validate_report

__all__ = ["ENVIRONMENT_FIELDS", "Ingested", "Run", "find_reports", "ingest", "run_of"]

REPORT_SCHEMA_PREFIX = "pytest-gpuperf/report/"
# The device fields whose change between two runs makes a change point an environment change.
ENVIRONMENT_FIELDS = ("driver_version", "cuda_runtime_version", "cuda_driver_version", "cupy_version")


@dataclass(frozen=True)
class Run:
    """One report, as the rows it becomes."""

    source: Path
    digest: str
    created: str  # ISO 8601, UTC, seconds
    commit: str | None
    branch: str | None
    dirty: bool | None
    gpuperf_version: str | None
    environments: tuple[tuple[Any, ...], ...]
    measurements: tuple[tuple[Any, ...], ...]
    skipped: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Ingested:
    """What ``ingest`` did with one report."""

    run: Run
    added: bool
    note: str  # why it was not added, or ""


def find_reports(paths: Sequence[Path]) -> tuple[list[tuple[Path, Any]], list[str]]:
    """(path, parsed JSON) of every report to ingest, and a line for each file of a folder that
    is passed over. A named file that is not a report is an error naming it."""
    found: list[tuple[Path, Any]] = []
    passed: list[str] = []
    for path in paths:
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.name.endswith((".json", ".json.gz")) and p.is_file())
            for file in files:
                data = read_json(file, KIND, ReportFileError)
                if _is_report(data):
                    found.append((file, data))
                else:
                    passed.append(f"passed over {file}: not a pytest-gpuperf report")
            if not files:
                passed.append(f"passed over {path}: no .json or .json.gz file in it")
        else:
            if not path.exists():
                raise ReportFileError(f"report file {path} does not exist")
            found.append((path, read_json(path, KIND, ReportFileError)))
    return found, passed


def _is_report(data: Any) -> bool:
    return isinstance(data, dict) and str(data.get("schema", "")).startswith(REPORT_SCHEMA_PREFIX)


def digest_of(data: Any) -> str:
    """SHA-256 of the canonical JSON of a parsed report."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _created(data: Mapping[str, Any], path: Path) -> str:
    raw = data.get("created")
    try:
        when = datetime.fromisoformat(str(raw).replace("Z", "+00:00")) if isinstance(raw, str) else None
    except ValueError:
        when = None
    if when is None:
        raise ReportFileError(f"report file {path}: field 'created' must be an ISO 8601 time, got {shown(raw)}")
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).isoformat(timespec="seconds")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def run_of(path: Path, raw: Any) -> Run:
    """The rows of one parsed report (checked here with the report reader's rules)."""
    digest = digest_of(raw)
    data = validate_report(raw, path)
    created = _created(data, path)
    raw_provenance = data.get("provenance")
    provenance: dict[str, Any] = raw_provenance if isinstance(raw_provenance, dict) else {}
    dirty = provenance.get("dirty")
    environments = tuple(
        (key, *(_text(device.get(f)) for f in ("name", "uuid", *ENVIRONMENT_FIELDS)))
        for key, device in sorted(data.get("devices", {}).items())
    )
    measurements, skipped = _measurements(data.get("tests", []))
    return Run(
        source=path,
        digest=digest,
        created=created,
        commit=_text(provenance.get("commit")),
        branch=_text(provenance.get("branch")),
        dirty=dirty if isinstance(dirty, bool) else None,
        gpuperf_version=_text(provenance.get("pytest_gpuperf")),
        environments=environments,
        measurements=tuple(measurements),
        skipped=skipped,
    )


def _measurements(tests: Iterable[Mapping[str, Any]]) -> tuple[list[tuple[Any, ...]], dict[str, int]]:
    """One row per measurement record; its skip reason (None when it belongs in a series)."""
    rows: list[tuple[Any, ...]] = []
    skipped: dict[str, int] = {}
    seen: dict[tuple[str, str], int] = {}
    for test in tests:
        for record in test.get("measurements", []):
            key = record.get("key")
            device = record.get("device")
            device_key = device.get("key") if isinstance(device, dict) else device
            if not isinstance(key, str) or not isinstance(device_key, str):
                skipped["no key or device"] = skipped.get("no key or device", 0) + 1
                continue
            ordinal = seen.get((key, device_key), 0)
            seen[(key, device_key)] = ordinal + 1
            m = record["measurement"]
            confidence = finite_number(m.get("confidence"))
            reference: str | None = None
            ratio: tuple[float | None, float | None, float | None] = (None, None, None)
            cal = m.get("calibration")
            if isinstance(cal, dict) and isinstance(cal.get("reference"), str):
                reference = cal["reference"]
                estimate = parse_estimate(cal)
                if estimate is not None:
                    level = confidence if confidence is not None and 0.5 < confidence < 1 else 0.99
                    interval = estimate.interval(level)
                    ratio = (interval.estimate, interval.low, interval.high)
            reason = _skip_reason(record, m, ratio[0] if reference else m.get("median_s"))
            if reason:
                skipped[reason] = skipped.get(reason, 0) + 1
            rows.append(
                (
                    key,
                    device_key,
                    ordinal,
                    _text(record.get("module")),
                    m.get("median_s"),
                    m.get("ci_low_s"),
                    m.get("ci_high_s"),
                    confidence,
                    reference,
                    *ratio,
                    record["verdict"],
                    reason,
                )
            )
    return rows, skipped


def _skip_reason(record: Mapping[str, Any], m: Mapping[str, Any], value: Any) -> str | None:
    """Why a measurement stays out of its series: another process used the GPU meanwhile, or it
    has no finite, positive value; None when it belongs in it."""
    health = m.get("health")
    if record.get("verdict") == "contended" or (isinstance(health, dict) and health.get("state") == "contended"):
        return "contended"
    number = finite_number(value)
    if number is None or number <= 0 or math.isinf(math.log(number)):
        return "calibrated ratio missing or not finite" if m.get("calibration") else "median not finite"
    return None


def ingest(
    db: sqlite3.Connection, paths: Sequence[Path], *, now: str | None = None
) -> tuple[list[Ingested], list[str]]:
    """Read every report under ``paths``, then add each run not yet in the database, all in one
    transaction. Returns what happened to each report and the lines for files passed over."""
    found, passed = find_reports(paths)
    if not found:
        raise HistoryError("no pytest-gpuperf report among " + ", ".join(str(p) for p in paths))
    runs = [run_of(path, raw) for path, raw in found]
    stamp = now or datetime.now(timezone.utc).isoformat(timespec="seconds")
    results: list[Ingested] = []
    first_in_call: dict[str, Path] = {}
    with transaction(db):
        for run in runs:
            if run.digest in first_in_call:
                results.append(Ingested(run, False, f"the same report as {first_in_call[run.digest]}"))
                continue
            first_in_call[run.digest] = run.source
            known = db.execute("SELECT source, ingested FROM runs WHERE digest = ?", (run.digest,)).fetchone()
            if known:
                results.append(Ingested(run, False, f"already in the history (from {known[0]}, ingested {known[1]})"))
                continue
            cursor = db.execute(
                "INSERT INTO runs (digest, created, commit_sha, branch, dirty, gpuperf_version, source, ingested) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run.digest,
                    run.created,
                    run.commit,
                    run.branch,
                    run.dirty,
                    run.gpuperf_version,
                    str(run.source),
                    stamp,
                ),
            )
            run_id = cursor.lastrowid
            db.executemany(
                "INSERT INTO environments (run_id, device_key, name, uuid, driver_version, cuda_runtime_version, "
                "cuda_driver_version, cupy_version) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(run_id, *env) for env in run.environments],
            )
            db.executemany(
                "INSERT INTO measurements (run_id, key, device_key, ordinal, module, median_s, ci_low_s, ci_high_s, "
                "confidence, reference, ratio, ratio_low, ratio_high, verdict, skip_reason) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(run_id, *row) for row in run.measurements],
            )
            results.append(Ingested(run, True, ""))
    return results, passed


def describe(item: Ingested) -> str:
    """One line for one report."""
    run = item.run
    if not item.added:
        return f"unchanged {run.source}: {item.note}"
    commit = run.commit[:12] if run.commit else "no commit"
    skipped = sum(run.skipped.values())
    why = ", ".join(f"{n} {reason}" for reason, n in sorted(run.skipped.items()))
    return f"ingested {run.source}: run of {commit} at {run.created}, {len(run.measurements)} measurements" + (
        f" ({skipped} kept out of their series: {why})" if skipped else ""
    )
