"""README.md and docs/*.md render as their authors meant: every table is a table (a blank line
inside one once left the README's last option rows as literal pipes), and each of its rows has as
many cells as its header (GitHub pads a short row and drops a long row's extra cells silently)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

markdown_it = pytest.importorskip("markdown_it", reason="the test extra installs markdown-it-py")

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^\s*(```|~~~)")
SPLIT = re.compile(r"(?<!\\)\|")  # GFM: an unescaped pipe ends a cell, inside a code span too


def _renderer() -> "markdown_it.MarkdownIt":
    return markdown_it.MarkdownIt("commonmark").enable("table")


def _table_lines(text: str) -> list[int]:
    """Line numbers (0-based) of lines that read as table rows: starting with '|', outside fences."""
    rows, fenced = [], False
    for n, line in enumerate(text.splitlines()):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and line.lstrip().startswith("|"):
            rows.append(n)
    return rows


def _cells(line: str) -> int:
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return len(SPLIT.split(inner))


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_table_renders_as_a_table_with_full_rows(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    tokens = _renderer().parse(text)
    tables = [t.map for t in tokens if t.type == "table_open" and t.map]
    covered = {n for start, end in tables for n in range(start, end)}
    stray = [n + 1 for n in _table_lines(text) if n not in covered]
    assert not stray, f"{path.name}: lines {stray} look like table rows but render as text (a blank line or a bad separator row?)"
    for start, end in tables:
        header = _cells(lines[start])
        for n in range(start + 1, end):
            if lines[n].strip():
                assert _cells(lines[n]) == header, (
                    f"{path.name}:{n + 1}: {_cells(lines[n])} cells in a table of {header} columns "
                    f"(an unescaped '|' inside a cell?): {lines[n][:120]}"
                )


def test_the_check_sees_a_table_broken_by_a_blank_line_and_a_row_with_an_extra_cell() -> None:
    broken = "| a | b |\n| --- | --- |\n| 1 | 2 |\n\n| 3 | 4 |\n"
    tokens = _renderer().parse(broken)
    covered = {n for t in tokens if t.type == "table_open" for n in range(*t.map)}
    assert [n for n in _table_lines(broken) if n not in covered] == [4]
    assert _cells("| `a|b` | c |") == 3 and _cells(r"| `a\|b` | c |") == 2
