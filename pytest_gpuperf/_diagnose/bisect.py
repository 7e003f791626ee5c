"""``gpuperf bisect``: the first commit between GOOD and BAD that made the selected perf tests
slower than GOOD.

The request is checked first (revisions, GOOD an ancestor of BAD, a clean working tree, pytest
arguments bisect does not own). BAD is timed against GOOD first: the checks that fail there are
the ones the search follows, and a BAD no slower than GOOD ends it. Then commits are timed in the
order ``bisect_search`` picks, each in its own worktree (``bisect_step``), until the first bad
commit is known or only skipped and undecided commits are left between the last good and the
first bad one. ``report`` gets a line for each step as it ends.
"""

from __future__ import annotations

import enum
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_gpuperf._diagnose.bisect_search import Search, Verdict, most_steps
from pytest_gpuperf._diagnose.bisect_step import NO_TESTS, OWNED, Runner, Stepper, StepResult
from pytest_gpuperf._diagnose.commits import Commit, Repository
from pytest_gpuperf.errors import GateFailure, GpuPerfError, GpuPerfUsageError

GATE_FAILURE = f"{GateFailure.__module__}.{GateFailure.__qualname__}: "  # how pytest's message starts


class Outcome(enum.Enum):
    FOUND = "found"  # the first bad commit
    NO_CULPRIT = "no culprit"  # BAD is not slower than GOOD
    NOT_ISOLATED = "not isolated"  # skipped or undecided commits hide which of a few it is


@dataclass(frozen=True)
class Request:
    good: str
    bad: str
    pytest_args: tuple[str, ...] = ()
    budget: float | None = None  # seconds per measurement; None: the project's own
    allow_dirty: bool = False


@dataclass
class Bisection:
    outcome: Outcome
    good: Commit
    bad: Commit
    commits: list[Commit]  # after GOOD, oldest first, BAD last
    steps: list[tuple[int, StepResult]] = field(default_factory=list)  # (index in commits, step), in order
    first_bad: StepResult | None = None  # the step that found the first bad commit bad
    candidates: list[Commit] = field(default_factory=list)  # NOT_ISOLATED: one of these is the first bad one
    diff_stat: str = ""  # of the first bad commit

    @property
    def seconds(self) -> float:
        return sum(step.seconds for _, step in self.steps)


def run_bisect(request: Request, cwd: Path, report: Callable[[str], None], runner: Runner | None = None) -> Bisection:
    """Search; ``report`` is called with each line to show. Usage errors (a bad request, a test
    missing at BAD) raise GpuPerfUsageError, a BAD that cannot be timed raises GpuPerfError."""
    _check_arguments(request.pytest_args)
    repo = Repository.at(cwd)
    good, bad = repo.commit(request.good, "GOOD"), repo.commit(request.bad, "BAD")
    if good.sha == bad.sha:
        raise GpuPerfUsageError(f"GOOD and BAD are the same commit ({good}); give a GOOD older than BAD")
    if not repo.is_ancestor(good.sha, bad.sha):
        raise GpuPerfUsageError(
            f"GOOD {good} is not an ancestor of BAD {bad}: bisect searches the commits between them; "
            f"give a GOOD from BAD's history, e.g. their merge base (git merge-base {good.short} {bad.short})"
        )
    changed = repo.changed_files()
    if changed and not request.allow_dirty:
        shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
        raise GpuPerfUsageError(
            f"the working tree has uncommitted changes ({shown}); bisect times commits, each in a checkout of "
            "its own, so these changes would be in no step: commit or stash them, or pass --allow-dirty"
        )
    commits = repo.between(good, bad)
    result = Bisection(Outcome.NOT_ISOLATED, good, bad, commits)
    report(
        f"bisecting {len(commits)} commit(s) after GOOD {good} up to BAD {bad}: "
        f"at most {most_steps(len(commits))} timed step(s) if none is skipped, BAD first"
    )
    with tempfile.TemporaryDirectory(prefix="gpuperf-bisect-") as scratch:
        stepper = Stepper(repo, good, request.pytest_args, Path(scratch), request.budget, runner)
        _search(stepper, result, report)
    if result.outcome is Outcome.FOUND:
        assert result.first_bad is not None
        result.diff_stat = repo.diff_stat(result.first_bad.commit)
    return result


