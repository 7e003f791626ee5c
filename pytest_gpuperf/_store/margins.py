"""Margins files: a kernel family's gated margins, each with the measurement it came from.

A margins file (``kernels/<family>/margins.json`` in this repository) holds, per architecture,
one entry per gated comparison: the margin, the test it gates, the rule that derived it, the runs
the rule looked at (``over``) and the evidence, the lowest interval among them with its GPU,
date and commit. ``gpuperf margins`` derives entries from saved ``--gpu-perf-json`` reports
and renders a file as a table for a README.

The rule leaves 5% of headroom below the lowest lower end measured, rounded down to a hundredth::

    margin = floor(100 * 0.95 * ci_low) / 100

A gate passes when its whole interval lies at or above the margin, so a margin below 1 claims no
speedup, only a bound on the slowdown. An entry may gate a figure instead of an interleaved
comparison (a bandwidth fraction, say): then the rule takes the lowest value of that figure.

Nothing here imports pytest or the timing code: the kernel families read their margins through
``MarginsFile.read`` at import time.
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pytest_gpuperf._store.jsonio import finite_number, read_json, shown
from pytest_gpuperf.errors import GpuPerfError

SCHEMA = "pytest-gpuperf/margins/1"
KIND = "margins file"
HEADROOM = 0.95
FORMULA = "floor(100 * 0.95 * ci_low) / 100"
FIGURE_FORMULA = "floor(100 * 0.95 * value) / 100"
RULE = f"{FORMULA} over the lowest interval of the runs listed in `over`"
FIGURE_RULE = f"{FIGURE_FORMULA} over the lowest value of the runs listed in `over`"
DIGITS = 6  # decimals kept of a measured ratio: the rule's floor is unchanged by the rounding

CommitOf = Literal["run", "margin"]


class MarginsFileError(GpuPerfError):
    """A margins file is unreadable, of another schema, or has a field of the wrong type."""


_ARCH_RE = re.compile(r"^sm_?(\d{2,3}[af]?)$")


def arch_key(text: str) -> str | None:
    """An architecture in nvcc's spelling, the one margins are stored and looked up under:
    ``"sm_90"`` for ``"sm_90"`` or the compact ``"sm90"``; None for text that is neither."""
    m = _ARCH_RE.match(text.strip().lower())
    return f"sm_{m.group(1)}" if m else None


def margin_rule(low: float) -> float:
    """The margin the rule gives for the lowest lower end (or lowest value) ``low``.

    ``round`` first: 100 * 0.95 * 1.0526316 is 99.99999... in binary floating point."""
    return math.floor(round(100 * HEADROOM * low, 6)) / 100


# -- the file's records ---------------------------------------------------------------------
@dataclass(frozen=True)
class Gpu:
    name: str  # as NVML reports it: "NVIDIA H100 80GB HBM3"
    arch: str  # "sm_90"

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "arch": self.arch}


@dataclass(frozen=True)
class MarginRun:
    """One pytest run whose report margins were derived from."""

    id: str
    gpu: Gpu
    created: str  # the report's creation time (ISO 8601)
    commit: str | None  # the commit the run measured, where recorded
    report: str | None = None  # where the report is kept, relative to the repository root

    @property
    def date(self) -> str:
        return self.created[:10]

    def to_json(self) -> dict[str, Any]:
        return {"gpu": self.gpu.to_json(), "created": self.created, "commit": self.commit, "report": self.report}


@dataclass(frozen=True)
class Evidence:
    """The lowest interval (or figure) among an entry's runs, with where it was measured."""

    run: str
    gpu: Gpu
    date: str
    commit: str | None
    commit_of: CommitOf  # "run": the commit measured; "margin": the run recorded none, the commit that set the margin
    estimate: float
    ci_low: float | None = None  # None for a figure (one value, no interval)
    ci_high: float | None = None
    confidence: float | None = None

    @property
    def low(self) -> float:
        """What the rule takes: the interval's lower end, or the figure's value."""
        return self.estimate if self.ci_low is None else self.ci_low

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "run": self.run,
            "gpu": self.gpu.to_json(),
            "date": self.date,
            "commit": self.commit,
            "commit_of": self.commit_of,
            "estimate": self.estimate,
        }
        if self.ci_low is not None:
            out.update(ci_low=self.ci_low, ci_high=self.ci_high, confidence=self.confidence)
        return out


