"""``gpuperf bisect --good REV [--bad REV] [-- PYTEST_ARGS]``: the first commit that made the
selected perf tests slower than GOOD (``_diagnose.bisect`` searches), its diff stat and its
failure; the exit status says what was found."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_gpuperf._cli.arguments import setting_type
from pytest_gpuperf._diagnose.bisect import Bisection, Outcome, Request, failure_lines, run_bisect
from pytest_gpuperf._diagnose.bisect_search import Verdict
from pytest_gpuperf._diagnose.bisect_step import RETRY_FACTOR
from pytest_gpuperf.errors import GpuPerfError, GpuPerfUsageError

if TYPE_CHECKING:
    from pytest_gpuperf._cli.arguments import Subparsers

FOUND, NO_CULPRIT, USAGE, NOT_ISOLATED, COULD_NOT_RUN = 0, 1, 2, 3, 4
INTERRUPTED = 130  # as a shell reports a command Ctrl-C stopped

EXIT_STATUSES = (
    f"Exit status: {FOUND} the first bad commit was found; {NO_CULPRIT} no culprit (BAD is not slower than GOOD); "
    f"{USAGE} bad arguments (an unknown revision, GOOD not an ancestor of BAD, uncommitted changes, no perf test "
    f"selected at BAD, not a git repository); {NOT_ISOLATED} not isolated (skipped or undecided commits leave "
    f"several candidates, or BAD could not be told apart from GOOD); {COULD_NOT_RUN} BAD cannot run the selected "
    f"tests, or git failed; {INTERRUPTED} interrupted (Ctrl-C)."
)


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "bisect",
        help="find the first commit between GOOD and BAD that made the selected perf tests slower",
        description="Find the first commit between GOOD and BAD (BAD's first-parent history) that made the perf "
        "tests selected by PYTEST_ARGS slower than at GOOD. Each step checks a commit out into a worktree of its "
        "own and runs pytest --gpu-perf --gpu-perf-against GOOD there, so each variant is timed interleaved with "
        "GOOD's build of it and the machine and its clocks cancel. BAD is timed first; the regression checks that "
        "fail there decide every later step: bad when one fails, good when all pass. A step left INCONCLUSIVE is "
        f"timed again at {RETRY_FACTOR:g} times the budget and skipped if still undecided; a commit whose tests do "
        "not build, import or exist is skipped, as by git bisect skip. " + EXIT_STATUSES,
    )
    p.add_argument("--good", required=True, metavar="REV", help="a commit that is not slower (an ancestor of BAD)")
    p.add_argument("--bad", default="HEAD", metavar="REV", help="a commit that is slower (default: HEAD)")
    p.add_argument(
        "--budget",
        type=setting_type("budget"),
        metavar="SECONDS",
        help="each step's --gpu-perf-budget (default: the project's own)",
    )
    p.add_argument(
        "--allow-dirty",
        action="store_true",
        help="run although tracked files have uncommitted changes, which no step sees",
    )
    p.add_argument(
        "pytest_args",
        nargs=argparse.REMAINDER,
        metavar="-- PYTEST_ARGS",
        help="pytest's arguments after --: the perf tests to time (paths relative to this folder, -k, -m)",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    pytest_args = list(args.pytest_args)
    if pytest_args[:1] == ["--"]:
        pytest_args = pytest_args[1:]
    request = Request(args.good, args.bad, tuple(pytest_args), args.budget, args.allow_dirty)
    try:
        result = run_bisect(request, Path.cwd(), report=lambda line: print(line, flush=True))
    except GpuPerfUsageError as exc:
        print(f"gpuperf bisect: error: {exc}", file=sys.stderr)
        return USAGE
    except GpuPerfError as exc:
        print(f"gpuperf bisect: error: {exc}", file=sys.stderr)
        return COULD_NOT_RUN
    except KeyboardInterrupt:
        print("gpuperf bisect: interrupted; the worktrees were removed", file=sys.stderr)
        return INTERRUPTED
    for line in summary_lines(result):
        print(line)
    return {Outcome.FOUND: FOUND, Outcome.NO_CULPRIT: NO_CULPRIT, Outcome.NOT_ISOLATED: NOT_ISOLATED}[result.outcome]


def summary_lines(result: Bisection) -> list[str]:
    runs = sum(len(step.attempts) for _, step in result.steps)
    cost = f"{len(result.steps)} timed step(s), {runs} pytest run(s), {result.seconds:.1f} s"
    if result.outcome is Outcome.FOUND:
        assert result.first_bad is not None
        commit = result.first_bad.commit
        number = next(n for n, (_, step) in enumerate(result.steps, 1) if step is result.first_bad)
        return [
            f"first bad commit: {commit.sha} {commit.subject}",
            *result.diff_stat.splitlines(),
            f"its failure against GOOD (step {number}):",
            *("  " + line for line in failure_lines(result.first_bad)),
            cost,
        ]
    if result.outcome is Outcome.NO_CULPRIT:
        return [
            f"no culprit: BAD {result.bad} is not slower than GOOD {result.good}: every check against GOOD passed",
            cost,
        ]
    if result.steps[0][1].verdict is Verdict.UNDECIDED:  # BAD's own step
        return [
            f"not isolated: BAD {result.bad} could not be told apart from GOOD, even at {RETRY_FACTOR:g} times the "
            "budget; run again with a longer --budget",
            cost,
        ]
    steps = {result.commits[i].sha: step for i, step in result.steps}
    lines = [f"not isolated: the first bad commit is one of these {len(result.candidates)}:"]
    for commit in result.candidates:
        step = steps.get(commit.sha)
        why = "not timed" if step is None else step.verdict.value
        if step is not None and not step.verdict.decided:
            why += f" ({step.last.reason})"
        lines.append(f"  {commit}  {why}")
    return [*lines, cost]
