"""Markdown that quotes text it did not write: test ids, variant names, device names, notes.

Every markdown writer (``gpuperf report``, ``gpuperf diff``, ``gpuperf margins --markdown``)
passes each quoted value through ``code`` (an inline code span) or ``text`` (plain text), so a
value read from a report or a baseline file cannot end its code span, start a heading, a list
or a quote, open an HTML tag or a link, or add a table row or cell: a test id such as
``x`\\n## heading <img src=...>`` stays one line of literal characters.

Line breaks become spaces. In a code span the fence is one backtick longer than the longest run
of backticks inside (CommonMark), and nothing else needs escaping there. In plain text each
character that could start such syntax is backslash-escaped, which renders as the character
itself, pipes too. A code span with ``cell=True`` is a table cell, where GitHub splits on every
``|`` (even inside a code span) unless it is written ``\\|``.
"""

from __future__ import annotations

import re

__all__ = ["code", "text"]

_LINE_BREAKS = re.compile(r"[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]+")
# Inline syntax that can start anywhere on a line and change what is shown: backslash escapes,
# code spans, raw HTML and autolinks, entities, table cells, and the "](" or "][" that close a
# link's or image's text. (Emphasis is left alone: it changes how text looks, not what it says.)
_INLINE = re.compile(r"[\\`<&|]|\](?=[(\[])")
# Block syntax at the start of a list item or a paragraph: a list, heading, quote, thematic
# break, fenced block, link reference definition or setext underline.
_LEAD = re.compile(r"(\s*)([-+*#>\[_~=])")
_ORDERED = re.compile(r"(\s*\d{1,9})([.)])(?=\s|$)")


def _one_line(value: str) -> str:
    return _LINE_BREAKS.sub(" ", value)


def code(value: str, *, cell: bool = False) -> str:
    """``value`` as an inline code span, shown literally."""
    flat = _one_line(value)
    if not flat.strip():
        return text(flat, inline=True)
    longest = max((len(run) for run in re.findall(r"`+", flat)), default=0)
    fence = "`" * (longest + 1)
    # CommonMark strips one space from each end of a span that starts and ends with one; padding
    # also keeps a backtick at an end from joining the fence.
    pad = " " if flat[0] in "` " or flat[-1] in "` " else ""
    if cell:
        flat = flat.replace("|", "\\|")
    return f"{fence}{pad}{flat}{pad}{fence}"


def text(value: str, *, inline: bool = False) -> str:
    """``value`` as plain markdown text, shown literally. Unless it is ``inline`` (a table cell,
    or after other text on its line), a leading character that would start a block is escaped
    too."""
    escaped = _INLINE.sub(lambda m: "\\" + m.group(0), _one_line(value))
    if not inline:
        lead = _LEAD if _LEAD.match(escaped) else _ORDERED
        escaped = lead.sub(r"\1\\\2", escaped, count=1)
    return escaped
