"""Architecture markers.

``@pytest.mark.sm80`` and ``@pytest.mark.sm90`` mean *at least* that compute capability
(code built for sm_80 runs on every later GPU). ``exact=True`` means the same major
version only: code built for an arch-specific target such as ``sm_90a`` (wgmma,
setmaxnreg) runs on 9.x and nowhere else. ``@pytest.mark.gpu_arch("sm_89")`` takes any
capability, and ``"sm_90a"`` implies ``exact=True``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from pytest_gpuperf._timing.device import DeviceInfo
from pytest_gpuperf.errors import GpuPerfUsageError

SHORTHAND_MARKERS = {"sm80": (8, 0), "sm90": (9, 0)}
GENERIC_MARKER = "gpu_arch"
# Compute capabilities NVIDIA has shipped (CUDA programming guide, compute capabilities table).
KNOWN_CAPABILITIES = frozenset(
    {(3, 0), (3, 2), (3, 5), (3, 7), (5, 0), (5, 2), (5, 3), (6, 0), (6, 1), (6, 2), (7, 0), (7, 2), (7, 5)}
    | {(8, 0), (8, 6), (8, 7), (8, 9), (9, 0), (10, 0), (10, 1), (10, 3), (11, 0), (12, 0), (12, 1)}
)
_ARCH_RE = re.compile(r"^(?:sm_?|compute_?)?(\d{1,2})(?:\.(\d))?(\d)?([af]?)$")
# A marker named like an architecture ("sm95", "sm_90", "sm_90a"): one of SHORTHAND_MARKERS or a mistake.
_ARCH_MARKER_RE = re.compile(r"^sm_?\d+[af]?$")

MARKER_HELP = {
    "sm80": "sm80(exact=False): needs compute capability at least 8.0 (exact=True: 8.x only); skipped elsewhere",
    "sm90": "sm90(exact=False): needs compute capability at least 9.0 (exact=True: 9.x only, for sm_90a code); skipped elsewhere",
    GENERIC_MARKER: "gpu_arch(arch, exact=False): needs compute capability at least arch ('sm_89', '8.9', 'sm_90a' = exactly 9.x)",
}


@dataclass(frozen=True)
class ArchRequirement:
    min_cc: tuple[int, int]
    exact_major: bool
    marker: str

    def unmet_reason(self, device: DeviceInfo) -> str | None:
        cc = device.compute_capability
        ok = cc[0] == self.min_cc[0] and cc >= self.min_cc if self.exact_major else cc >= self.min_cc
        if ok:
            return None
        want = (
            f"compute capability {self.min_cc[0]}.x (at least {self.min_cc[0]}.{self.min_cc[1]}) exactly"
            if self.exact_major
            else f"compute capability >= {self.min_cc[0]}.{self.min_cc[1]}"
        )
        return (
            f"needs {want} ({self.marker}); GPU {device.ordinal} is {device.name} "
            f"with compute capability {cc[0]}.{cc[1]}"
        )


def parse_arch(text: str) -> tuple[tuple[int, int], bool]:
    """'sm_90a' -> ((9, 0), True); '8.9' / 'sm89' / 'sm_89' -> ((8, 9), False)."""
    m = _ARCH_RE.match(str(text).strip().lower())
    if not m:
        raise ValueError(f"unknown GPU architecture {text!r}: expected a form like 'sm_80', 'sm90', '8.9' or 'sm_90a'")
    digits, minor_dot, minor_tail, suffix = m.groups()
    if minor_dot is not None:
        major, minor = int(digits), int(minor_dot)
    elif minor_tail is not None:
        major, minor = int(digits), int(minor_tail)
    elif len(digits) == 2:
        major, minor = int(digits[0]), int(digits[1])
    else:
        raise ValueError(f"unknown GPU architecture {text!r}: give major and minor, e.g. 'sm_80' or '8.0'")
    if (major, minor) not in KNOWN_CAPABILITIES:
        known = ", ".join(f"{a}.{b}" for a, b in sorted(KNOWN_CAPABILITIES))
        raise ValueError(
            f"unknown GPU architecture {text!r}: compute capability {major}.{minor} does not exist (known: {known})"
        )
    return (major, minor), bool(suffix)


def _exact(mark: pytest.Mark, where: str) -> bool:
    unknown = set(mark.kwargs) - {"exact"}
    if unknown:
        raise GpuPerfUsageError(
            f"{where}: @pytest.mark.{mark.name} got unknown keyword(s) {sorted(unknown)}; only exact= is accepted"
        )
    value = mark.kwargs.get("exact", False)
    if not isinstance(value, bool):
        raise GpuPerfUsageError(f"{where}: @pytest.mark.{mark.name}(exact=...) must be True or False, got {value!r}")
    return value


def _unknown_marker(name: str, where: str) -> GpuPerfUsageError:
    """A marker named like an architecture that is none of SHORTHAND_MARKERS: without
    --strict-markers pytest only warns, and the test would run on every GPU."""
    known = " and ".join(f"@pytest.mark.{m}" for m in SHORTHAND_MARKERS)
    try:
        (major, minor), exact = parse_arch(name)
    except ValueError as exc:
        hint = f"{exc}; for another architecture write @pytest.mark.{GENERIC_MARKER}('sm_89')"
    else:
        arch = f"sm_{major}{minor}" + ("a" if exact else "")
        shorthand = next((m for m, cc in SHORTHAND_MARKERS.items() if cc == (major, minor) and not exact), None)
        hint = f"for {arch} write " + (f"@pytest.mark.{shorthand} or " if shorthand else "")
        hint += f"@pytest.mark.{GENERIC_MARKER}({arch!r})"
    return GpuPerfUsageError(
        f"{where}: @pytest.mark.{name} is not an architecture marker: the known ones are {known} "
        f"(compute capability at least 8.0 / 9.0) and @pytest.mark.{GENERIC_MARKER}(arch); {hint}"
    )


def requirements(item: pytest.Item) -> list[ArchRequirement]:
    """Every architecture requirement the test's markers state (all must hold). A marker named
    like an architecture but not one of SHORTHAND_MARKERS (``sm95``, ``sm_90``) is an error."""
    reqs: list[ArchRequirement] = []
    for mark in item.iter_markers():
        if mark.name not in SHORTHAND_MARKERS and _ARCH_MARKER_RE.match(mark.name):
            raise _unknown_marker(mark.name, item.nodeid)
        if mark.name in SHORTHAND_MARKERS:
            if mark.args:
                raise GpuPerfUsageError(f"{item.nodeid}: @pytest.mark.{mark.name} takes no positional arguments")
            exact = _exact(mark, item.nodeid)
            label = f"@pytest.mark.{mark.name}" + ("(exact=True)" if exact else "")
            reqs.append(ArchRequirement(SHORTHAND_MARKERS[mark.name], exact, label))
        elif mark.name == GENERIC_MARKER:
            if len(mark.args) != 1:
                raise GpuPerfUsageError(
                    f"{item.nodeid}: @pytest.mark.{GENERIC_MARKER} takes one architecture, e.g. 'sm_89'"
                )
            try:
                cc, implied_exact = parse_arch(mark.args[0])
            except ValueError as exc:
                raise GpuPerfUsageError(f"{item.nodeid}: @pytest.mark.{GENERIC_MARKER}: {exc}") from None
            exact = _exact(mark, item.nodeid) or implied_exact
            reqs.append(ArchRequirement(cc, exact, f"@pytest.mark.{GENERIC_MARKER}({mark.args[0]!r})"))
    return reqs
