"""One step of ``gpuperf bisect``: a commit checked out into a worktree of its own, the selected
perf tests run there by pytest, each variant timed interleaved with GOOD's build of it
(``--gpu-perf-against``), and the step's verdict read from the JSON report that run wrote.

Only the regression checks against GOOD decide: a speedup claim that fails is not a slowdown.
After BAD's step, only the checks that failed at BAD (the targets) count: a commit is bad when one
of them fails, good when every one of them passes, undecided when none fails and one is
INCONCLUSIVE (timed again once at three times the budget), and skipped when pytest could not run
the tests (a build or import error, a test missing there) or one of them was not paired with GOOD.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_gpuperf._diagnose.bisect_search import Verdict
from pytest_gpuperf._diagnose.commits import CheckoutError, Commit, Repository
from pytest_gpuperf._store.reports import load_report
from pytest_gpuperf.errors import GpuPerfError

RETRY_FACTOR = 3.0  # an undecided step is timed again with this many times its budget
LOG_TAIL_BYTES = 1 << 20  # of a step's pytest output read back for the reason it was skipped

# pytest's exit statuses other than 0 (passed) and 1 (tests failed): no verdict can be read.
PYTEST_EXIT = {
    2: "interrupted: errors during collection",
    3: "pytest internal error",
    4: "pytest usage error",
    5: "no tests collected",
}
NO_TESTS = (4, 5)  # what pytest answers to a selection that names no test there
# The plugin's options each step sets itself; the user's pytest arguments must leave them out.
OWNED = ("--gpu-perf-against", "--gpu-perf-json", "--gpu-perf-update-baselines", "--gpu-perf-budget")

# (pytest arguments, folder to run in, file for its output) -> pytest's exit status
Runner = Callable[[Sequence[str], Path, Path], int]
Target = tuple[str, str]  # (test node id, "<test>::<variant>") of one regression check


def run_pytest(args: Sequence[str], cwd: Path, log: Path) -> int:
    """``python -m pytest ARGS`` in ``cwd`` with this interpreter, its output into ``log``."""
    with log.open("wb") as out:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", *args],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    return done.returncode


@dataclass(frozen=True)
class Check:
    """One variant's regression check against its GOOD namesake, as the step's report holds it."""

    test: str  # the test's node id
    key: str  # "<test>::<variant>"
    verdict: str
    slowdown: float
    ci_low: float | None
    ci_high: float | None
    threshold: float | None

    @property
    def target(self) -> Target:
        return (self.test, self.key)

    @property
    def name(self) -> str:
        return check_name(self.test, self.key)

    def figure(self) -> str:
        interval = f" [{self.ci_low:.3f}, {self.ci_high:.3f}]" if self.ci_low and self.ci_high else ""
        return f"{self.slowdown:.3f}x{interval}"


@dataclass(frozen=True)
class Attempt:
    """One pytest run of a step."""

    budget: float | None  # the sampling budget the run used, as its report says
    exit_status: int | None  # pytest's; None where pytest did not run
    verdict: Verdict
    checks: tuple[Check, ...]  # the checks that decided the verdict
    reason: str  # why it was skipped or undecided
    failures: dict[str, str]  # node id -> failure message, for the tests whose check failed
    seconds: float


@dataclass(frozen=True)
class StepResult:
    commit: Commit
    attempts: tuple[Attempt, ...]

    @property
    def verdict(self) -> Verdict:
        return self.attempts[-1].verdict

    @property
    def last(self) -> Attempt:
        return self.attempts[-1]

    @property
    def seconds(self) -> float:
        return sum(a.seconds for a in self.attempts)

    def worst(self) -> Check | None:
        """The check that shows the largest slowdown."""
        checks = self.last.checks
        return max(checks, key=lambda c: c.slowdown) if checks else None


def judge(report: dict[str, Any], targets: Collection[Target] | None) -> tuple[Verdict, tuple[Check, ...], str]:
    """A step's verdict from its JSON report: over every check against GOOD (``targets`` None, for
    BAD's step) or over ``targets`` alone; with the checks that decided it and, when it is not
    decided, why."""
    paired: list[Check] = []
    unpaired: list[str] = []
    for test in report["tests"]:
        for m in test.get("measurements", []):
            reg = m.get("regression")
            if isinstance(reg, dict) and reg.get("against"):
                paired.append(
                    Check(
                        test["nodeid"],
                        str(m.get("key", m["measurement"]["name"])),
                        str(reg.get("verdict", m["verdict"])),
                        float(reg["slowdown"]),
                        _number(reg.get("ci_low")),
                        _number(reg.get("ci_high")),
                        _number(reg.get("threshold")),
                    )
                )
            elif m.get("note"):
                unpaired.append(f"{test['nodeid']}: {m['note']}")
    relevant = paired if targets is None else [c for c in paired if c.target in targets]
    failed = tuple(c for c in relevant if c.verdict == "fail")
    if failed:
        return Verdict.BAD, failed, ""
    found = {c.target for c in relevant}
    missing = sorted(check_name(*t) for t in set(targets) - found) if targets is not None else []
    if not relevant or missing:
        what = f"{', '.join(missing)} not timed against GOOD" if missing else "no measurement was paired with GOOD"
        skipped = [f"{s['count']} skipped: {s['reason']}" for s in report.get("skipped", [])]
        return Verdict.SKIP, tuple(relevant), "; ".join([what, *unpaired[:3], *skipped[:3]])
    undecided = tuple(c for c in relevant if c.verdict not in ("pass", "improved"))
    if undecided:
        return Verdict.UNDECIDED, undecided, f"{', '.join(c.name for c in undecided)} INCONCLUSIVE against GOOD"
    return Verdict.GOOD, tuple(relevant), ""


def check_name(test: str, key: str) -> str:
    """A check as one name: the test's node id and the variant (``tests/x.py::test_k[8]::fused``)."""
    return f"{test}::{key.rsplit('::', 1)[-1]}"


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


