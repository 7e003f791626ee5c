"""What one launch of a variant runs: each kernel, its launch configuration, its resources and its
own device time (``Breakdown``), and how two breakdowns of one variant differ (``diff``).

A breakdown is taken after a verdict, never during the timed samples. Each kernel's time is its
own: the kernel replayed alone, hot, back to back (see ``kernel_nodes``), so the kernels' times
sum to the launch's time only where they do not overlap one another and the launch does little
else (copies, memsets and host work are not kernels); ``coverage`` says how close they came.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_gpuperf._timing.kernel_names import identifier

__all__ = ["KernelTime", "Breakdown", "KernelChange", "BreakdownDiff", "diff", "median_interval"]

# Two sides' medians differ only when their order-statistic intervals (each at this confidence)
# do not overlap; with per-kernel samples of a few dozen repeats that is a conservative test.
CONFIDENCE = 0.99
MOVED_AT = 0.02  # a kernel whose time moved less than this is not named as one that moved


def median_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """The median of ``values`` and a distribution-free interval for it: the order statistics
    whose ranks a Binomial(n, 1/2) brackets with ``confidence`` (the whole range for tiny n)."""
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        raise ValueError("median_interval: no values")
    median = statistics.median(ordered)
    # the largest k with P(Binomial(n, 1/2) < k) <= (1 - confidence) / 2: [x_(k), x_(n - k + 1)]
    alpha, k, below = (1.0 - confidence) / 2.0, 0, 0.0
    while k < n // 2:
        step = math.comb(n, k) / 2.0**n
        if below + step > alpha:
            break
        below += step
        k += 1
    if k == 0:
        return median, ordered[0], ordered[-1]
    return median, ordered[k - 1], ordered[n - k]


@dataclass(frozen=True)
class KernelTime:
    """One kernel of a launch: as the driver names it (mangled for C++), its configuration and
    resources (None where unknown), and its own device time per launch of the variant (all its
    calls with this configuration together), one value per repeat."""

    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_smem: int
    seconds: tuple[float, ...]
    calls: int = 1
    registers: int | None = None
    static_smem: int | None = None
    local_bytes: int | None = None

    @property
    def median_s(self) -> float:
        return statistics.median(self.seconds) if self.seconds else math.nan

    def interval(self) -> tuple[float, float]:
        if not self.seconds:
            return math.nan, math.nan
        _, low, high = median_interval(self.seconds)
        return low, high

    @property
    def configuration(self) -> str:
        """``grid 132x1x1 block 384x1x1 smem 227 KiB`` (dynamic shared memory when any)."""
        text = f"grid {_dims(self.grid)} block {_dims(self.block)}"
        return text + (f" dyn smem {_bytes(self.dynamic_smem)}" if self.dynamic_smem else "")

    def resources(self) -> dict[str, int]:
        """The resources the driver reported, by name (unknown ones left out)."""
        known = {
            "registers": self.registers,
            "static_smem": self.static_smem,
            "local_bytes": self.local_bytes,
            "dynamic_smem": self.dynamic_smem,
        }
        return {k: v for k, v in known.items() if v is not None}

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "grid": list(self.grid),
            "block": list(self.block),
            "dynamic_smem": self.dynamic_smem,
            "calls": self.calls,
            "registers": self.registers,
            "static_smem": self.static_smem,
            "local_bytes": self.local_bytes,
            "median_s": self.median_s,
            "seconds": list(self.seconds),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KernelTime:
        return cls(
            name=str(data["name"]),
            grid=_triple(data["grid"], "grid"),
            block=_triple(data["block"], "block"),
            dynamic_smem=int(data.get("dynamic_smem") or 0),
            seconds=tuple(float(s) for s in data.get("seconds") or ()),
            calls=int(data.get("calls") or 1),
            registers=_optional_int(data.get("registers")),
            static_smem=_optional_int(data.get("static_smem")),
            local_bytes=_optional_int(data.get("local_bytes")),
        )


@dataclass(frozen=True)
class Breakdown:
    """The kernels one launch of a variant runs, in the order they first run."""

    kernels: tuple[KernelTime, ...]
    launch_s: float  # the whole launch's median time, taken the same way (hot, back to back)
    source: str  # how the kernels were found and timed: "graph nodes", "cupti", "fake"
    repeats: int
    notes: tuple[str, ...] = field(default=())

    @property
    def coverage(self) -> float:
        """The kernels' own times summed, over the launch's time (1.0: they account for all of it)."""
        total = sum(k.median_s for k in self.kernels)
        return total / self.launch_s if self.launch_s > 0 else math.nan

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "repeats": self.repeats,
            "launch_s": self.launch_s,
            "coverage": self.coverage,
            "notes": list(self.notes),
            "kernels": [k.to_json() for k in self.kernels],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Breakdown:
        """A breakdown from a report or a baseline file; ValueError names what is malformed."""
        try:
            kernels = tuple(KernelTime.from_json(k) for k in data["kernels"])
            return cls(
                kernels=kernels,
                launch_s=float(data["launch_s"]),
                source=str(data.get("source", "?")),
                repeats=int(data.get("repeats") or 0),
                notes=tuple(str(n) for n in data.get("notes") or ()),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed kernel breakdown ({type(exc).__name__}: {exc})") from None


@dataclass(frozen=True)
class KernelChange:
    """One kernel across two sides: ``before`` or ``after`` is None where it ran on one side only."""

    key: str  # the kernel's name, with "#2", "#3" for its later launches under other configurations
    before: KernelTime | None
    after: KernelTime | None
    before_key: str | None = None  # the name it had before, where that differs (another template instance)

    @property
    def ratio(self) -> float:
        """after / before of the kernel's own median time (nan where it is on one side only)."""
        if self.before is None or self.after is None or not self.before.median_s > 0:
            return math.nan
        return self.after.median_s / self.before.median_s

    def ratio_interval(self) -> tuple[float, float]:
        """A conservative interval for ``ratio``: the sides' median intervals divided crosswise."""
        if self.before is None or self.after is None:
            return math.nan, math.nan
        b_low, b_high = self.before.interval()
        a_low, a_high = self.after.interval()
        if not (b_low > 0 and b_high > 0):
            return math.nan, math.nan
        return a_low / b_high, a_high / b_low

    @property
    def moved(self) -> bool:
        """The kernel's time changed beyond its intervals and by at least MOVED_AT (or it appeared
        or disappeared)."""
        if self.before is None or self.after is None:
            return True
        low, high = self.ratio_interval()
        return (low > 1.0 and self.ratio >= 1.0 + MOVED_AT) or (high < 1.0 and self.ratio <= 1.0 - MOVED_AT)

    @property
    def reconfigured(self) -> bool:
        if self.before is None or self.after is None:
            return False
        b, a = self.before, self.after
        return (b.grid, b.block, b.dynamic_smem, b.calls) != (a.grid, a.block, a.dynamic_smem, a.calls)

    def resource_changes(self) -> dict[str, tuple[int, int]]:
        """Resources known on both sides that differ: name -> (before, after)."""
        if self.before is None or self.after is None:
            return {}
        b, a = self.before.resources(), self.after.resources()
        return {k: (b[k], a[k]) for k in b.keys() & a.keys() if b[k] != a[k]}


