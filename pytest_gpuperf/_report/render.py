"""A saved report rendered as ``gpuperf report`` prints it: markdown for a job summary, or text.

The input is what ``_store.reports.load_report`` returns, so every field read here has its type.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any, cast

from pytest_gpuperf._report import markdown as md
from pytest_gpuperf._report.breakdown import record_lines
from pytest_gpuperf._report.records import ComparisonRecord, MeasurementRecord, Record
from pytest_gpuperf._report.sight import DEFAULT_TOLERANCE, unseen_lines
from pytest_gpuperf._report.summary import VERDICT_LEGEND, fmt_time, summary_rows
from pytest_gpuperf._report.table import markdown_table, text_table
from pytest_gpuperf._report.undecided import OPTION, blind_lines, groups, undecided, workflow_commands


def report_records(data: Mapping[str, Any]) -> list[Record]:
    """The report's tests back as the per-result records the terminal summary is built from
    (a report that passed ``_store.reports``' checks holds what the records need). A saved
    measurement names its device by key; the record carries the device itself, from the
    report's ``devices``."""
    devices: Mapping[str, Any] = data.get("devices") or {}
    records: list[Record] = []
    for t in data["tests"]:
        for c in t.get("comparisons", []):
            records.append(ComparisonRecord(kind="comparison", test=t["nodeid"], comparison=c))
        for m in t.get("measurements", []):
            key = m.get("device")
            device = devices.get(key) if isinstance(key, str) else None
            record = {**m, "kind": "measurement", "test": t["nodeid"], "device": device or {"key": key}}
            records.append(cast(MeasurementRecord, record))
    return records


def _fmt_value(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" + (f" {unit}" if unit else "")


# Rows whose verdict says a gate failed come first under --failures-first, then the undecided.
_URGENCY = {"fail": 0, "inconclusive": 1}


def _urgency(row: list[str]) -> int:
    """0 for a row whose verdict (``speedup/baseline`` or one word) holds a failure, 1 undecided, else 2."""
    return min((_URGENCY.get(part, 2) for part in row[-1].split("/")), default=2)


def format_report(data: Mapping[str, Any], markdown: bool = True, failures_first: bool = False) -> str:
    """The failed tests and the inconclusive results with their reasons, then the terminal
    summary's table, figures, skips, baseline changes and the checks blind to their tolerance.
    With ``failures_first`` the table lists failed gates, then undecided ones, then the rest."""
    records = report_records(data)
    rows = summary_rows(records)
    inconclusive = groups(undecided(records, _policy(data)))
    if failures_first:
        rows = rows[:1] + sorted(rows[1:], key=_urgency)
    figures = [
        [t["nodeid"].split("::", 1)[-1], f["key"], _fmt_value(f["value"], f.get("unit") or "")]
        for t in data["tests"]
        for f in t.get("figures", [])
    ]
    failed = [t["nodeid"] for t in data["tests"] if t.get("outcome") in ("failed", "error")]
    quote: Callable[[str], str] = (lambda value: md.text(value, inline=True)) if markdown else str
    span: Callable[[str], str] = md.code if markdown else "`{}`".format
    devices = [
        f"{quote(str(d.get('name', '?')))} ({span(key)}), "
        f"driver {quote(str(d.get('driver_version') or '?'))}, CUDA {quote(str(d.get('cuda_runtime_version') or '?'))}"
        for key, d in sorted(data.get("devices", {}).items())
        if isinstance(d, dict)
    ]
    verdicts = data.get("summary") or {}
    skipped = data.get("skipped", [])
    changes = data.get("baseline_changes", [])
    notes = data.get("notes", [])

    def table(body: list[list[str]], right: Collection[int] = ()) -> list[str]:
        return [markdown_table(body, right=right) if markdown else text_table(body, indent="  ")]

    def heading(text: str) -> str:
        return f"### {text}" if markdown else f"{text}:"

    out = ["## gpu-perf report" if markdown else "gpu-perf report"]
    out.append(
        f"Created {quote(str(data.get('created', '?')))}"
        + (f" on {'; '.join(devices)}" if devices else " (no GPU measured)")
        + "."
    )
    if data.get("interrupted"):
        out.append(
            f"The run was stopped ({quote(str(data['interrupted']))}): only the tests that ran before it are here."
        )
    if verdicts:
        ordered = sorted(verdicts.items(), key=lambda kv: (min(_URGENCY.get(w, 2) for w in kv[0].split()), kv[0]))
        out.append(
            "Verdicts: "
            + ", ".join(f"{n} {quote(k)}" for k, n in (ordered if failures_first else sorted(verdicts.items())))
            + "."
        )
    if failed:
        out += ["", heading(f"Failed tests ({len(failed)})")]
        out += [f"- {md.code(n)}" if markdown else f"  {n}" for n in failed]
    for title, group in inconclusive:  # before the table, so a comment cut to its size keeps them
        out += ["", heading(title.replace(OPTION + "=fail", f"`{OPTION}=fail`") if markdown else title)]
        out += [f"- {md.code(e.where)}: {md.text(e.text, inline=True)}" if markdown else f"  {e.line}" for e in group]
    explained = [
        (r["key"], lines)
        for r in records
        if r["kind"] == "measurement" and r["verdict"] in ("fail", "inconclusive") and (lines := record_lines(r))
    ]
    if explained:
        out += ["", heading("Kernels of the failed and undecided checks")]
        for key, lines in explained:
            if markdown:
                out += [f"- {md.code(key)}", *(f"  - {md.text(line.strip(), inline=True)}" for line in lines)]
            else:
                out += [f"  {key}", *(f"    {line}" for line in lines)]
    out.append("")
    if len(rows) > 1:  # the legend after a blank line: in markdown, a line right under a table is a row of it
        out += table(rows, right=(2,)) + ["", md.text(VERDICT_LEGEND) if markdown else f"  {VERDICT_LEGEND}"]
    else:
        out.append("No GPU measurements in this report.")
    if figures:
        out += ["", heading("Figures")] + table([["test", "figure", "value"]] + figures, right=(2,))
    if skipped:
        out += ["", heading("Skipped, and why")]
        out += table([["count", "reason"]] + [[str(s["count"]), s["reason"]] for s in skipped], right=(0,))
    if changes:
        body = [["key", "old median", "new median", "delta"]]
        for ch in changes:
            old, new = ch.get("old_median_s"), ch["new_median_s"]
            body.append([ch["key"], fmt_time(old), fmt_time(new), f"{100 * (new / old - 1):+.1f}%" if old else "new"])
        out += ["", heading(f"Baselines updated ({len(changes)} entries)")] + table(body, right=(1, 2, 3))
    if blind := blind_lines(records):
        out += ["", heading("Regression checks blind to their tolerance")]
        out += [f"- {md.text(line)}" if markdown else f"  {line}" for line in blind]
    if sight := unseen_lines(records, _tolerance(data)):
        out += ["", heading("What the checks can see")]
        out += [
            (f"{'  ' if line.startswith('  ') else ''}- {md.text(line.strip())}" if markdown else f"  {line}")
            for line in sight
        ]
    if notes:
        out += ["", heading("Notes")] + [f"- {md.text(n)}" if markdown else f"  {n}" for n in notes]
    return "\n".join(out) + "\n"


def format_annotations(data: Mapping[str, Any]) -> str:
    """GitHub Actions workflow commands for the report's inconclusive results and blind checks."""
    records = report_records(data)
    return "".join(line + "\n" for line in workflow_commands(undecided(records, _policy(data)), records))


def _tolerance(data: Mapping[str, Any]) -> float:
    """The run's --gpu-perf-tolerance, which a claim is held to (``sight``)."""
    settings = data.get("settings")
    try:
        return (
            float(settings["tolerance"])
            if isinstance(settings, Mapping) and "tolerance" in settings
            else DEFAULT_TOLERANCE
        )
    except (TypeError, ValueError):
        return DEFAULT_TOLERANCE


def _policy(data: Mapping[str, Any]) -> str:
    """The run's --gpu-perf-inconclusive, for records of a release that did not carry their own."""
    settings = data.get("settings")
    value = settings.get("inconclusive") if isinstance(settings, Mapping) else None
    return value if isinstance(value, str) else "warn"


def cut(text: str, max_chars: int, where: str = "the full report") -> str:
    """``text`` within ``max_chars`` characters, cut after a whole line, with a last line saying
    how many lines were left out and where they are (a pull request comment holds 65,536)."""
    if len(text) <= max_chars:
        return text
    lines = text.splitlines(keepends=True)
    kept: list[str] = []
    size = 0
    for line in lines:
        note = f"\n_{len(lines) - len(kept)} more lines not shown: see {where}._\n"
        if size + len(line) + len(note) > max_chars:
            break
        kept.append(line)
        size += len(line)
    return "".join(kept) + f"\n_{len(lines) - len(kept)} more lines not shown: see {where}._\n"