@dataclass
class Stepper:
    """Runs steps: each commit's worktree under ``scratch``, timed against ``good``."""

    repo: Repository
    good: Commit
    pytest_args: tuple[str, ...]
    scratch: Path
    budget: float | None = None  # None: the project's own (its ini file, environment or default)
    runner: Runner | None = None  # None: run_pytest, looked up at each call

    def run(self, commit: Commit, targets: Collection[Target] | None, announce: Callable[[str], None]) -> StepResult:
        """Time ``commit`` against GOOD; an undecided run is timed again once with a longer budget,
        after ``announce`` says so."""
        try:
            with self.repo.worktree(commit, self.scratch / commit.short) as tree:
                cwd = tree / self.repo.prefix
                if not cwd.is_dir():
                    return _not_run(commit, f"the folder {self.repo.prefix} does not exist at this commit")
                attempts = [self._attempt(commit, cwd, targets, self.budget, 1)]
                first = attempts[0]
                if first.verdict is Verdict.UNDECIDED and first.budget is not None:
                    longer = first.budget * RETRY_FACTOR
                    announce(f"undecided at a budget of {first.budget:g} s; timing it again at {longer:g} s")
                    attempts.append(self._attempt(commit, cwd, targets, longer, 2))
        except CheckoutError as exc:
            return _not_run(commit, str(exc))
        return StepResult(commit, tuple(attempts))

    def arguments(self, report: Path, budget: float | None) -> list[str]:
        ours = [
            "--gpu-perf",
            "--gpu-perf-only",
            "--no-gpu-perf-update-baselines",
            f"--gpu-perf-against={self.good.sha}",
            f"--gpu-perf-json={report}",
        ]
        if budget is not None:
            ours.append(f"--gpu-perf-budget={budget:g}")
        return [*ours, *self.pytest_args]

    def _attempt(
        self, commit: Commit, cwd: Path, targets: Collection[Target] | None, budget: float | None, n: int
    ) -> Attempt:
        report = self.scratch / f"{commit.short}-{n}.json"
        log = self.scratch / f"{commit.short}-{n}.log"
        runner = self.runner or run_pytest
        start = time.monotonic()
        status = runner(self.arguments(report, budget), cwd, log)
        seconds = time.monotonic() - start
        if status not in (0, 1):
            why = f"pytest exit status {status} ({PYTEST_EXIT.get(status, 'not a test result')}){_detail(log)}"
            return Attempt(budget, status, Verdict.SKIP, (), why, {}, seconds)
        try:
            data = load_report(report)
        except GpuPerfError as exc:
            return Attempt(budget, status, Verdict.SKIP, (), f"no report to read a verdict from: {exc}", {}, seconds)
        verdict, checks, reason = judge(data, targets)
        texts = {t["nodeid"]: t["failure"] for t in data["tests"] if isinstance(t.get("failure"), str)}
        failures = {c.test: texts[c.test] for c in checks if c.verdict == "fail" and c.test in texts}
        used = data.get("settings", {}).get("budget")
        return Attempt(_number(used), status, verdict, checks, reason, failures, seconds)


def _not_run(commit: Commit, why: str) -> StepResult:
    return StepResult(commit, (Attempt(None, None, Verdict.SKIP, (), why, {}, 0.0),))


def _detail(log: Path) -> str:
    """The line of a step's pytest output that says what went wrong, if one does."""
    try:
        with log.open("rb") as f:
            f.seek(max(0, log.stat().st_size - LOG_TAIL_BYTES))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    for line in lines:
        if line.startswith(("E   ", "ERROR: ")):
            return ": " + " ".join(line.split())[:300]
    shown = [line.strip() for line in lines if line.strip()]
    return f": {shown[-1][:300]}" if shown else ""
