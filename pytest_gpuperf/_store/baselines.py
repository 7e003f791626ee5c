"""Stored baselines: one folder per GPU fingerprint, one JSON file per test module.

    baselines/<device key>/<test module>.json
    {
      "schema": "pytest-gpuperf/baselines/1",
      "device": {...fingerprint, versions recorded but not part of the key...},
      "entries": {"test_name[params]::variant": {"median_s": ..., "ci_low_s": ..., ...}}
    }

Files are validated on read: a corrupt file or one of another schema is an error naming
the file and the field, and is never overwritten. Updates take a file lock, re-read the
file under it, merge (other tests' entries are kept) and replace the file atomically, so
concurrent pytest processes or xdist workers lose nothing. A device folder, file or lock that
is a symbolic link is refused before anything is written: writing through it would land
outside the baseline folder.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeGuard

from pytest_gpuperf._gates.stats import BATCH_FACTOR, Estimate, Interval, estimate_from_interval
from pytest_gpuperf._store.files import (
    atomic_write_json,
    parse_json_object,
    read_json_object,
    stored_files,
    symlinked_component,
)
from pytest_gpuperf._store.jsonio import finite_number, shown
from pytest_gpuperf._store.locks import hold
from pytest_gpuperf._store.schema_versions import BASELINES_SCHEMA as SCHEMA
from pytest_gpuperf.errors import BaselineFileError, GpuPerfError

LOCK_TIMEOUT_S = 120.0
_NUMBER_FIELDS = ("median_s", "ci_low_s", "ci_high_s")


@dataclass(frozen=True)
class BaselineEntry:
    """A stored measurement of one variant of one test."""

    median_s: float
    ci_low_s: float
    ci_high_s: float
    confidence: float
    n: int
    spread: float
    mode: str
    method: str
    recorded_at: str
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def interval(self) -> Interval:
        return Interval(self.median_s, self.ci_low_s, self.ci_high_s, self.confidence)

    def with_provenance(self, provenance: Mapping[str, Any]) -> BaselineEntry:
        """This entry stamped with the commit (and dirty flag) of the code that measured it."""
        return self.with_extra(source={k: provenance.get(k) for k in ("commit", "dirty")})

    def with_extra(self, **fields: Any) -> BaselineEntry:
        return dataclasses.replace(self, extra={**self.extra, **fields})

    def estimate(self) -> Estimate:
        """The stored log-time estimate (from the interval, for entries that stored none)."""
        return parse_estimate(self.extra.get("estimate")) or estimate_from_interval(self.interval)

    def calibration(self) -> tuple[str, Estimate] | None:
        """The stored reference kernel's name and log(t / t_reference), if recorded with one."""
        raw = self.extra.get("calibration")
        est = parse_estimate(raw)
        if est is None or not isinstance(raw, dict) or not isinstance(raw.get("reference"), str):
            return None
        return str(raw["reference"]), est

    def levels(self) -> tuple[str, list[Estimate]] | None:
        """The reference kernel and the recorded levels of log(t / t_reference), fastest first (the
        reader refuses them in another order), if ``gpuperf levels`` stored them (``_gates.levels``)."""
        raw = self.extra.get("levels")
        if not isinstance(raw, dict) or not isinstance(raw.get("reference"), str):
            return None
        found = [parse_estimate(level) for level in raw.get("levels", [])]
        levels = [e for e in found if e is not None]
        if len(levels) < 2 or len(levels) != len(found):
            return None
        return str(raw["reference"]), levels

    def problem(self) -> str | None:
        """Why the reader would refuse this entry (so an update must not write it), or None."""
        found = entry_problem(self.to_json())
        if found is None:
            return None
        field_name, text = found
        return f"field {field_name!r} {text}" if field_name else text

    def to_json(self) -> dict[str, Any]:
        data = {
            "median_s": self.median_s,
            "ci_low_s": self.ci_low_s,
            "ci_high_s": self.ci_high_s,
            "confidence": self.confidence,
            "n": self.n,
            "spread": self.spread,
            "mode": self.mode,
            "method": self.method,
            "recorded_at": self.recorded_at,
        }
        data.update(self.extra)
        return data

    @classmethod
    def from_measurement(cls, m: Mapping[str, Any]) -> BaselineEntry:
        """From a Measurement summary (``Measurement.summary()``)."""
        kept = ("bytes", "flops", "batch", "throttled", "sm_clock_mhz", "estimate", "calibration")
        extra = {k: m[k] for k in kept if m.get(k) is not None}
        return cls(
            median_s=m["median_s"],
            ci_low_s=m["ci_low_s"],
            ci_high_s=m["ci_high_s"],
            confidence=m["confidence"],
            n=m["n"],
            spread=m["spread"],
            mode=m["mode"],
            method=m["method"],
            recorded_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            extra=extra,
        )


