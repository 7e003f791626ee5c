"""Tables as every command and summary prints them: aligned plain text, or GitHub-flavoured
markdown whose cells quote what they hold (``markdown``), so a test id or a key read from a file
cannot add a row or a cell. The first row is the header; columns are counted from 0."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from pytest_gpuperf._report import markdown as md

__all__ = ["markdown_table", "text_table"]


def text_table(rows: Sequence[Sequence[str]], *, indent: str = "", right: Collection[int] = ()) -> str:
    """Columns two spaces apart, each as wide as its widest cell, the columns in ``right``
    right-aligned and the others left-aligned; each line starts with ``indent`` and ends with its
    last character. No newline after the last line."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        indent
        + "  ".join(
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=False))
        ).rstrip()
        for r in rows
    )


def markdown_table(rows: Sequence[Sequence[str]], *, right: Collection[int] = (), code: Collection[int] = ()) -> str:
    """A markdown table: the columns in ``right`` right-aligned, the cells of the columns in
    ``code`` set as code (but a ``-``), every other cell and the header quoted as text. No newline
    after the last line."""

    def cell(text: str, column: int) -> str:
        return md.code(text, cell=True) if column in code and text != "-" else md.text(text, inline=True)

    align = ["---:" if i in right else "---" for i in range(len(rows[0]))]
    lines = ["| " + " | ".join(md.text(h, inline=True) for h in rows[0]) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(cell(c, i) for i, c in enumerate(r)) + " |" for r in rows[1:]]
    return "\n".join(lines)
