"""Two sets of baselines compared entry by entry, judged as the regression gate would (``gpuperf diff``).

Each entry present on both sides is judged by the gate's own check (``_gates.regression.compare_entries``):
calibrated ratios where both entries were recorded against the same reference kernel, raw times
otherwise, with the gate's bands and threshold, so ``diff`` calls a change ``slower`` exactly when
a gate run measuring the new value against the old baseline would fail.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_gpuperf._gates.verdict import Bands, Verdict, regression_threshold
from pytest_gpuperf._report import markdown as md
from pytest_gpuperf._report.summary import fmt_time
from pytest_gpuperf._report.table import markdown_table
from pytest_gpuperf._store.baselines import BaselineEntry, BaselineFile


@dataclass(frozen=True)
class Thresholds:
    """The regression gate's settings (``gpuperf diff`` takes the plugin's options' defaults)."""

    tolerance: float
    machine_noise: float
    confidence: float
    calibrated_noise: float
    level_noise: float

    @property
    def bands(self) -> Bands:
        return Bands(self.machine_noise, self.calibrated_noise, self.level_noise)


STATUS = {
    Verdict.FAIL: "slower",
    Verdict.INCONCLUSIVE: "inconclusive",
    Verdict.IMPROVED: "faster",
    Verdict.PASS: "within tolerance",
}
ORDER = ("slower", "inconclusive", "faster", "within tolerance", "added", "removed", "identical")


@dataclass(frozen=True)
class DiffRow:
    file: str  # '<device key>/<module>.json', or '<module>.json' when two device folders or files are compared
    key: str  # 'test_name[params]::variant'
    old: BaselineEntry | None
    new: BaselineEntry | None

    @property
    def delta(self) -> float | None:
        return self.new.median_s / self.old.median_s - 1.0 if self.old and self.new else None

    def status(self, gate: Thresholds) -> str:
        if self.old is None:
            return "added"
        if self.new is None:
            return "removed"
        if self.old.to_json() == self.new.to_json():
            return "identical"
        from pytest_gpuperf._gates.regression import compare_entries

        return STATUS[compare_entries(self.new, self.old, gate.confidence, gate.tolerance, gate.bands).verdict]


def diff_baselines(old: Mapping[str, BaselineFile], new: Mapping[str, BaselineFile]) -> list[DiffRow]:
    """Every entry of either side, paired by file and key, sorted."""
    rows: list[DiffRow] = []
    for file in sorted(set(old) | set(new)):
        a = old[file].entries if file in old else {}
        b = new[file].entries if file in new else {}
        rows.extend(DiffRow(file, key, a.get(key), b.get(key)) for key in sorted(set(a) | set(b)))
    return rows


SOFTWARE_FIELDS = ("driver_version", "cuda_runtime_version", "cupy_version")


def device_changes(
    old: Mapping[str, BaselineFile], new: Mapping[str, BaselineFile], by_module: bool = False
) -> list[str]:
    """Recorded device facts that differ between the two sides of a file: software versions,
    and (comparing two device folders or files, ``by_module``) the device itself."""
    fields = (("key", "name") if by_module else ()) + SOFTWARE_FIELDS
    found: dict[str, list[str]] = {}
    for name in sorted(set(old) & set(new)):
        a, b = old[name].device, new[name].device
        label = "devices" if by_module else name.split("/", 1)[0]
        for field in fields:
            if a.get(field) != b.get(field):
                change = f"{field} {a.get(field, '?')} -> {b.get(field, '?')}"
                seen = found.setdefault(label, [])
                if change not in seen:
                    seen.append(change)
    return [
        f"{md.code(label)}: " + md.text(", ".join(changes), inline=True) for label, changes in sorted(found.items())
    ]


def format_diff(rows: Sequence[DiffRow], devices: Sequence[str], *, show_all: bool, gate: Thresholds) -> str:
    statuses = [r.status(gate) for r in rows]
    shown = [(r, s) for r, s in zip(rows, statuses, strict=False) if show_all or s != "identical"]
    counts: dict[str, int] = {}
    for s in statuses:
        counts[s] = counts.get(s, 0) + 1
    summary = ", ".join(f"{counts[s]} {s}" for s in ORDER if counts.get(s))
    out = [f"{len(rows)} baseline entries compared: {summary or 'none on either side'}."]
    if devices:
        out.append("")
        out.extend(f"- device software changed: {line}" for line in devices)
    if not shown:
        out.append("")
        out.append("No baseline entry differs." if rows else "No baseline files found.")
        return "\n".join(out) + "\n"
    table = [["baseline file", "key", "old median", "new median", "delta", "change"]]
    for r, status in shown:
        delta = f"{100 * r.delta:+.1f}%" if r.delta is not None else "-"
        old, new = fmt_time(r.old.median_s if r.old else None), fmt_time(r.new.median_s if r.new else None)
        table.append([r.file, r.key, old, new, delta, status])
    out += ["", markdown_table(table, right=(2, 3, 4))]
    if not show_all and counts.get("identical"):
        out += ["", f"{counts['identical']} identical entries not listed (--all lists them)."]
    out += ["", legend(gate)]
    return "\n".join(out) + "\n"


def legend(gate: Thresholds) -> str:
    raw = 100 * regression_threshold(gate.tolerance, gate.machine_noise)
    cal = 100 * regression_threshold(gate.tolerance, gate.calibrated_noise)
    level = 100 * regression_threshold(gate.tolerance, gate.level_noise)
    return (
        f"Judged as the regression gate judges a run against its baseline (tolerance {100 * gate.tolerance:g}%, "
        f"machine noise {100 * gate.machine_noise:g}%, calibrated noise {100 * gate.calibrated_noise:g}%, "
        f"level noise {100 * gate.level_noise:g}%, confidence {100 * gate.confidence:g}%): 'slower' fails the gate "
        f"(the whole interval of new/old lies more than {cal:g}% above 1 for entries calibrated against the same "
        f"reference kernel, {raw:g}% for raw times; against an old entry's stored levels, more than {level:g}% from "
        "every level and slower than one), "
        "'inconclusive' is slower than that but not established, 'faster' is faster than that beyond noise."
    )
