"""Change points of the history's series, labelled: the link between the method (``changes``),
the series (``series``) and what moved (``labels``).

Each series is analysed over its newest ``window`` usable points (0: all of them). ``new_changes``
answers the question a CI job asks after ingesting a run: which changes did that run bring?
The newest run is the one ingested last; for each series with a point in it, the changes found
with that point and not without it are new, a change without it counting as the same when it
lies in the same direction within ``min_size - 1`` points.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_gpuperf._history.changes import Method, Step, find_steps
from pytest_gpuperf._history.labels import Label, label_change
from pytest_gpuperf._history.series import Point, Series

__all__ = ["DEFAULT_WINDOW", "Change", "changes_of", "newest_run", "new_changes"]

DEFAULT_WINDOW = 500


@dataclass(frozen=True)
class Change:
    series: Series
    step: Step
    label: Label
    before: Point  # the last point before the change
    after: Point  # the first point after it
    position: int  # of ``after`` among the series' usable points

    @property
    def slower(self) -> bool:
        return self.step.size > 1.0


def changes_of(
    series: Series, method: Method, window: int = DEFAULT_WINDOW, *, drop_last: bool = False
) -> list[Change]:
    """The series' confirmed, labelled changes, oldest first (``drop_last``: as if its newest
    usable point had not been ingested)."""
    usable = series.usable[:-1] if drop_last else series.usable
    offset = max(0, len(usable) - window) if window else 0
    points = usable[offset:]
    steps = find_steps([p.value for p in points if p.value is not None], method)
    return [
        Change(
            series,
            s,
            label_change(points, s.index, method.min_size),
            points[s.index - 1],
            points[s.index],
            offset + s.index,
        )
        for s in steps
    ]


def newest_run(db: sqlite3.Connection) -> int | None:
    row = db.execute("SELECT max(id) FROM runs").fetchone()
    return None if row is None or row[0] is None else int(row[0])


def new_changes(series: Sequence[Series], run_id: int, method: Method, window: int = DEFAULT_WINDOW) -> list[Change]:
    """The changes that run ``run_id`` brought to the series whose newest usable point is its."""
    found: list[Change] = []
    for s in series:
        usable = s.usable
        if not usable or usable[-1].run_id != run_id:
            continue
        now = changes_of(s, method, window)
        if not now:
            continue
        before = changes_of(s, method, window, drop_last=True)
        for change in now:
            known = any(
                old.slower == change.slower and abs(old.position - change.position) < method.min_size for old in before
            )
            if not known:
                found.append(change)
    return found