def _fail(path: Path, field_name: str, problem: str) -> BaselineFileError:
    return BaselineFileError(
        f"baseline file {path}: field {field_name!r} {problem}. Fix the file or restore it from version "
        f"control; to start over for this GPU delete it and run with --gpu-perf-update-baselines."
    )


MAX_LOG = 100.0  # |log| of a time or a ratio: e^100 is far past any GPU time in seconds or any ratio

# The bounds of a stored entry (docs/schemas.md states them). A value past them is no measurement
# but a typo or a damaged file, and the gate would trust it: a median of 1e300 s makes any
# slowdown an improvement, an interval of zero width makes any difference certain.
MIN_TIME_S = 1e-7  # per launch; the sampler refuses times under 0.5 us (_timing.sampler.MIN_LAUNCH_S)
MAX_TIME_S = 1e3
LOG_TIME = (math.log(MIN_TIME_S), math.log(MAX_TIME_S))  # an estimate's log_center, log seconds
MAX_LOG_RATIO = math.log(MAX_TIME_S / MIN_TIME_S)  # |log(t / t_reference)| of a calibration or a level


def parse_estimate(raw: Any) -> Estimate | None:
    """An ``Estimate`` from its stored summary; None when absent or malformed (a centre beyond
    ±MAX_LOG, a standard error beyond MAX_LOG, counts that are not integers)."""
    if not isinstance(raw, dict):
        return None
    center, se = finite_number(raw.get("log_center")), finite_number(raw.get("log_se"))
    if center is None or se is None or abs(center) > MAX_LOG or not 0 <= se <= MAX_LOG:
        return None
    df = raw.get("df")
    if not _count(df) or df < 1:
        return None
    n, batch_size, needed = (
        raw.get(k, default) for k, default in (("n", df + 1), ("batch_size", 0), ("needed_batch_size", 0))
    )
    if not (_count(n) and _count(batch_size) and _count(needed)):
        return None
    lag1 = finite_number(raw.get("lag1", 0.0))
    low, high = finite_number(raw.get("batch_low")), finite_number(raw.get("batch_high"))
    rho = min(max(0.0 if lag1 is None else lag1, 0.0), 0.99)
    tau = finite_number(raw.get("tau"))
    serial_p = finite_number(raw.get("serial_p", 1.0))
    if tau is None:  # stored before tau was: the AR(1) reading of its lag-1 correlation (no batches: none)
        tau = (1.0 + rho) / (1.0 - rho)
        needed = math.ceil(BATCH_FACTOR * tau) if batch_size else 0
    if not 0 <= tau <= MAX_LOG**3 or serial_p is None or not 0 <= serial_p <= 1:
        return None
    return Estimate(
        center,
        se,
        df,
        n,
        rho,
        batch_size,
        needed,
        -math.inf if low is None else low,
        math.inf if high is None else high,
        tau,
        serial_p,
    )


