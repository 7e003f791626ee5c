"""The charts' HTML page, ``index.html``: a verdict table per family beside its chart, the
images linked by relative path, so the folder is self-contained (copy or upload it whole)."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_gpuperf._report.breakdown import record_lines
from pytest_gpuperf._report.plots.shape import OTHER_COLOUR, VERDICT_COLOURS, short_test, slug
from pytest_gpuperf._report.summary import baseline_delta, fmt_time


def _e(value: Any) -> str:
    return html.escape(str(value))


def _verdict_cell(verdict: str) -> str:
    colour = VERDICT_COLOURS.get(verdict.split("/")[0], OTHER_COLOUR)
    return f'<td style="color:{colour};font-weight:600">{_e(verdict)}</td>'


def _result_cells(what: str, value: str, interval: str, required: str, verdict: str) -> str:
    """One result's cells of the family table (already escaped), its verdict coloured."""
    return f"<td>{what}</td><td>{value}</td><td>{interval}</td><td>{required}</td>" + _verdict_cell(verdict)


def family_table(tests: Sequence[Mapping[str, Any]]) -> str:
    rows = [
        "<tr><th>test</th><th>outcome</th><th>what</th><th>value</th><th>interval</th><th>required</th><th>verdict</th></tr>"
    ]
    for t in tests:
        name = _e(short_test(t["nodeid"]))
        entries: list[str] = []
        for c in t.get("comparisons", []):
            need = "none (report)" if c.get("at_least") is None else f"&ge; {c['at_least']:.3f}x"
            entries.append(
                _result_cells(
                    f"speedup {_e(c['fast'])} vs {_e(c['baseline'])}",
                    f"{c['speedup']:.4g}x",
                    f"[{c['ci_low']:.4g}, {c['ci_high']:.4g}]",
                    need,
                    str(c.get("verdict", "")),
                )
            )
        for m in t.get("measurements", []):
            s = m["measurement"]
            delta = baseline_delta(m) + (" vs baseline" if m.get("regression") else "")
            entries.append(
                _result_cells(
                    f"median {_e(s['name'])}",
                    _e(fmt_time(s["median_s"])),
                    f"[{_e(fmt_time(s['ci_low_s']))}, {_e(fmt_time(s['ci_high_s']))}]",
                    _e(delta),
                    str(m.get("verdict", "")),
                )
            )
        for f in t.get("figures", []):
            value = f["value"]
            if value is None:
                shown = "-"
            else:
                shown = (
                    f"{100 * value:.1f}%" if "fraction" in f["key"] else f"{value:.4g} {f.get('unit') or ''}".strip()
                )
            entries.append(f"<td>{_e(f['key'])}</td><td>{_e(shown)}</td><td></td><td></td><td></td>")
        for c in t.get("counters", []):
            derived = c.get("derived") or {}
            shown = ", ".join(f"{k} {v:.3g}" for k, v in derived.items() if v is not None)
            entries.append(f"<td>counters {_e(c.get('label', c.get('kernel', '')))}</td><td colspan=4>{_e(shown)}</td>")
        if not entries:
            entries = ["<td colspan=5>(no results)</td>"]
        span = len(entries)
        first = f'<td rowspan="{span}">{name}</td><td rowspan="{span}">{_e(t.get("outcome", ""))}</td>'
        rows.append(f"<tr>{first}{entries[0]}</tr>")
        rows += [f"<tr>{e}</tr>" for e in entries[1:]]
    return "<table>\n" + "\n".join(rows) + "\n</table>"


def write_index(
    report: Mapping[str, Any],
    families: Mapping[str, Sequence[Mapping[str, Any]]],
    images: Mapping[str, Path],
    out_dir: Path,
) -> Path:
    devices = report.get("devices") or {}
    device_text = (
        "; ".join(
            f"{d.get('name', key)} (driver {d.get('driver_version', '?')}, CUDA {d.get('cuda_runtime_version', '?')})"
            for key, d in devices.items()
        )
        or "no device recorded"
    )
    summary = ", ".join(f"{n} {k}" for k, n in sorted((report.get("summary") or {}).items())) or "none"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8"><title>pytest-gpuperf report</title>',
        "<style>body{font-family:sans-serif;margin:1.5em;max-width:1250px}table{border-collapse:collapse;font-size:13px;"
        "margin-bottom:1.5em}td,th{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top}"
        "th{background:#eee}img{max-width:100%;border:1px solid #ddd}code{background:#f4f4f4}</style></head><body>",
        "<h1>pytest-gpuperf report</h1>",
        f"<p>Report created {_e(report.get('created', '?'))}; page written "
        f"{_e(datetime.now(timezone.utc).isoformat(timespec='seconds'))}. Device: {_e(device_text)}.</p>",
        f"<p>Verdicts: {_e(summary)}. Cache mode {_e((report.get('settings') or {}).get('cache', '?'))}, "
        f"confidence {_e((report.get('settings') or {}).get('confidence', '?'))}.</p>",
        "<ul>"
        + "".join(f'<li><a href="#{_e(slug(f))}">{_e(f)}</a> ({len(ts)} tests)</li>' for f, ts in families.items())
        + "</ul>",
    ]
    for family, tests in families.items():
        parts.append(f'<h2 id="{_e(slug(family))}">{_e(family)}</h2>')
        if family in images:
            parts.append(
                f'<p><a href="{_e(images[family].name)}"><img src="{_e(images[family].name)}" alt="{_e(family)} chart"></a></p>'
            )
        parts.append(family_table(tests))
    explained = [
        (m.get("key", "?"), lines)
        for t in report.get("tests") or []
        for m in t.get("measurements") or []
        if m.get("verdict") in ("fail", "inconclusive") and (lines := record_lines(m))
    ]
    if explained:
        parts.append("<h2>Kernels of the failed and undecided checks</h2>")
        parts += [f"<h3><code>{_e(key)}</code></h3><pre>{_e(chr(10).join(lines))}</pre>" for key, lines in explained]
    skipped = report.get("skipped") or []
    if skipped:
        parts.append(
            "<h2>Skipped GPU parts</h2><ul>"
            + "".join(f"<li>{s['count']} &times; {_e(s['reason'])}</li>" for s in skipped)
            + "</ul>"
        )
    parts.append("</body></html>")
    path = out_dir / "index.html"
    path.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return path
