"""A kernel's unqualified identifier from the name the driver gives it, without a demangler:
``_ZN2at6native29vectorized_elementwise_kernelILi4E...`` -> ``vectorized_elementwise_kernel``,
``_Z5heavyILi64EEvPfi`` -> ``heavy``, ``k_add`` -> ``k_add``."""

from __future__ import annotations

__all__ = ["identifier"]


def identifier(name: str) -> str:
    """The last source name of an Itanium-mangled name's qualified name; other names as they are."""
    if not name.startswith("_Z"):
        return name
    text = name[2:].removeprefix("L")
    nested = text.startswith("N")
    i = 1 if nested else 0
    last = ""
    while i < len(text):
        if text.startswith("K", i) or text.startswith("V", i):  # cv-qualifiers of a member function
            i += 1
            continue
        j = i
        while j < len(text) and text[j].isdigit():
            j += 1
        if j == i:
            break
        length = int(text[i:j])
        last = text[j : j + length]
        i = j + length
        if not nested:
            break
    return last or name