def _count(value: Any) -> TypeGuard[int]:
    """A JSON integer of 0 or more (not a bool, not a float)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def entry_problem(raw: Any) -> tuple[str, str] | None:
    """The first (field, problem) that makes ``raw`` an invalid stored entry, or None.

    The reader refuses exactly these, and an update never writes one.
    """
    if not isinstance(raw, dict):
        return "", f"must be an object, got {type(raw).__name__}"
    numbers = {}
    for name in _NUMBER_FIELDS:
        value = finite_number(raw.get(name))
        if value is None or not MIN_TIME_S <= value <= MAX_TIME_S:
            return (
                name,
                f"must be a time per launch from {MIN_TIME_S:g} s to {MAX_TIME_S:g} s, got {shown(raw.get(name))}",
            )
        numbers[name] = value
    if not numbers["ci_low_s"] < numbers["ci_high_s"]:
        return "", (
            f"must have ci_low_s below ci_high_s, got {numbers['ci_low_s']!r} and {numbers['ci_high_s']!r}: "
            "an interval of zero width claims a certainty no measurement has"
        )
    if not numbers["ci_low_s"] <= numbers["median_s"] <= numbers["ci_high_s"]:
        return "", "must satisfy ci_low_s <= median_s <= ci_high_s"
    confidence = finite_number(raw.get("confidence"))
    if confidence is None or not 0.5 < confidence < 1:  # an interval at 0.5 or below says nothing
        return "confidence", f"must be a number above 0.5 and below 1, got {shown(raw.get('confidence'))}"
    n = raw.get("n")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        return "n", f"must be a positive integer, got {shown(n)}"
    spread = raw.get("spread", 0.0)
    if finite_number(spread) is None or spread < 0:
        return "spread", f"must be a number, 0 or more, got {shown(spread)}"
    for name in ("mode", "method", "recorded_at"):
        if not isinstance(raw.get(name), str):
            return name, f"must be a string, got {shown(raw.get(name))}"
    if raw["mode"] not in ("cold", "hot"):
        return "mode", f"must be 'cold' or 'hot', got {raw['mode']!r}"
    if "estimate" in raw:
        found = estimate_problem(raw["estimate"], *LOG_TIME)
        if found:
            return _within("estimate", found)
    if "calibration" in raw:
        calibration = raw["calibration"]
        if not isinstance(calibration, dict) or not isinstance(calibration.get("reference"), str):
            return "calibration.reference", "must be a string naming the reference kernel the entry was timed against"
        found = estimate_problem(calibration, -MAX_LOG_RATIO, MAX_LOG_RATIO)
        if found:
            return _within("calibration", found)
    if "levels" in raw:
        return _levels_problem(raw["levels"], raw.get("calibration"))
    return None


def _within(parent: str, found: tuple[str, str]) -> tuple[str, str]:
    return (f"{parent}.{found[0]}" if found[0] else parent), found[1]


def estimate_problem(raw: Any, low: float, high: float) -> tuple[str, str] | None:
    """The first (field, problem) of a stored estimate on the log scale whose centre must lie in
    [low, high], or None: a finite ``log_se`` above 0 (and at most MAX_LOG), an integer ``df`` of 1
    or more, counts that are integers."""
    if not isinstance(raw, dict):
        return "", f"must be an object with log_center, log_se and df, got {shown(raw)}"
    center = finite_number(raw.get("log_center"))
    if center is None or not low <= center <= high:
        return "log_center", f"must be a number from {low:.4g} to {high:.4g}, got {shown(raw.get('log_center'))}"
    se = finite_number(raw.get("log_se"))
    if se is None or not 0 < se <= MAX_LOG:
        return "log_se", (
            f"must be a number above 0 and at most {MAX_LOG:g}, got {shown(raw.get('log_se'))}: "
            "a standard error of 0 claims a certainty no measurement has"
        )
    if not _count(raw.get("df")) or raw["df"] < 1:
        return "df", f"must be an integer of 1 or more, got {shown(raw.get('df'))}"
    for name in ("n", "batch_size", "needed_batch_size"):
        if name in raw and not _count(raw[name]):
            return name, f"must be an integer of 0 or more, got {shown(raw[name])}"
    return None


def _levels_problem(raw: Any, calibration: Any) -> tuple[str, str] | None:
    """The first problem of an entry's ``levels`` field (written by ``gpuperf levels``), or None."""
    if not isinstance(raw, dict):
        return "levels", f"must be an object, got {shown(raw)}"
    reference = raw.get("reference")
    if not isinstance(reference, str):
        return "levels.reference", f"must be a string, got {shown(reference)}"
    cal_reference = calibration.get("reference") if isinstance(calibration, dict) else None
    if cal_reference != reference:
        return "levels.reference", (
            f"is {reference!r} but the entry's calibration reference is {shown(cal_reference)}: levels are "
            "times relative to the reference the entry was recorded with; derive them again with gpuperf levels"
        )
    levels = raw.get("levels")
    if not isinstance(levels, list) or len(levels) < 2:
        return "levels.levels", f"must be a list of at least 2 levels, got {shown(levels)}"
    centers: list[float] = []
    for i, level in enumerate(levels):
        found = estimate_problem(level, -MAX_LOG_RATIO, MAX_LOG_RATIO)
        if found:
            return _within(f"levels.levels[{i}]", found)
        estimate = parse_estimate(level)
        assert estimate is not None  # estimate_problem refuses all that parse_estimate refuses
        if centers and estimate.center <= centers[-1]:
            return f"levels.levels[{i}]", "must be slower than the level before it: levels are stored fastest first"
        centers.append(estimate.center)
    return None


SCHEMA_PREFIX = "pytest-gpuperf/"