@dataclass(frozen=True)
class MarginEntry:
    """One gated margin. ``fast``/``baseline`` name the interleaved comparison's variants;
    ``figure`` instead names a recorded figure the margin is a floor of. ``value`` None means
    not gated on this architecture, and then ``reason`` says why."""

    key: str
    arch: str
    test: str
    value: float | None
    fast: str | None = None
    baseline: str | None = None
    figure: str | None = None
    rule: str | None = None
    over: tuple[str, ...] = ()
    evidence: Evidence | None = None
    note: str | None = None
    reason: str | None = None

    @property
    def formula(self) -> str:
        return FIGURE_FORMULA if self.figure else FORMULA

    @property
    def what(self) -> str:
        return f"figure {self.figure}" if self.figure else f"{self.fast} vs {self.baseline}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"test": self.test}
        if self.figure:
            out["figure"] = self.figure
        else:
            out.update(fast=self.fast, baseline=self.baseline)
        out["value"] = self.value
        for name in ("note", "reason", "rule"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.over:
            out["over"] = list(self.over)
        if self.evidence is not None:
            out["evidence"] = self.evidence.to_json()
        return out


@dataclass
class MarginsFile:
    path: Path
    family: str
    runs: dict[str, MarginRun] = field(default_factory=dict)
    entries: dict[str, dict[str, MarginEntry]] = field(default_factory=dict)  # arch -> key -> entry
    about: str | None = None

    # -- reading and writing ----------------------------------------------------------------
    @classmethod
    def read(cls, path: Path) -> MarginsFile:
        try:
            data = read_json(path, KIND, MarginsFileError)
        except FileNotFoundError:
            raise MarginsFileError(f"margins file {path} does not exist") from None
        return cls.parse(data, path)

    @classmethod
    def parse(cls, data: Any, path: Path) -> MarginsFile:
        return _Reader(path).file(data)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema": SCHEMA, "family": self.family}
        if self.about:
            out["about"] = self.about
        out["runs"] = {rid: run.to_json() for rid, run in self.runs.items()}
        out["margins"] = {arch: {key: e.to_json() for key, e in table.items()} for arch, table in self.entries.items()}
        return out

    def dumps(self) -> str:
        return _dumps(self.to_json()) + "\n"

    def write(self) -> None:
        from pytest_gpuperf._store.files import atomic_write_text

        atomic_write_text(self.path, self.dumps())

    # -- what the families and the tests read ------------------------------------------------
    def all_entries(self) -> Iterable[MarginEntry]:
        for table in self.entries.values():
            yield from table.values()

    def table(self, figure: str | None = None) -> dict[str, dict[str, float | None]]:
        """``{arch: {key: margin}}`` of the interleaved comparisons, or of the floors of ``figure``."""
        return {
            arch: {key: e.value for key, e in entries.items() if e.figure == figure}
            for arch, entries in self.entries.items()
        }

    def ungated(self) -> dict[str, dict[str, str]]:
        """``{arch: {key: reason}}`` of the entries deliberately left without a margin."""
        return {arch: {k: e.reason or "" for k, e in t.items() if e.value is None} for arch, t in self.entries.items()}

    def problems(self) -> list[str]:
        """Every way an entry breaks the file's contract: a margin that does not follow the rule
        from the evidence it records, evidence missing a GPU, date or commit, an interval out of
        order, a run not in ``runs``, an ungated entry without a reason. Empty when all holds."""
        found: list[str] = []
        for e in self.all_entries():
            where = f"{self.path}: {e.arch} {e.key!r}"
            if e.value is None:
                if not (e.reason or "").strip():
                    found.append(f"{where}: no margin and no reason why it is not gated")
                continue
            ev = e.evidence
            if ev is None:
                found.append(f"{where}: margin {e.value} without evidence")
                continue
            if e.rule is None or not e.rule.startswith(e.formula):
                found.append(f"{where}: rule {e.rule!r} is not {e.formula} over the lowest measured")
            expected = margin_rule(ev.low)
            if e.value != expected:
                found.append(f"{where}: margin {e.value} but the rule gives {expected} from {ev.low}")
            if not (ev.gpu.name and ev.gpu.arch == e.arch and _is_date(ev.date) and ev.commit):
                found.append(f"{where}: evidence needs the GPU (name, arch {e.arch}), the date and a commit")
            if ev.ci_low is not None and not (ev.ci_high is not None and ev.ci_low <= ev.estimate <= ev.ci_high):
                found.append(f"{where}: interval out of order: {ev.estimate} [{ev.ci_low}, {ev.ci_high}]")
            if ev.ci_low is None and e.figure is None:
                found.append(f"{where}: a comparison's evidence needs its interval (ci_low, ci_high)")
            if ev.run not in e.over:
                found.append(f"{where}: the evidence's run {ev.run!r} is not among the runs it was the lowest of")
            for rid in e.over:
                run = self.runs.get(rid)
                if run is None:
                    found.append(f"{where}: run {rid!r} is not listed under 'runs'")
                elif rid == ev.run and (
                    run.gpu != ev.gpu or run.date != ev.date or (ev.commit_of == "run" and run.commit != ev.commit)
                ):
                    found.append(f"{where}: the evidence's GPU, date or commit differ from run {rid!r}")
        return found

    # -- deriving from reports -----------------------------------------------------------------
    def derive(self, measured: Sequence[Measured], only: Sequence[str] = (), reset: bool = False) -> list[MarginChange]:
        """Update the entries (those matching the globs ``only``, or all) from ``measured``:
        each takes the lowest of its recorded evidence (none with ``reset``) and the new
        measurements of its test, and the rule's margin from it. Returns one change per entry
        that any measurement touched."""
        changes: list[MarginChange] = []
        for arch, table in self.entries.items():
            for key, e in list(table.items()):
                if only and not any(fnmatch.fnmatchcase(key, g) for g in only):
                    continue
                mine = [m for m in measured if m.run.gpu.arch == arch and m.matches(e)]
                if not mine:
                    continue
                for m in mine:
                    self.runs[m.run.id] = m.run
                candidates = [m.evidence() for m in mine]
                over = tuple(dict.fromkeys(m.run.id for m in mine))
                if not reset and e.evidence is not None:
                    candidates.append(e.evidence)
                    over = tuple(dict.fromkeys((*e.over, *over)))
                lowest = min(candidates, key=lambda ev: ev.low)
                new = replace(
                    e,
                    value=margin_rule(lowest.low),
                    evidence=lowest,
                    over=over,
                    rule=FIGURE_RULE if e.figure else RULE,
                    reason=None,
                )
                table[key] = new
                changes.append(MarginChange(e, new))
        if reset:
            used = {rid for e in self.all_entries() for rid in e.over}
            self.runs = {rid: run for rid, run in self.runs.items() if rid in used}
        return changes


@dataclass(frozen=True)
class MarginChange:
    old: MarginEntry
    new: MarginEntry


def _dumps(value: Any, indent: str = "") -> str:
    """JSON indented by two spaces, with each object or list that fits in ``INLINE`` characters on one line."""
    flat = json.dumps(value, allow_nan=False)
    if not isinstance(value, (dict, list)) or len(flat) + len(indent) <= INLINE or not value:
        return flat
    inner = indent + "  "
    if isinstance(value, list):
        items = [inner + _dumps(v, inner) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + indent + "]"
    items = [f"{inner}{json.dumps(k)}: {_dumps(v, inner)}" for k, v in value.items()]
    return "{\n" + ",\n".join(items) + "\n" + indent + "}"


INLINE = 100


def _is_date(text: str) -> bool:
    return len(text) == 10 and text[4] == text[7] == "-" and text.replace("-", "").isdigit()


# -- measurements read from reports -----------------------------------------------------------
@dataclass(frozen=True)
class Measured:
    """One comparison or figure of one test in one report."""

    run: MarginRun
    test: str
    estimate: float
    fast: str | None = None
    baseline: str | None = None
    figure: str | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    confidence: float | None = None

    @property
    def low(self) -> float:
        return self.estimate if self.ci_low is None else self.ci_low

    def matches(self, e: MarginEntry) -> bool:
        if self.test != e.test:
            return False
        if e.figure is not None:
            return self.figure == e.figure
        return self.figure is None and (self.fast, self.baseline) == (e.fast, e.baseline)

    def evidence(self) -> Evidence:
        r = self.run
        return Evidence(
            r.id,
            r.gpu,
            r.date,
            r.commit,
            "run",
            round(self.estimate, DIGITS),
            _round(self.ci_low),
            _round(self.ci_high),
            self.confidence,
        )


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, DIGITS)


def gpu_label(name: str) -> str:
    """A short lowercase model for run ids: "h100" for "NVIDIA H100 80GB HBM3"."""
    words = (
        [w for w in name.split() if w.upper() not in ("NVIDIA", "GEFORCE", "RTX", "TESLA")] or name.split() or ["gpu"]
    )
    word = next((w for w in words if any(c.isdigit() for c in w)), words[0])
    return "".join(c for c in word.lower() if c.isalnum()) or "gpu"


def run_id(gpu: Gpu, created: str, commit: str | None) -> str:
    """``<date>-<model>-<commit>``, or the creation time (UTC, as the report writes it) where no
    commit is known: ``<YYYY-MM-DD>-h100-<7 hex digits>``, ``<YYYY-MM-DD>-h200-<HHMM>``."""
    tail = commit[:7] if commit else created[11:13] + created[14:16]
    return f"{created[:10]}-{gpu_label(gpu.name)}-{tail}"


def measurements_of(report: Mapping[str, Any], path: str, commit: str | None = None) -> list[Measured]:
    """Every comparison and figure of a loaded report (``_store.reports.load_report``), one run per
    device it measured on. ``commit`` is used where the report records none (``provenance``)."""
    recorded = (report.get("provenance") or {}).get("commit")
    commit = recorded if isinstance(recorded, str) and recorded else commit
    created = str(report.get("created") or "")
    devices: Mapping[str, Any] = report.get("devices") or {}
    runs: dict[str, MarginRun] = {}

    def run_for(device_key: str | None) -> MarginRun | None:
        if device_key is None:
            if len(devices) != 1:
                return None
            device_key = next(iter(devices))
        if device_key not in runs:
            d = devices.get(device_key) or {}
            major, _, minor = str(d.get("compute_capability", "")).partition(".")
            gpu = Gpu(str(d.get("name", device_key)), f"sm_{major}{minor}")
            runs[device_key] = MarginRun(run_id(gpu, created, commit), gpu, created, commit, path)
        return runs[device_key]

    out: list[Measured] = []
    for t in report.get("tests", []):
        keys = [m.get("device") for m in t.get("measurements", []) if m.get("device")]
        run = run_for(keys[0] if keys else None)
        if run is None:
            continue
        for c in t.get("comparisons", []):
            if c.get("ci_low") is None or c.get("speedup") is None:
                continue
            out.append(
                Measured(
                    run,
                    t["nodeid"],
                    c["speedup"],
                    fast=c.get("fast"),
                    baseline=c.get("baseline"),
                    ci_low=c["ci_low"],
                    ci_high=c.get("ci_high"),
                    confidence=c.get("confidence"),
                )
            )
        for f in t.get("figures", []):
            if f.get("value") is not None:
                out.append(Measured(run, t["nodeid"], f["value"], figure=f.get("key")))
    if len({r.id for r in runs.values()}) < len(runs):  # two GPUs of one model in one report
        raise MarginsFileError(f"{path}: several GPUs of one model; derive from one device's report at a time")
    return out


def lowest_by_test(measured: Iterable[Measured]) -> dict[tuple[str, str, str], Measured]:
    """Per (architecture, test, "fast vs baseline") the comparison with the lowest interval."""
    lowest: dict[tuple[str, str, str], Measured] = {}
    for m in measured:
        if m.figure is not None:
            continue
        k = (m.run.gpu.arch, m.test, f"{m.fast} vs {m.baseline}")
        if k not in lowest or m.low < lowest[k].low:
            lowest[k] = m
    return lowest


# -- parsing -------------------------------------------------------------------------------------
class _Reader:
    """Raises MarginsFileError at the first field of the wrong type, naming it as ``margins.sm_90.<key>.value``.
    Architectures are read in either spelling, ``sm_90`` or ``sm90``, and kept as ``sm_90``."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, where: str, what: str, value: Any) -> MarginsFileError:
        return MarginsFileError(f"margins file {self.path}: field {where!r} must be {what}, got {shown(value)}")

    def obj(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, "an object", value)
        return value

    def text(self, value: Any, where: str, optional: bool = False) -> Any:
        if not (isinstance(value, str) and value) and not (optional and value is None):
            raise self.fail(where, "a non-empty string" + (" or null" if optional else ""), value)
        return value

    def number(self, value: Any, where: str) -> float:
        number = finite_number(value)
        if number is None:
            raise self.fail(where, "a finite number", value)
        return number

    def maybe_number(self, value: Any, where: str) -> float | None:
        number = finite_number(value)
        if number is None and value is not None:
            raise self.fail(where, "a finite number or null", value)
        return number

    def arch(self, value: Any, where: str) -> str:
        key = arch_key(value) if isinstance(value, str) else None
        if key is None:
            raise self.fail(where, "an architecture such as 'sm_90' (or 'sm90')", value)
        return key

    def gpu(self, value: Any, where: str) -> Gpu:
        d = self.obj(value, where)
        return Gpu(self.text(d.get("name"), f"{where}.name"), self.arch(d.get("arch"), f"{where}.arch"))

    def file(self, data: Any) -> MarginsFile:
        d = self.obj(data, "<top level>")
        if d.get("schema") != SCHEMA:
            raise self.fail("schema", repr(SCHEMA), d.get("schema"))
        runs = {rid: self.run(rid, r, f"runs.{rid}") for rid, r in self.obj(d.get("runs", {}), "runs").items()}
        entries: dict[str, dict[str, MarginEntry]] = {}
        for name, table in self.obj(d.get("margins"), "margins").items():
            at = f"margins.{name}"
            arch = self.arch(name, at)
            if arch in entries:
                raise MarginsFileError(f"margins file {self.path}: {name!r} and another key both name {arch}")
            entries[arch] = {key: self.entry(arch, key, e, f"{at}.{key}") for key, e in self.obj(table, at).items()}
        return MarginsFile(
            self.path,
            self.text(d.get("family"), "family"),
            runs,
            entries,
            self.text(d.get("about"), "about", optional=True),
        )

    def run(self, rid: str, value: Any, at: str) -> MarginRun:
        d = self.obj(value, at)
        return MarginRun(
            rid,
            self.gpu(d.get("gpu"), f"{at}.gpu"),
            self.text(d.get("created"), f"{at}.created"),
            self.text(d.get("commit"), f"{at}.commit", optional=True),
            self.text(d.get("report"), f"{at}.report", optional=True),
        )

    def entry(self, arch: str, key: str, value: Any, at: str) -> MarginEntry:
        d = self.obj(value, at)
        figure = self.text(d.get("figure"), f"{at}.figure", optional=True)
        fast = self.text(d.get("fast"), f"{at}.fast", optional=figure is not None)
        baseline = self.text(d.get("baseline"), f"{at}.baseline", optional=figure is not None)
        over = d.get("over", [])
        if not isinstance(over, list) or not all(isinstance(r, str) for r in over):
            raise self.fail(f"{at}.over", "a list of run ids", over)
        ev = d.get("evidence")
        return MarginEntry(
            key,
            arch,
            self.text(d.get("test"), f"{at}.test"),
            self.maybe_number(d.get("value"), f"{at}.value"),
            fast=fast,
            baseline=baseline,
            figure=figure,
            rule=self.text(d.get("rule"), f"{at}.rule", optional=True),
            over=tuple(over),
            evidence=None if ev is None else self.evidence(ev, f"{at}.evidence"),
            note=self.text(d.get("note"), f"{at}.note", optional=True),
            reason=self.text(d.get("reason"), f"{at}.reason", optional=True),
        )

    def evidence(self, value: Any, at: str) -> Evidence:
        d = self.obj(value, at)
        commit_of = d.get("commit_of", "run")
        if commit_of not in ("run", "margin"):
            raise self.fail(f"{at}.commit_of", "'run' or 'margin'", commit_of)
        return Evidence(
            self.text(d.get("run"), f"{at}.run"),
            self.gpu(d.get("gpu"), f"{at}.gpu"),
            self.text(d.get("date"), f"{at}.date"),
            self.text(d.get("commit"), f"{at}.commit", optional=True),
            commit_of,
            self.number(d.get("estimate"), f"{at}.estimate"),
            self.maybe_number(d.get("ci_low"), f"{at}.ci_low"),
            self.maybe_number(d.get("ci_high"), f"{at}.ci_high"),
            self.maybe_number(d.get("confidence"), f"{at}.confidence"),
        )