def _search(stepper: Stepper, result: Bisection, report: Callable[[str], None]) -> None:
    commits = result.commits
    bad_step = _step(stepper, result, len(commits) - 1, None, report)
    _check_bad(bad_step, stepper.pytest_args)
    if bad_step.verdict is Verdict.GOOD:
        result.outcome = Outcome.NO_CULPRIT
        return
    if bad_step.verdict is not Verdict.BAD:  # undecided, even with the longer budget
        result.candidates = list(commits)
        return
    targets = frozenset(c.target for c in bad_step.last.checks)
    search = Search(len(commits))
    by_index = {len(commits) - 1: bad_step}
    while (index := search.next_probe()) is not None:
        step = _step(stepper, result, index, targets, report)
        by_index[index] = step
        search.record(index, step.verdict if step.verdict.decided else Verdict.SKIP)
    if search.first_bad is not None:
        result.outcome = Outcome.FOUND
        result.first_bad = by_index[search.first_bad]
    else:
        result.candidates = [commits[i] for i in search.candidates]


def _step(
    stepper: Stepper,
    result: Bisection,
    index: int,
    targets: frozenset[tuple[str, str]] | None,
    report: Callable[[str], None],
) -> StepResult:
    number = len(result.steps) + 1
    step = stepper.run(result.commits[index], targets, lambda line: report(f"{'':8}{line}"))
    result.steps.append((index, step))
    report(step_line(number, step))
    return step


def _check_bad(step: StepResult, pytest_args: Sequence[str]) -> None:
    """BAD's step must have timed something against GOOD: otherwise the selection is wrong (no such
    test, nothing paired with GOOD), or BAD cannot run its tests."""
    if step.verdict is not Verdict.SKIP:
        return
    last = step.last
    args = " ".join(pytest_args) or "(none: the project's default test paths)"
    if last.exit_status in NO_TESTS:
        raise GpuPerfUsageError(
            f"pytest selected no perf test at BAD {step.commit.short} with the arguments {args}: {last.reason}; "
            "name perf tests that exist at GOOD and BAD after --, e.g. -- tests/test_perf.py::test_speed"
        )
    if last.exit_status is None:
        raise GpuPerfError(f"BAD {step.commit.short} cannot be timed: {last.reason}")
    if last.exit_status in (0, 1):
        raise GpuPerfUsageError(
            f"at BAD {step.commit.short}, the perf tests selected by {args} timed nothing against GOOD: "
            f"{last.reason}; select perf tests that exist at GOOD too"
        )
    raise GpuPerfError(f"BAD {step.commit.short} cannot run the selected tests: {last.reason}")


def _check_arguments(pytest_args: Sequence[str]) -> None:
    for arg in pytest_args:
        owned = next((o for o in OWNED if arg == o or arg.startswith(o + "=")), None)
        if owned == "--gpu-perf-budget":
            raise GpuPerfUsageError(
                "give the budget to bisect (--budget SECONDS before --), not to pytest: bisect sets each step's "
                "budget and triples it to time an undecided step again"
            )
        if owned is not None:
            raise GpuPerfUsageError(f"{owned} is bisect's to set at each step; leave it out of the pytest arguments")
        path = Path(arg.split("::", 1)[0])
        if path.is_absolute():
            raise GpuPerfUsageError(
                f"{arg} is an absolute path: each step runs in a checkout of its own, so name tests by paths "
                "relative to the folder gpuperf bisect runs in"
            )


def step_line(number: int, step: StepResult) -> str:
    """One step's line: its commit, verdict, the slowdown against GOOD (or why it has none), time."""
    worst = step.worst()
    verdict = step.verdict
    if verdict.decided and worst is not None:
        checks = len(step.last.checks)
        which = f" ({worst.name}{f', worst of {checks}' if checks > 1 else ''})"
        detail = f"slowdown {worst.figure()}{which}"
    else:
        detail = step.last.reason
        if worst is not None:
            detail = f"slowdown {worst.figure()}: {detail}"
    return f"step {number:<3} {step.commit.short}  {verdict.value:<9}  {detail}  ({step.seconds:.1f} s)  {step.commit.subject}"


def failure_lines(step: StepResult) -> list[str]:
    """What the first bad commit's failing checks said: each failed test's message as pytest
    reported it, or the check's figures where the report holds no message."""
    lines: list[str] = []
    shown: set[str] = set()  # one message per test, however many of its variants failed
    for check in step.last.checks:
        text = step.last.failures.get(check.test)
        if text is None:
            threshold = f", threshold {1 + check.threshold:.4f}x" if check.threshold is not None else ""
            lines.append(f"{check.name}: slowdown {check.figure()} against GOOD{threshold}")
        elif check.test not in shown:
            shown.add(check.test)
            lines += [f"{check.test}:", *("  " + line for line in text.removeprefix(GATE_FAILURE).splitlines())]
    return lines
