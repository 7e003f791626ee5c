"""A compact difference between two versions of one kernel's SASS.

Each side's instructions are normalised (:func:`~pytest_gpuperf._diagnose.instructions.normalise`:
no addresses, encodings, operand-reuse flags or branch targets; by default the opcode with its
modifiers alone) so that code that only moved or had its registers renumbered compares equal. The
two sequences are aligned with :mod:`difflib` after their common start and end are set aside, and
told as a unified diff with a few instructions of context, cut at a number of lines, under a
summary line: ``SASS +12 -3 instructions (412 -> 421): +8 LDG, +4 FFMA, -3 LDS``.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections import Counter
from typing import Any

from pytest_gpuperf._diagnose.instructions import Instruction, normalise, parse_instructions

__all__ = ["SassDiff", "sass_diff"]

# Above this many pairs of differing instructions (about 14,000 on each side), difflib treats
# frequent lines as junk to stay fast; the alignment may then be much less tight (SassDiff.exact
# is False) while the counts per opcode stay right. At the limit an exact alignment takes seconds.
EXACT_ALIGNMENT_LIMIT = 200_000_000
_OPCODES_SHOWN = 6

_Code = tuple[str, int, int, int, int]


@dataclasses.dataclass(frozen=True)
class SassDiff:
    """What changed between two versions of one kernel's SASS."""

    before_instructions: int
    after_instructions: int
    added: int  # instructions on the after side's + lines
    removed: int  # instructions on the before side's - lines
    opcodes: tuple[tuple[str, int], ...]  # net change per opcode (without modifiers), largest first
    lines: tuple[str, ...]  # the unified diff: "@@ -41,3 +41,5 @@", " LDS", "-LDS", "+LDG.E"
    omitted: int = 0  # diff lines cut from ``lines``
    exact: bool = True  # False when the alignment gave up tightness for speed

    @property
    def identical(self) -> bool:
        return not self.added and not self.removed

    def summary(self) -> str:
        """``SASS +12 -3 instructions (412 -> 421): +8 LDG, +4 FFMA, -3 LDS``, or
        ``SASS identical (412 instructions)``."""
        if self.identical:
            return f"SASS identical ({self.after_instructions} instructions)"
        shown = ", ".join(f"{n:+d} {op}" for op, n in self.opcodes[:_OPCODES_SHOWN])
        more = ", ..." if len(self.opcodes) > _OPCODES_SHOWN else ""
        counts = (
            f"SASS +{self.added} -{self.removed} instructions ({self.before_instructions} -> {self.after_instructions})"
        )
        if not shown:
            return f"{counts}: the same opcodes, reordered"
        return f"{counts}: {shown}{more}"

    def render_lines(self, limit: int = 8) -> list[str]:
        """The summary and as much of the diff as fits in ``limit`` lines, indented; the last line
        says how many diff lines were left out, if any."""
        limit = max(limit, 1)
        head = [self.summary()]
        if self.identical:
            return head
        body = ["  " + line for line in self.lines]
        left_out = self.omitted
        room = limit - 1
        if len(body) > room:
            keep = max(room - 1, 0)
            left_out += len(body) - keep
            body = body[:keep]
        tail = [f"  ... {left_out} more diff lines"] if left_out else []
        return [*head, *body, *tail][:limit]

    def to_json(self) -> dict[str, Any]:
        return {
            "before_instructions": self.before_instructions,
            "after_instructions": self.after_instructions,
            "added": self.added,
            "removed": self.removed,
            "opcodes": [[op, n] for op, n in self.opcodes],
            "lines": list(self.lines),
            "omitted": self.omitted,
            "exact": self.exact,
        }

    @classmethod
    def from_json(cls, data: Any) -> SassDiff:
        if not isinstance(data, dict):
            raise ValueError(f"a SASS diff: expected an object, got {type(data).__name__}")
        try:
            return cls(
                before_instructions=int(data["before_instructions"]),
                after_instructions=int(data["after_instructions"]),
                added=int(data["added"]),
                removed=int(data["removed"]),
                opcodes=tuple((str(op), int(n)) for op, n in data["opcodes"]),
                lines=tuple(str(line) for line in data["lines"]),
                omitted=int(data.get("omitted", 0)),
                exact=bool(data.get("exact", True)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"a SASS diff: {exc!r}") from None


def sass_diff(
    before: str,
    after: str,
    *,
    context: int = 2,
    max_lines: int = 40,
    operands: bool = False,
    registers: bool = False,
) -> SassDiff:
    """The difference between two versions of one function's SASS (``cuobjdump -sass`` text of
    that function). ``operands`` compares guards and operands too, with register numbers dropped
    unless ``registers``; ``context`` instructions surround each change; ``max_lines`` caps the diff."""
    a_ins, b_ins = parse_instructions(before), parse_instructions(after)
    a = [normalise(i, operands=operands, registers=registers) for i in a_ins]
    b = [normalise(i, operands=operands, registers=registers) for i in b_ins]
    codes, exact = _align(a, b)
    added = sum(j2 - j1 for tag, _, _, j1, j2 in codes if tag in ("insert", "replace"))
    removed = sum(i2 - i1 for tag, i1, i2, _, _ in codes if tag in ("delete", "replace"))
    lines: list[str] = []
    if added or removed:
        for group in _grouped(codes, context):
            lines.append(_hunk_header(group, a_ins, b_ins))
            for tag, i1, i2, j1, j2 in group:
                if tag == "equal":
                    lines += [" " + x for x in a[i1:i2]]
                    continue
                lines += ["-" + x for x in a[i1:i2]]
                lines += ["+" + x for x in b[j1:j2]]
    net = Counter(i.base for i in b_ins)
    net.subtract(Counter(i.base for i in a_ins))
    opcodes = tuple(sorted(((op, n) for op, n in net.items() if n), key=lambda kv: (-abs(kv[1]), kv[0])))
    return SassDiff(
        before_instructions=len(a),
        after_instructions=len(b),
        added=added,
        removed=removed,
        opcodes=opcodes,
        lines=tuple(lines[:max_lines]),
        omitted=max(len(lines) - max_lines, 0),
        exact=exact,
    )


def _align(a: list[str], b: list[str]) -> tuple[list[_Code], bool]:
    """difflib's opcodes for a -> b, the common start and end set aside first."""
    start = 0
    while start < len(a) and start < len(b) and a[start] == b[start]:
        start += 1
    end = 0
    while end < len(a) - start and end < len(b) - start and a[-1 - end] == b[-1 - end]:
        end += 1
    middle_a, middle_b = a[start : len(a) - end], b[start : len(b) - end]
    exact = len(middle_a) * len(middle_b) <= EXACT_ALIGNMENT_LIMIT
    matcher = difflib.SequenceMatcher(None, middle_a, middle_b, autojunk=not exact)
    codes: list[_Code] = []
    if start:
        codes.append(("equal", 0, start, 0, start))
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if i1 != i2 or j1 != j2:
            codes.append((tag, i1 + start, i2 + start, j1 + start, j2 + start))
    if end:
        codes.append(("equal", len(a) - end, len(a), len(b) - end, len(b)))
    return _merge_equal(codes), exact


def _merge_equal(codes: list[_Code]) -> list[_Code]:
    merged: list[_Code] = []
    for code in codes:
        if merged and code[0] == "equal" and merged[-1][0] == "equal":
            prev = merged[-1]
            merged[-1] = ("equal", prev[1], code[2], prev[3], code[4])
        else:
            merged.append(code)
    return merged


def _grouped(codes: list[_Code], context: int) -> list[list[_Code]]:
    """The changes with ``context`` equal instructions around each, as difflib groups them."""
    codes = list(codes)
    if codes and codes[0][0] == "equal":
        _, i1, i2, j1, j2 = codes[0]
        codes[0] = ("equal", max(i1, i2 - context), i2, max(j1, j2 - context), j2)
    if codes and codes[-1][0] == "equal":
        _, i1, i2, j1, j2 = codes[-1]
        codes[-1] = ("equal", i1, min(i2, i1 + context), j1, min(j2, j1 + context))
    groups: list[list[_Code]] = []
    group: list[_Code] = []
    for tag, i1, i2, j1, j2 in codes:
        if tag == "equal" and i2 - i1 > 2 * context:
            group.append(("equal", i1, min(i2, i1 + context), j1, min(j2, j1 + context)))
            groups.append(group)
            group = []
            i1, j1 = max(i1, i2 - context), max(j1, j2 - context)
        group.append((tag, i1, i2, j1, j2))
    if group and not (len(group) == 1 and group[0][0] == "equal"):
        groups.append(group)
    return [g for g in groups if any(c[0] != "equal" for c in g)]


def _hunk_header(group: list[_Code], a: list[Instruction], b: list[Instruction]) -> str:
    i1, j1 = group[0][1], group[0][3]
    i2, j2 = group[-1][2], group[-1][4]
    where = [f"{side}0x{seq[k].address:04x}" for side, seq, k in (("", a, i1), ("-> ", b, j1)) if k < len(seq)]
    return f"@@ -{i1 + 1},{i2 - i1} +{j1 + 1},{j2 - j1} @@ " + " ".join(where)