def schema_hint(schema: Any, wanted: str) -> str:
    """Why a ``schema`` field is not the ``wanted`` one (``pytest-gpuperf/<kind>/<version>``):
    another version of this kind, another kind of ours, or not a pytest-gpuperf file at all."""
    if not isinstance(schema, str) or not schema.startswith(SCHEMA_PREFIX):
        return "not a pytest-gpuperf file: it has no pytest-gpuperf 'schema' field"
    kind, wanted_kind = schema.split("/")[1], wanted.split("/")[1]
    if kind != wanted_kind:
        return f"a pytest-gpuperf {kind} file, not a {wanted_kind} file"
    return f"written by another schema version, {schema}; read it with the pytest-gpuperf version that wrote it"


def _parse_entry(path: Path, key: str, raw: Any) -> BaselineEntry:
    problem = entry_problem(raw)
    if problem:
        field_name, text = problem
        raise _fail(path, f"entries.{key}" + (f".{field_name}" if field_name else ""), text)
    known = {"median_s", "ci_low_s", "ci_high_s", "confidence", "n", "spread", "mode", "method", "recorded_at"}
    return BaselineEntry(
        median_s=float(raw["median_s"]),
        ci_low_s=float(raw["ci_low_s"]),
        ci_high_s=float(raw["ci_high_s"]),
        confidence=float(raw["confidence"]),
        n=raw["n"],
        spread=float(raw.get("spread", 0.0)),
        mode=raw["mode"],
        method=raw["method"],
        recorded_at=raw["recorded_at"],
        extra={k: v for k, v in raw.items() if k not in known},
    )


@dataclass
class BaselineFile:
    path: Path
    device: dict[str, Any]
    entries: dict[str, BaselineEntry]

    @classmethod
    def read(cls, path: Path) -> BaselineFile | None:
        """The validated file, or None when it does not exist."""
        data = read_json_object(path, "baseline file")
        return None if data is None else cls.validate(path, data)

    @classmethod
    def parse(cls, path: Path, text: str) -> BaselineFile:
        """Validate ``text`` as the content of ``path`` (which need not exist: ``git show`` output)."""
        return cls.validate(path, parse_json_object(text, path, "baseline file"))

    @classmethod
    def validate(cls, path: Path, data: dict[str, Any]) -> BaselineFile:
        schema = data.get("schema")
        if schema != SCHEMA:
            raise _fail(path, "schema", f"must be {SCHEMA!r}, got {shown(schema)} ({schema_hint(schema, SCHEMA)})")
        if not isinstance(data.get("device"), dict):
            raise _fail(path, "device", "must be an object describing the GPU")
        entries = data.get("entries")
        if not isinstance(entries, dict):
            raise _fail(path, "entries", "must be an object mapping test::variant to measurements")
        return cls(path, data["device"], {k: _parse_entry(path, k, v) for k, v in entries.items()})

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "device": self.device,
            "entries": {k: self.entries[k].to_json() for k in sorted(self.entries)},
        }


@dataclass(frozen=True)
class BaselineChange:
    """One entry written by an update: old is None for a new entry."""

    file: str
    key: str
    old: BaselineEntry | None
    new: BaselineEntry

    @property
    def delta(self) -> float | None:
        return self.new.median_s / self.old.median_s - 1.0 if self.old else None


@contextlib.contextmanager
def locked_for_writing(
    path: Path, root: Path, kind: str = "baseline file", timeout_s: float | None = None
) -> Iterator[None]:
    """Hold ``<path>.lock`` to rewrite ``path``, a file under ``root``. Refuses, with a
    BaselineFileError naming the link, when a folder between ``root`` and ``path``, the file or
    its lock is a symbolic link; a lock not acquired within ``timeout_s`` (default
    LOCK_TIMEOUT_S) is a BaselineFileError naming the holder."""
    lock = path.with_name(path.name + ".lock")
    for candidate in (path, lock):
        link = symlinked_component(candidate, root)
        if link is not None:
            raise BaselineFileError(
                f"{kind} {path} was not written: {link} is a symbolic link (to {_link_target(link)!r}) and "
                f"writing through it would change files outside {root}. Replace the link with a real "
                "folder or file."
            )
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        try:
            wait = LOCK_TIMEOUT_S if timeout_s is None else timeout_s
            stack.enter_context(hold(lock, timeout_s=wait, purpose=f"writing {kind} {path}"))
        except GpuPerfError as exc:  # a symlinked lock, a timeout, a lock file that cannot be opened
            raise BaselineFileError(f"{kind} {path} was not written: {exc}") from None
        yield


def _link_target(link: Path) -> str:
    try:
        return os.readlink(link)
    except OSError:
        return "?"


