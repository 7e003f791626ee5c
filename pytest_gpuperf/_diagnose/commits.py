"""The git side of ``gpuperf bisect``: the repository, its revisions, the commits between GOOD and
BAD, and a detached worktree of one commit that is removed whatever happens while it is in use.

The commits searched are BAD's first-parent history back to GOOD: a total order in which "slower
than GOOD" can only switch on once, which ``git rev-list --ancestry-path`` over merges is not. A
merged branch is one commit there, its merge; when GOOD sits on the merged branch, the search
starts at the merge that brought it in."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_gpuperf._store.git_output import run_git
from pytest_gpuperf.errors import GpuPerfError, GpuPerfUsageError

WORKTREE_TIMEOUT_S = 600.0  # a checkout of a large repository with hooks (git-lfs) takes a while


class CheckoutError(GpuPerfError):
    """A commit could not be checked out into a worktree."""


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str

    @property
    def short(self) -> str:
        return self.sha[:12]

    def __str__(self) -> str:
        return f"{self.short} {self.subject}"


@dataclass(frozen=True)
class Repository:
    """The git work tree ``gpuperf bisect`` runs in: its top folder, and the folder the command ran
    in relative to it (each step runs pytest in the same folder of its own worktree)."""

    top: Path
    prefix: str

    @classmethod
    def at(cls, folder: Path) -> Repository:
        done = run_git(["rev-parse", "--show-toplevel", "--show-prefix"], folder, limit=1 << 16, timeout_s=60)
        lines = done.stdout.decode("utf-8", "replace").splitlines()
        if done.returncode != 0 or not lines:
            why = " ".join(done.stderr.split()) or "git rev-parse failed"
            raise GpuPerfUsageError(
                f"{folder} is not inside a git work tree ({why}); run gpuperf bisect in a checkout of the project"
            )
        return cls(Path(lines[0]), lines[1] if len(lines) > 1 else "")

    def git(self, args: Sequence[str], *, timeout_s: float = 120.0) -> str:
        """``git ARGS`` in the top folder; what it printed, or GpuPerfError naming the command."""
        done = run_git(args, self.top, timeout_s=timeout_s)
        out = done.stdout.decode("utf-8", "replace")
        if done.returncode != 0:
            raise GpuPerfError(f"git {' '.join(args)} failed: {' '.join(done.stderr.split()) or out.strip()}")
        return out

    def commit(self, rev: str, role: str) -> Commit:
        """The commit ``rev`` names (``role`` is GOOD or BAD, for the message), or a usage error."""
        if rev.startswith("-"):
            raise GpuPerfUsageError(f"{role} {rev!r} is not a git revision")
        done = run_git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"], self.top)
        sha = done.stdout.decode("ascii", "replace").strip()
        if done.returncode != 0 or not sha:
            raise GpuPerfUsageError(
                f"{role} {rev!r} is not a commit of the git repository at {self.top}; "
                "give a commit, branch or tag (e.g. HEAD~20, v1.2, origin/main)"
            )
        return Commit(sha, self.subject(sha))

    def subject(self, sha: str) -> str:
        return self.git(["log", "-1", "--format=%s", sha]).strip()

    def is_ancestor(self, older: str, newer: str) -> bool:
        done = run_git(["merge-base", "--is-ancestor", older, newer], self.top)
        if done.returncode not in (0, 1):
            raise GpuPerfError(f"git merge-base --is-ancestor failed: {' '.join(done.stderr.split())}")
        return done.returncode == 0

    def changed_files(self) -> list[str]:
        """Tracked files with uncommitted changes (staged or not); untracked files do not count."""
        out = self.git(["status", "--porcelain", "-z", "--untracked-files=no"])
        return [entry[3:] for entry in out.split("\0") if len(entry) > 3]

    def between(self, good: Commit, bad: Commit) -> list[Commit]:
        """BAD's first-parent history after GOOD, oldest first: the commits on it that have GOOD in
        their history (a merge that brought GOOD in, when GOOD is on a merged branch)."""
        descendants = set(self.git(["rev-list", "--ancestry-path", f"{good.sha}..{bad.sha}"]).split())
        chain = self.git(["log", "--first-parent", "--reverse", "--format=%H%x00%s", f"{good.sha}..{bad.sha}"])
        commits = []
        for line in chain.splitlines():
            sha, _, subject = line.partition("\0")
            if sha in descendants:
                commits.append(Commit(sha, subject))
        return commits

    def diff_stat(self, commit: Commit) -> str:
        """What ``commit`` changed against its first parent, as ``git diff --stat`` shows it."""
        return self.git(["diff", "--stat", f"{commit.sha}^1", commit.sha]).rstrip("\n")

    @contextlib.contextmanager
    def worktree(self, commit: Commit, folder: Path) -> Iterator[Path]:
        """``commit`` checked out, detached, into the new folder ``folder``; the worktree is removed
        when the block ends, by an error or Ctrl-C too."""
        try:
            self.git(["worktree", "add", "--detach", "--quiet", str(folder), commit.sha], timeout_s=WORKTREE_TIMEOUT_S)
        except GpuPerfError as exc:
            self._remove(folder)
            raise CheckoutError(f"{commit.short} cannot be checked out: {exc}") from None
        except BaseException:
            self._remove(folder)  # what an interrupted checkout left
            raise
        try:
            yield folder
        finally:
            self._remove(folder)

    def _remove(self, folder: Path) -> None:
        done = run_git(["worktree", "remove", "--force", str(folder)], self.top, timeout_s=WORKTREE_TIMEOUT_S)
        if done.returncode != 0 or folder.exists():
            shutil.rmtree(folder, ignore_errors=True)
            run_git(["worktree", "prune"], self.top)  # forgets worktrees whose folder is gone
