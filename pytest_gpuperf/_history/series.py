"""Series read back from the history: one test variant (``<test>::<variant>``) on one GPU model
(its device key) on one basis, its points in run order.

A point's value is the calibrated ratio (its time over the reference kernel's, measured in the
same run) when the measurement was calibrated: offsets between machines of one model, and a
machine's state on the day, move both times and cancel in the ratio. Otherwise it is the median
time. The basis (the reference kernel's name, or ``time``) is part of the series: a ratio and a
time are never one line. Runs are ordered by their report's ``created`` time, then by the order
they were ingested; only a run's first measurement of a key on a device is used.
"""

from __future__ import annotations

import fnmatch
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Environment", "Point", "Series", "TIME_BASIS", "load_series", "matches_test"]

TIME_BASIS = "time"


@dataclass(frozen=True)
class Environment:
    """What a run measured on: the GPU model, the physical GPU, and the software below gpuperf."""

    device_key: str
    name: str | None
    uuid: str | None
    driver_version: str | None
    cuda_runtime_version: str | None
    cuda_driver_version: str | None
    cupy_version: str | None


@dataclass(frozen=True)
class Point:
    """One run's measurement in a series."""

    run_id: int
    created: str
    commit: str | None
    dirty: bool | None
    value: float | None
    low: float | None
    high: float | None
    verdict: str
    skip_reason: str | None
    environment: Environment


@dataclass(frozen=True)
class Series:
    key: str
    device_key: str
    basis: str  # the reference kernel, or TIME_BASIS
    points: tuple[Point, ...]

    @property
    def usable(self) -> list[Point]:
        """The points that belong on the line: not contended, with a finite positive value."""
        return [p for p in self.points if p.skip_reason is None and p.value is not None and p.value > 0]

    @property
    def name(self) -> str:
        basis = "time" if self.basis == TIME_BASIS else f"ratio to {self.basis}"
        return f"{self.key} on {self.device_key} ({basis})"


def matches_test(key: str, test: str) -> bool:
    """``show``'s selection: the key itself, every variant of a test (``test`` without ``::``),
    or a glob (``*``, ``?``) over keys."""
    if key == test or key.startswith(test + "::"):
        return True
    return any(c in test for c in "*?") and fnmatch.fnmatchcase(key, test.replace("[", "[[]"))


_QUERY = """
SELECT m.key, m.device_key, m.reference, r.id, r.created, r.commit_sha, r.dirty,
       m.median_s, m.ci_low_s, m.ci_high_s, m.ratio, m.ratio_low, m.ratio_high, m.verdict, m.skip_reason,
       e.name, e.uuid, e.driver_version, e.cuda_runtime_version, e.cuda_driver_version, e.cupy_version
FROM measurements m
JOIN runs r ON r.id = m.run_id
LEFT JOIN environments e ON e.run_id = m.run_id AND e.device_key = m.device_key
WHERE m.ordinal = 0 {where}
ORDER BY m.key, m.device_key, r.created, r.id
"""


def load_series(
    db: sqlite3.Connection,
    *,
    keys: Sequence[str] | None = None,
    device: str | None = None,
    branch: str | None = None,
) -> list[Series]:
    """Every series, or those of ``keys`` (exact keys), of one device key, of runs of one branch."""
    where, params = [], []
    if device:
        where.append("m.device_key = ?")
        params.append(device)
    if branch:
        where.append("r.branch = ?")
        params.append(branch)
    if keys is not None:
        if not keys:
            return []
        where.append(f"m.key IN ({', '.join('?' * len(keys))})")
        params.extend(keys)
    rows = db.execute(_QUERY.format(where="".join(f" AND {w}" for w in where)), params).fetchall()
    grouped: dict[tuple[str, str, str], list[Point]] = {}
    for row in rows:
        key, device_key, reference = row[0], row[1], row[2]
        value = row[10:13] if reference else row[7:10]
        point = Point(
            run_id=row[3],
            created=row[4],
            commit=row[5],
            dirty=None if row[6] is None else bool(row[6]),
            value=value[0],
            low=value[1],
            high=value[2],
            verdict=row[13],
            skip_reason=row[14],
            environment=Environment(device_key, *row[15:21]),
        )
        grouped.setdefault((key, device_key, reference or TIME_BASIS), []).append(point)
    return [Series(k, d, b, tuple(points)) for (k, d, b), points in grouped.items()]


def all_keys(db: sqlite3.Connection) -> list[str]:
    return [row[0] for row in db.execute("SELECT DISTINCT key FROM measurements ORDER BY key")]