@dataclass(frozen=True)
class BreakdownDiff:
    """Two breakdowns of one variant, kernel by kernel (the side with more time first among equals)."""

    before: Breakdown
    after: Breakdown
    changes: tuple[KernelChange, ...]

    @property
    def moved(self) -> tuple[KernelChange, ...]:
        """Kernels whose time moved, appeared or disappeared, the largest change in time first."""
        return tuple(sorted((c for c in self.changes if c.moved), key=_time_change, reverse=True))

    @property
    def reconfigured(self) -> tuple[KernelChange, ...]:
        return tuple(c for c in self.changes if c.reconfigured)

    def to_json(self) -> dict[str, Any]:
        return {
            "moved": [_change_json(c) for c in self.moved],
            "reconfigured": [_change_json(c) for c in self.reconfigured],
        }


def diff(before: Breakdown, after: Breakdown) -> BreakdownDiff:
    """Pair the kernels of two breakdowns by name (a name launched under several configurations is
    paired launch by launch, in order); a kernel left over on each side with the same identifier
    (``heavy<64>`` and ``heavy<80>``: another instance of one template) is paired too, in order.
    Say what changed."""
    b, a = _keyed(before.kernels), _keyed(after.kernels)
    renamed: dict[str, str] = {}  # after's key -> before's key
    left = [k for k in b if k not in a]
    for key in (k for k in a if k not in b):
        match = next((k for k in left if identifier(b[k].name) == identifier(a[key].name)), None)
        if match is not None:
            renamed[key] = match
            left.remove(match)
    changes = [KernelChange(k, b.get(renamed.get(k, k)), a[k], renamed.get(k)) for k in a]
    changes += [KernelChange(k, b[k], None) for k in left]
    return BreakdownDiff(before, after, tuple(changes))


def _keyed(kernels: Iterable[KernelTime]) -> dict[str, KernelTime]:
    out: dict[str, KernelTime] = {}
    seen: dict[str, int] = {}
    for k in kernels:
        seen[k.name] = seen.get(k.name, 0) + 1
        out[k.name if seen[k.name] == 1 else f"{k.name}#{seen[k.name]}"] = k
    return out


def _time_change(c: KernelChange) -> float:
    before = c.before.median_s if c.before else 0.0
    after = c.after.median_s if c.after else 0.0
    return abs(after - before)


def _change_json(c: KernelChange) -> dict[str, Any]:
    low, high = c.ratio_interval()
    return {
        "kernel": c.key,
        "kernel_before": c.before_key or (c.key if c.before else None),
        "before_s": c.before.median_s if c.before else None,
        "after_s": c.after.median_s if c.after else None,
        "ratio": None if math.isnan(c.ratio) else c.ratio,
        "interval": None if math.isnan(low) else [low, high],
        "before_configuration": c.before.configuration if c.before else None,
        "after_configuration": c.after.configuration if c.after else None,
        "resources": {k: list(v) for k, v in sorted(c.resource_changes().items())},
    }


def _dims(d: tuple[int, int, int]) -> str:
    return "x".join(str(x) for x in d)


def _bytes(n: int) -> str:
    return f"{n // 1024} KiB" if n >= 1024 and n % 1024 == 0 else f"{n} B"


def _triple(value: Any, what: str) -> tuple[int, int, int]:
    items = [int(x) for x in value]
    if len(items) != 3:
        raise ValueError(f"{what} must have 3 dimensions, got {value!r}")
    return items[0], items[1], items[2]


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)
