"""Code comments and docstrings say why, not when or where it was measured.

A date, a GPU's serial (``GPU-`` and eight hex digits) or a commit hash in a comment is a lab note:
it goes stale, and no reader can check it from the code. The provenance of a measured number lives
in data, where a test reads it: a margin's GPU, date and commit in ``kernels/<family>/margins.json``,
a report in ``evidence/`` (indexed by evidence/README.md), a baseline's ``recorded_at``; the design
reasoning behind a choice lives in the family's DESIGN.md, which may name a run by date, GPU and
commit. This test scans the comments and docstrings of the Python and CUDA sources under
pytest_gpuperf/, kernels/ and tests/; string literals that are code (test data, a report's field)
are not comments and are not scanned.
"""
from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("pytest_gpuperf", "kernels", "tests")
PYTHON, CUDA = {".py"}, {".cu", ".cuh", ".h"}
DATA_FOLDERS = {"evidence", "baselines", "__pycache__"}  # data, not code

DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
SERIAL = re.compile(r"\bGPU-[0-9a-fA-F]{8}")
# A commit hash: a word of 7 to 40 lowercase hex digits holding both a digit and a letter. A CUDA or
# Python hex literal (0x...) is one word with its "x", so it never matches; nor do decimal numbers
# (no letter) or words such as "decade" (no digit).
HEX_WORD = re.compile(r"(?<![\w.-])[0-9a-f]{7,40}(?![\w-])")


def _is_commit(word: str) -> bool:
    return any(c.isdigit() for c in word) and any(c.isalpha() for c in word) and not re.fullmatch(r"\d+e\d+", word)


def findings(text: str) -> list[str]:
    """What in ``text`` (one comment or docstring line) reads as a date, a GPU serial or a commit."""
    found = [f"date {m.group()}" for m in DATE.finditer(text)]
    found += [f"GPU serial {m.group()}" for m in SERIAL.finditer(text)]
    found += [f"commit {m.group()}" for m in HEX_WORD.finditer(text) if _is_commit(m.group())]
    return found


def python_comments(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and every docstring-like string (a statement that is only a
    string: module, class and function docstrings, and strings used as block comments)."""
    out: list[tuple[int, str]] = []
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    skip = {tokenize.NL, tokenize.COMMENT, tokenize.ENCODING}
    significant = [t for t in tokens if t.type not in skip]
    for t in tokens:
        if t.type == tokenize.COMMENT:
            out.append((t.start[0], t.string))
    for i, t in enumerate(significant):
        if t.type != tokenize.STRING:
            continue
        before = significant[i - 1].type if i else tokenize.NEWLINE
        after = significant[i + 1].type if i + 1 < len(significant) else tokenize.ENDMARKER
        if before in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT) and after in (tokenize.NEWLINE, tokenize.ENDMARKER):
            out += [(t.start[0] + n, line) for n, line in enumerate(t.string.splitlines())]
    return sorted(out)


def cuda_comments(source: str) -> list[tuple[int, str]]:
    """(line, text) of every // and /* */ comment, outside string and character literals."""
    out: list[tuple[int, str]] = []
    i, line, n = 0, 1, len(source)
    while i < n:
        c = source[i]
        if c == "\n":
            line += 1
            i += 1
        elif c in "\"'":
            j = i + 1
            while j < n and source[j] != c and source[j] != "\n":
                j += 2 if source[j] == "\\" else 1
            i = j + 1
        elif source.startswith("//", i):
            end = source.find("\n", i)
            end = n if end < 0 else end
            out.append((line, source[i:end]))
            i = end
        elif source.startswith("/*", i):
            end = source.find("*/", i + 2)
            end = n if end < 0 else end + 2
            for k, text in enumerate(source[i:end].split("\n")):
                out.append((line + k, text))
            line += source.count("\n", i, end)
            i = end
        else:
            i += 1
    return out


def _sources() -> list[Path]:
    found: list[Path] = []
    for name in SCANNED:
        found += sorted(p for p in (ROOT / name).rglob("*") if p.is_file() and p.suffix in PYTHON | CUDA
                        and not DATA_FOLDERS & set(p.relative_to(ROOT).parts))
    return found


def problems(path: Path) -> list[str]:
    source = path.read_text(encoding="utf-8")
    comments = python_comments(source) if path.suffix in PYTHON else cuda_comments(source)
    rel = path.relative_to(ROOT).as_posix()
    return [f"{rel}:{line}: {what}" for line, text in comments for what in findings(text)]


HOW = (
    "\nA comment says why, in the present tense. Move a measured number's provenance to data: a margin's "
    "GPU, date and commit to kernels/<family>/margins.json, a run to evidence/ and its README table, the "
    "reasoning to the family's DESIGN.md (where a run may be named by date, GPU and commit); a test keeps "
    "such values as data (a string or a constant), not in its comments."
)


def test_the_scan_sees_the_sources() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in _sources()}
    assert {"pytest_gpuperf/plugin.py", "kernels/megakernel/megakernel.cu", "kernels/megakernel/mk_ring.cuh",
            "tests/conftest.py"} <= names


@pytest.mark.parametrize("folder", SCANNED)
def test_no_dates_serials_or_commits_in_comments(folder: str) -> None:
    found = [p for path in _sources() if path.relative_to(ROOT).parts[0] == folder for p in problems(path)]
    assert not found, "dates, GPU serials or commit hashes in comments or docstrings:\n" + "\n".join(found) + HOW


def test_the_patterns_catch_what_they_should() -> None:
    day, serial, commit = "-".join(("2026", "11", "27")), "GPU-" + "148da975", "c04" + "d749"  # not a comment here
    assert findings(f"# measured on {day}") == [f"date {day}"]
    assert findings(f"# an H100 ({serial}...)") == [f"GPU serial {serial}"]
    assert findings(f"# at commit {commit}, the tree of {commit}e1") == [f"commit {commit}", f"commit {commit}e1"]
    for text in ("# mask 0xffffffff, 0x3f800000", "# 1234567 bytes", "# a decade", "# sm_90a", "# 1e10000 s",
                 "# a sha256 digest", "# the 7-bit field", "# see evidence/README.md", "# deadbeef"):
        assert findings(text) == [], text


def test_python_comments_are_comments_and_docstrings_only() -> None:
    source = (
        '"""Module docstring 2000-01-01."""\n'
        "X = '2000-01-02'  # a comment 2000-01-03\n"
        "def f():\n"
        "    '''Function docstring\n"
        "    over lines 2000-01-04.'''\n"
        "    return {'a': '2000-01-05'}\n"
        "f('2000-01-06')\n"
    )
    dates = [(line, findings(text)) for line, text in python_comments(source) if findings(text)]
    assert dates == [(1, ["date 2000-01-01"]), (2, ["date 2000-01-03"]), (5, ["date 2000-01-04"])]


def test_cuda_comments_skip_string_literals() -> None:
    source = (
        'const char* s = "// 2000-01-01";\n'
        "int x = 0x1234abcd;  // 2000-01-02\n"
        "/* one\n"
        "   2000-01-03 */ char c = '\"';\n"
        "// 2000-01-04\n"
    )
    dates = [(line, findings(text)) for line, text in cuda_comments(source) if findings(text)]
    assert dates == [(2, ["date 2000-01-02"]), (4, ["date 2000-01-03"]), (5, ["date 2000-01-04"])]
