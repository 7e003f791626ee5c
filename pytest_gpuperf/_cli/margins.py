"""``gpuperf margins``: derive speedup margins from saved reports; show or update a margins file
(``_store.margins``), as aligned text or as markdown tables for a README."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_gpuperf._cli.arguments import CommandLineError
from pytest_gpuperf._report import markdown as md
from pytest_gpuperf._report.table import markdown_table, text_table
from pytest_gpuperf._store.margins import (
    FORMULA,
    MarginEntry,
    MarginsFile,
    lowest_by_test,
    margin_rule,
    measurements_of,
)
from pytest_gpuperf._store.reports import load_report

if TYPE_CHECKING:
    from pytest_gpuperf._cli.arguments import Subparsers

MARGIN_COMMIT_NOTE = "* the run recorded no commit: the commit that set the margin"


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "margins",
        help="derive speedup margins from saved reports; show or update a margins file",
        description="Derive gated margins from saved --gpu-perf-json reports by the rule "
        "margin = floor(100 * 0.95 * ci_low) / 100, ci_low the lowest lower end of a comparison's interval over "
        "the reports. With REPORTs alone: the margin of every interleaved comparison in them. With --file: the "
        "file's entries (each names its test and variants) derived again from the lowest of their recorded evidence "
        "and the reports; --write saves them. With --file alone: the file as a table, checked against the rule "
        "(exit 1 on a problem).",
    )
    p.add_argument("reports", nargs="*", metavar="REPORT", help="a saved report (.json or .json.gz)")
    p.add_argument("--file", metavar="MARGINS", help="a margins file (kernels/<family>/margins.json here)")
    p.add_argument("--write", action="store_true", help="save the derived entries to the margins file")
    p.add_argument(
        "--only", action="append", metavar="GLOB", help="update only the entries whose key matches; repeat for more"
    )
    p.add_argument(
        "--reset", action="store_true", help="derive from the reports alone, forgetting the recorded evidence"
    )
    p.add_argument("--commit", metavar="SHA", help="the commit the reports measured, where they record none")
    p.add_argument("--markdown", action="store_true", help="print the table as markdown (for a README)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    text, status = command(
        [Path(r) for r in args.reports],
        Path(args.file) if args.file else None,
        only=args.only or (),
        commit=args.commit,
        reset=args.reset,
        write=args.write,
        markdown=args.markdown,
    )
    sys.stdout.write(text)
    return status


def command(
    reports: Sequence[Path],
    file: Path | None,
    *,
    only: Sequence[str] = (),
    commit: str | None = None,
    reset: bool = False,
    write: bool = False,
    markdown: bool = False,
) -> tuple[str, int]:
    """``gpuperf margins``: the output and the exit status (see ``add_parser``)."""
    if file is None and (write or reset or only):
        raise CommandLineError("--write, --reset and --only update a margins file: name it with --file")
    if file is None and not reports:
        raise CommandLineError("margins takes one or more reports, a margins file (--file), or both")
    if write and not reports:
        raise CommandLineError("--write needs reports to derive the margins from")
    measured = [m for r in reports for m in measurements_of(load_report(r), _shown_path(r), commit)]
    render = _markdown if markdown else _text
    if file is None:
        rows = [["arch", "test", "compared", "margin", "lowest measured", "GPU", "date", "commit"]]
        for (arch, test, what), m in sorted(lowest_by_test(measured).items()):
            r = m.run
            rows.append(
                [
                    arch,
                    test,
                    what,
                    f"{margin_rule(m.low):.2f}",
                    interval_text(m.estimate, m.ci_low, m.ci_high),
                    r.gpu.name,
                    r.date,
                    (r.commit or "-")[:7],
                ]
            )
        if len(rows) == 1:
            return "no interleaved comparisons in these reports\n", 0
        return render(rows) + f"\n{FORMULA} of the lowest interval per test, over {len(reports)} report(s)\n", 0

    margins = MarginsFile.read(file)
    if not reports:
        problems = margins.problems()
        if markdown:  # a table per architecture, for a README
            tables = [(arch, entry_rows(margins, arch)) for arch in margins.entries]
            text = "\n".join(f"**{md.text(arch, inline=True)}**\n\n" + _markdown(rows) for arch, rows in tables)
            starred = any(r[-1].endswith("*") for _, rows in tables for r in rows)
        else:
            rows = entry_rows(margins)
            text = _text(rows)
            starred = any(r[-1].endswith("*") for r in rows)
        if starred:
            text += ("\n\\" if markdown else "") + MARGIN_COMMIT_NOTE + "\n"
        text += "".join(f"ERROR {p}\n" for p in problems)
        return text, 1 if problems else 0

    changes = margins.derive(measured, only=only, reset=reset)
    unknown = sorted({m.run.report or m.run.id for m in measured if not m.run.commit})
    rows = [["arch", "gate", "was", "margin", "lowest measured", "GPU", "date", "commit"]]
    for c in changes:
        ev = c.new.evidence
        assert ev is not None  # derive always sets it
        rows.append(
            [
                c.new.arch,
                c.new.key,
                _fmt_margin(c.old.value),
                _fmt_margin(c.new.value),
                interval_text(ev.estimate, ev.ci_low, ev.ci_high),
                ev.gpu.name,
                ev.date,
                (ev.commit or "-")[:7],
            ]
        )
    changed = sum(c.old.value != c.new.value for c in changes)
    gated = {(e.test, e.fast, e.baseline, e.figure) for e in margins.all_entries()}
    loose = sorted({m.test for m in measured if m.figure is None and (m.test, m.fast, m.baseline, None) not in gated})
    text = render(rows) if changes else "no entry of the file was measured in these reports\n"
    text += f"\n{len(changes)} entr{'y' if len(changes) == 1 else 'ies'} derived from {len(reports)} report(s), {changed} changed"
    text += f"; written to {file}\n" if write else " (nothing written: add --write to update the file)\n"
    if loose:
        text += f"{len(loose)} compared test(s) in the reports have no entry, e.g. {loose[0]}\n"
    if unknown:
        text += f"no commit recorded in {', '.join(unknown)}: name the commit measured with --commit SHA\n"
    if write:
        margins.write()
    return text, 0


def _shown_path(path: Path) -> str:
    """``path`` relative to the current folder where it lies below it (how a margins file cites it)."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def interval_text(estimate: float, low: float | None, high: float | None) -> str:
    return f"{estimate:.4f}x" if low is None else f"{estimate:.4f}x [{low:.4f}, {high:.4f}]"


