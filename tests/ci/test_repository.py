"""The repository reads as a product: no development-log vocabulary in what users read, no citation
of paths outside the repository, and an evidence folder whose index names every file it keeps.

Measurements are named by date, GPU and commit. A development log's numbering (a numbered working
session, or the numbered run of one) means nothing to a reader of the repository, so README.md,
docs/, kernels/, tests/ and pytest_gpuperf/ may not use it; CHANGELOG.md and git history may.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("README.md", "docs", "kernels", "tests", "pytest_gpuperf")
TEXT_SUFFIXES = {".md", ".py", ".cu", ".cuh", ".cpp", ".h", ".txt", ".toml", ".cfg", ".yml", ".yaml", ".json"}

# A session's number (alone, a range, hyphenated, any case), or a numbered run "of" or "on" something.
DEV_LOG = re.compile(r"\bsessions?[ -]?\d+(?:\s*-\s*\d+)?|\bruns? \d+(?:\s*-\s*\d+)? (?:of|on)\b", re.IGNORECASE)
# A user has no ../shared beside the repository: cite such a note by its title and origin instead.
OUTSIDE = re.compile(r"\.\./shared/|\bshared/(?:seeds|ANCHORS)")

# Files another branch is rewriting; each entry goes once that file is clean (the test then XPASSes,
# which xfail_strict turns into a failure, so the entry cannot outlive the fix).
PENDING: dict[str, str] = {}


def _files() -> list[Path]:
    found: list[Path] = []
    for name in SCANNED:
        path = ROOT / name
        if path.is_file():
            found.append(path)
            continue
        found += sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES
                        and "__pycache__" not in p.parts and ".egg-info" not in str(p))
    return found


def _param(path: Path) -> object:
    rel = path.relative_to(ROOT).as_posix()
    marks = [pytest.mark.xfail(reason=PENDING[rel], strict=True)] if rel in PENDING else []
    return pytest.param(path, id=rel, marks=marks)


FILES = [_param(p) for p in _files()]


def _hits(pattern: re.Pattern[str], path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    return [f"{path.relative_to(ROOT)}:{n}: {line.strip()[:120]}"
            for n, line in enumerate(text.splitlines(), 1) if pattern.search(line)]


def test_the_scan_sees_the_product() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in _files()}
    assert {"README.md", "kernels/megakernel/README.md", "pytest_gpuperf/plugin.py"} <= names
    assert set(PENDING) <= names, "a pending entry names a file that no longer exists"


@pytest.mark.parametrize("path", FILES)
def test_no_development_log_vocabulary(path: Path) -> None:
    """Name a measurement by its date, GPU and commit, not by a session or run number."""
    hits = _hits(DEV_LOG, path) + _hits(OUTSIDE, path)
    assert not hits, "development-log vocabulary or paths outside the repository:\n" + "\n".join(hits)


def test_the_patterns_catch_what_they_should() -> None:
    n, m = 27, 28  # built at run time, so that this file passes its own scan
    for text in (f"session {n}'s lowest", f"sessions {n}-{m}", f"the session-{n} figures", f"Session {n}",
                 f"run {n} of the suite", f"runs {n}-{m} on an H100"):
        assert DEV_LOG.search(text), text
    for text in ("a pytest session", "session-scoped fixtures", "run 4 times", "the run on 2026-11-25", "sm90"):
        assert not DEV_LOG.search(text), text
    up, notes = "..", "shared"
    assert OUTSIDE.search(f"see {up}/{notes}/ANCHORS.md") and OUTSIDE.search(f"{notes}/seeds/001_x.txt")
    assert not OUTSIDE.search("shared memory")


# -- evidence/ ----------------------------------------------------------------------------------
EVIDENCE = ROOT / "evidence"


def _indexed(index: str) -> set[str]:
    """The file names in the first column of the index's tables; "`a-x1.json.gz`, `-x2`" names two,
    as does "`a-x1.json.gz`, `b.json.gz`"."""
    names: set[str] = set()
    for cell in re.findall(r"^\| (`[^|]+`) \|", index, re.M):
        first, *more = re.findall(r"`([^`]+)`", cell)
        names.add(first)
        stem = first.removesuffix(".json.gz").rsplit("-", 1)[0]
        names.update(f"{stem}{name}.json.gz" if name.startswith("-") else name for name in more)
    return names


def test_every_evidence_file_is_indexed_and_every_indexed_file_exists() -> None:
    index = (EVIDENCE / "README.md").read_text()
    listed = _indexed(index)
    kept = {p.name for p in EVIDENCE.iterdir() if p.name != "README.md"}
    assert kept - listed == set(), "files in evidence/ without a row in evidence/README.md"
    assert listed - kept == set(), "rows of evidence/README.md naming files that are not there"


EVIDENCE_LIMIT = 3_000_000  # bytes: 3 MB, the index included


def test_evidence_stays_small() -> None:
    total = sum(p.stat().st_size for p in EVIDENCE.iterdir())
    assert total <= EVIDENCE_LIMIT, (
        f"evidence/ holds {total / 1e6:.2f} MB, over {EVIDENCE_LIMIT / 1e6:.0f} MB: keep a report only if a test replays "
        "it, and strip what no test reads (evidence/README.md says what was stripped)")


def _replayed_names() -> str:
    """The text in which a replaying test names a report: the tests' sources (a name or its stem,
    e.g. in a list of runs) and the margins files, whose cited runs tests/families/test_margins.py
    reads again."""
    texts = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "tests").rglob("*.py"))
             if p.resolve() != Path(__file__).resolve()]
    texts += [p.read_text(encoding="utf-8") for p in sorted((ROOT / "kernels").glob("*/margins.json"))]
    return "\n".join(texts)


def test_every_evidence_file_is_read_by_a_test() -> None:
    named = _replayed_names()
    reports = sorted(p.name for p in EVIDENCE.iterdir() if p.name != "README.md")
    unread = [name for name in reports if name.removesuffix(".json.gz") not in named]
    assert reports and not unread, (
        "reports in evidence/ that no test names: replay each in a test or remove it, and keep the figure a "
        "document quotes as a table named by date, GPU and commit:\n" + "\n".join(unread))


# -- version and CHANGELOG.md ------------------------------------------------------------------
def test_the_version_is_one_and_the_changelog_has_its_section() -> None:
    """pyproject.toml and pytest_gpuperf/_version.py name one version; CHANGELOG.md (Keep a Changelog)
    opens with [Unreleased], then that version's dated section."""
    project = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    package = re.search(r'^__version__ = "([^"]+)"', (ROOT / "pytest_gpuperf" / "_version.py").read_text(), re.M)
    assert project and package and project.group(1) == package.group(1)
    sections = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert sections[:2] and sections[0] == ("Unreleased", "") and sections[1][0] == project.group(1) and sections[1][1]
