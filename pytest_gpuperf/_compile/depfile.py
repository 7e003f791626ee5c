"""Make-style dependency files, as ``nvcc -M`` and ``gcc -MD`` write them.

``deps : a.cu /usr/include/x.h \\`` and continuation lines; a space inside a name is written
``\\ ``, ``#`` as ``\\#`` and ``$`` as ``$$``. Callers pass ``-MT deps`` so the target is a
plain word and the first colon ends it.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["TARGET", "parse_depfile"]

TARGET = "deps"  # the -MT name callers give, so that no path (with a colon, say) is the target


def parse_depfile(text: str, relative_to: Path, target: str = TARGET) -> tuple[Path, ...]:
    """Every prerequisite of ``target`` named in ``text``, in order and once each; relative
    names are taken relative to ``relative_to`` (the compiler's working folder). Raises
    ValueError when ``text`` has no rule for ``target``."""
    joined = text.replace("\\\r\n", " ").replace("\\\n", " ")
    found: dict[str, None] = {}
    rules = 0
    for line in joined.splitlines():
        name, colon, rest = line.partition(":")
        if not colon or name.strip() != target:
            continue
        rules += 1
        for name in _split(rest):
            found.setdefault(name)
    if not rules:
        raise ValueError(f"not a dependency file (no '{target}: prerequisites' rule): {text[:200]!r}")
    return tuple(Path(name) if Path(name).is_absolute() else relative_to / name for name in found)


def _split(rest: str) -> list[str]:
    names: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(rest):
        c = rest[i]
        if c == "\\" and i + 1 < len(rest) and rest[i + 1] in " #":
            current.append(rest[i + 1])
            i += 2
            continue
        if c == "$" and rest[i + 1 : i + 2] == "$":
            current.append("$")
            i += 2
            continue
        if c.isspace():
            if current:
                names.append("".join(current))
                current = []
        else:
            current.append(c)
        i += 1
    if current:
        names.append("".join(current))
    return names