def _fmt_margin(value: float | None) -> str:
    return "not gated" if value is None else f"{value:.2f}"


def claim(e: MarginEntry) -> str:
    """What the gate asserts, in words: a speedup of at least, or a slowdown of at most, so much."""
    v = e.value
    if v is None:
        return "-"
    if e.figure:
        return f"{e.figure} >= {v:.2f}"
    if v == 1:
        return "not slower"
    if v >= 1.5:
        return f"{v:.2f}x as fast or more"
    if v > 1:
        return f"faster by {100 * (v - 1):.0f}% or more"
    return f"slower by {100 * (1 / v - 1):.0f}% at most"


def entry_rows(margins: MarginsFile, arch: str | None = None) -> list[list[str]]:
    """One row per entry (of ``arch`` only, without the arch column, when given): gate, margin,
    its claim, the lowest measured and where: GPU, date, commit."""
    head = ["gate", "margin", "claims", "lowest measured", "GPU", "date", "commit"]
    rows = [head if arch else ["arch", *head]]
    for e in margins.all_entries():
        if arch is not None and e.arch != arch:
            continue
        ev = e.evidence
        if ev is None:
            cells = [e.key, _fmt_margin(e.value), claim(e), "-", "-", "-", "-"]
        else:
            measured = f"{ev.estimate:.4f}" if e.figure else interval_text(ev.estimate, ev.ci_low, ev.ci_high)
            commit = (ev.commit or "-")[:7] + ("*" if ev.commit_of == "margin" else "")
            gpu = ev.gpu.name.removeprefix("NVIDIA ") if arch else ev.gpu.name
            cells = [e.key, _fmt_margin(e.value), claim(e), measured, gpu, ev.date, commit]
        rows.append(cells if arch else [e.arch, *cells])
    return rows


def _markdown(rows: Sequence[Sequence[str]]) -> str:
    """The table as markdown: gates and tests as code, margins right-aligned."""
    head = rows[0]
    right = [i for i, h in enumerate(head) if h == "margin"]
    code = [i for i, h in enumerate(head) if h in ("gate", "test")]
    return markdown_table(rows, right=right, code=code) + "\n"


def _text(rows: Sequence[Sequence[str]]) -> str:
    return text_table(rows) + "\n"