MAX_FILE_NAME = 200  # bytes; most filesystems allow 255


def module_file_name(module_path: str) -> str:
    """'tests/merge/test_perf.py' -> 'tests.merge.test_perf.json', one file per module, never shared.

    Path components are joined by '.'; inside a component every character other than a letter,
    a digit, '_' or '-' is written as '%XX' per UTF-8 byte ('.' as '%2E', '%' as '%25'), so two
    module paths never map to one name. A name longer than ``MAX_FILE_NAME`` keeps its start and
    ends in a hash of the whole path.
    """
    stem = module_path[:-3] if module_path.endswith(".py") else module_path
    parts = [p for p in stem.replace("\\", "/").split("/") if p not in ("", ".")]
    name = ".".join(_escape(p) for p in parts) + ".json"
    if len(name.encode()) > MAX_FILE_NAME:
        import hashlib

        digest = hashlib.sha256(module_path.encode()).hexdigest()[:16]
        name = name[: MAX_FILE_NAME - len(digest) - 7] + "~" + digest + ".json"
    return name


def _escape(part: str) -> str:
    return "".join(
        c if c.isascii() and (c.isalnum() or c in "_-") else "".join(f"%{b:02X}" for b in c.encode()) for c in part
    )


class BaselineStore:
    """Reads and updates ``<root>/<device key>/<module>.json`` files, caching reads per process."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._cache: dict[Path, BaselineFile | None] = {}

    def path_for(self, device_key: str, module_path: str) -> Path:
        return self.root / device_key / module_file_name(module_path)

    def load(self, device_key: str, module_path: str) -> BaselineFile | None:
        path = self.path_for(device_key, module_path)
        if path not in self._cache:
            self._cache[path] = BaselineFile.read(path)
        return self._cache[path]

    def lookup(self, device_key: str, module_path: str, key: str) -> BaselineEntry | None:
        f = self.load(device_key, module_path)
        return f.entries.get(key) if f else None

    def update(
        self,
        device_key: str,
        module_path: str,
        device: Mapping[str, Any],
        entries: Mapping[str, BaselineEntry],
        provenance: Mapping[str, Any] | None = None,
    ) -> list[BaselineChange]:
        """Merge ``entries`` into the file under a lock; return what changed."""
        path = self.path_for(device_key, module_path)
        with locked_for_writing(path, self.root):
            current = BaselineFile.read(path) or BaselineFile(path, dict(device), {})
            changes = [BaselineChange(str(path), k, current.entries.get(k), e) for k, e in sorted(entries.items())]
            if provenance:
                entries = {k: e.with_provenance(provenance) for k, e in entries.items()}
            current.entries.update(entries)
            current.device = dict(device)
            atomic_write_json(path, current.to_json())
        self._cache.pop(path, None)
        return changes

    def amend(self, path: Path, fields: Mapping[str, Mapping[str, Any]]) -> list[str]:
        """Add ``fields[key]`` to each entry ``key`` of the file at ``path``, under its lock; return
        the keys that were not there (nothing is written for them). Every amended entry must pass
        the reader's validation, or nothing is written (BaselineFileError naming the field)."""
        with locked_for_writing(path, self.root):
            current = BaselineFile.read(path)
            entries = current.entries if current else {}
            missing = sorted(set(fields) - set(entries))
            for key in sorted(set(fields) & set(entries)):
                amended = entries[key].with_extra(**fields[key])
                problem = amended.problem()
                if problem:
                    raise BaselineFileError(f"baseline file {path} was not written: entry {key!r}: {problem}")
                entries[key] = amended
            if current is not None and len(missing) < len(fields):
                atomic_write_json(path, current.to_json())
        self._cache.pop(path, None)
        return missing

    def remove_entries(self, path: Path, keys: Iterable[str]) -> list[str]:
        """Remove ``keys`` from the file at ``path`` under its lock; return those that were there.

        The file is re-read under the lock (another process may have written it since it was
        listed) and replaced atomically; a file left with no entries is deleted.
        """
        wanted = set(keys)
        with locked_for_writing(path, self.root):
            current = BaselineFile.read(path)
            if current is None:
                return []
            removed = sorted(wanted & set(current.entries))
            if removed:
                for key in removed:
                    del current.entries[key]
                if current.entries:
                    atomic_write_json(path, current.to_json())
                else:
                    path.unlink()
        self._cache.pop(path, None)
        return removed

    def files(self) -> Iterable[Path]:
        return stored_files(self.root, "*/*.json")
