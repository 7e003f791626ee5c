"""The search of ``gpuperf bisect`` over a list of commits, as ``git bisect`` searches: GOOD, just
before the list, is good and the list's last commit (BAD) is bad; each probe is the commit nearest
the middle of the range still in doubt, and a commit that cannot be judged is skipped and never
probed again. Nothing here runs git or pytest: the caller probes and records each verdict."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field


class Verdict(enum.Enum):
    """A step's verdict on one commit, timed against GOOD."""

    GOOD = "good"  # every check against GOOD passed
    BAD = "bad"  # a check against GOOD failed: this commit is slower
    UNDECIDED = "undecided"  # a check against GOOD was INCONCLUSIVE, even with a longer budget
    SKIP = "skip"  # the commit could not be judged: it did not build, import or pair with GOOD

    @property
    def decided(self) -> bool:
        return self in (Verdict.GOOD, Verdict.BAD)


@dataclass
class Search:
    """The state of a search over ``count`` commits after GOOD, oldest first, the last one BAD.

    Indices run from 0 to ``count - 1``; ``good`` is the newest index known good (-1 for GOOD
    itself) and ``bad`` the oldest known bad. The first bad commit lies in ``good + 1 .. bad``.
    """

    count: int
    good: int = -1
    bad: int = field(init=False)
    undecided: set[int] = field(default_factory=set)  # skipped or undecided: never probed again

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError("a search needs at least one commit after GOOD")
        self.bad = self.count - 1

    def next_probe(self) -> int | None:
        """The commit to time next: the middle of the range in doubt, or the untested commit nearest
        to it (the older one on a tie); None when no commit in the range is left to time."""
        open_ = [i for i in range(self.good + 1, self.bad) if i not in self.undecided]
        if not open_:
            return None
        middle = (self.good + self.bad) // 2
        return min(open_, key=lambda i: (abs(i - middle), i))

    def record(self, index: int, verdict: Verdict) -> None:
        if not self.good < index <= self.bad:
            raise ValueError(f"commit {index} is outside the range in doubt ({self.good + 1}..{self.bad})")
        if verdict is Verdict.BAD:
            self.bad = index
        elif verdict is Verdict.GOOD:
            self.good = index
        else:
            self.undecided.add(index)

    @property
    def first_bad(self) -> int | None:
        """The first bad commit, once every commit before it back to a good one is decided."""
        return self.bad if self.bad == self.good + 1 else None

    @property
    def candidates(self) -> range:
        """The commits that may be the first bad one: all of the range in doubt."""
        return range(self.good + 1, self.bad + 1)


def most_steps(count: int) -> int:
    """The timed steps a search over ``count`` commits takes when none is skipped: BAD's check,
    then halving the ``count - 1`` commits before it."""
    return 1 + (math.ceil(math.log2(count)) if count > 1 else 0)
