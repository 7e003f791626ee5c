"""What the documentation names exists: every ``--gpu-perf...`` option, ``gpu_perf_...`` ini key,
``GPU_PERF_...`` environment variable, ``gpuperf`` subcommand and subcommand option that README.md,
CONTRIBUTING.md, docs/ or a kernel family's README names is one the parsers (or, for the other
environment variables, the code and workflows) define. A documented ``--no-gpu-perf-calibrate`` that
never existed fails here."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests import docs_reference as ref

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md")),
         *sorted((ROOT / "kernels").glob("*/README.md"))]
IDS = [p.relative_to(ROOT).as_posix() for p in PAGES]
FENCE = re.compile(r"^\s*(```|~~~)")


def _pytest_names() -> tuple[set[str], set[str], set[str]]:
    """Option strings (with the off switches), ini keys and environment variables of the plugin."""
    parser = ref._parser()
    flags = {name.split("=")[0] for group in parser._groups for o in group.options for name in o.names()}
    _, options = ref.plugin_options()
    return {f for f in flags if "gpu-perf" in f}, {o.ini for o in options}, {o.env for o in options}


def _code_text() -> str:
    """The package, tests and workflows, where an environment variable a page names must be read."""
    parts = []
    for folder, pattern in (("pytest_gpuperf", "*.py"), ("tests", "*.py"), (".github", "*.yml"), ("kernels", "*.py")):
        parts += [p.read_text(encoding="utf-8", errors="replace") for p in (ROOT / folder).rglob(pattern)]
    return "\n".join(parts + [(ROOT / ".ci" / "run").read_text()])


def _code_lines(text: str) -> list[str]:
    """Lines of fenced code blocks, and the contents of inline code spans elsewhere."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif fenced:
            out.append(line)
        else:
            out += re.findall(r"`([^`]+)`", line)
    return out


FLAGS, INI, ENV = _pytest_names()
MARKER_NAMES = set(ref.plugin_markers())
CODE = _code_text()
SUBCOMMANDS = ref._subcommands(ref.cli_parser()).choices


@pytest.mark.parametrize("path", PAGES, ids=IDS)
def test_every_option_named_exists(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    named = {m.group(0) for m in re.finditer(r"--(?:no-)?gpu-perf(?:-[a-z]+)*", text)}
    assert named - FLAGS == set(), f"{path.name} names options pytest does not have: {sorted(named - FLAGS)}"


@pytest.mark.parametrize("path", PAGES, ids=IDS)
def test_every_ini_key_and_environment_variable_named_exists(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    keys = set(re.findall(r"\bgpu_perf_[a-z_]*[a-z]", text)) - INI - MARKER_NAMES
    assert keys == set(), f"{path.name} names ini keys the plugin does not have: {sorted(keys)}"
    env = set(re.findall(r"\bGPU_PERF_[A-Z_]*[A-Z]", text)) - ENV
    unread = {name for name in env if not re.search(rf"\b{name}\b", CODE)}
    assert unread == set(), f"{path.name} names environment variables nothing reads: {sorted(unread)}"


@pytest.mark.parametrize("path", PAGES, ids=IDS)
def test_every_gpuperf_command_named_exists_with_its_options(path: Path) -> None:
    problems = []
    for line in _code_lines(path.read_text(encoding="utf-8")):
        for m in re.finditer(r"(?:^|[\s(\"'$])gpuperf\s+([^\s|;&#)]+)((?:[^|;&#)\n])*)", line):
            word, rest = m.group(1), m.group(2)
            if word.startswith("-"):
                if word not in ("--version", "--help", "-h"):
                    problems.append(f"gpuperf {word}")
                continue
            if word not in SUBCOMMANDS:
                problems.append(f"gpuperf {word}: no such subcommand")
                continue
            known = {s for a in SUBCOMMANDS[word]._actions for s in a.option_strings}
            nested = ref._nested(SUBCOMMANDS[word])
            if nested is not None:  # gpuperf history [--db PATH] ingest|show|changes ...
                words = re.findall(r"(?<![\w-])([a-z][a-z-]*)\b", re.sub(r"--?[a-z][a-z-]*(?:\s+\S+)?", "", rest))
                child = next((w for w in words if w in nested.choices), None)
                if child is None and words:
                    problems.append(f"gpuperf {word} {words[0]}: no such subcommand of it")
                    continue
                if child is not None:
                    known |= {s for a in nested.choices[child]._actions for s in a.option_strings}
            problems += [f"gpuperf {word} {flag}: no such option" for flag in re.findall(r"(?<![\w-])(--?[a-z][a-z-]*)", rest)
                         if flag not in known and not flag.startswith("--gpu-perf")]
    assert not problems, f"{path.name}: " + "; ".join(problems)


def test_the_checks_catch_what_the_issue_found() -> None:
    assert "--no-gpu-perf-calibrate" not in FLAGS and "--gpu-perf-calibrate" in FLAGS
    assert "--no-gpu-perf" in FLAGS and "gpu_perf_calibrate" in INI and "GPU_PERF_CALIBRATE" in ENV
    assert "levels" in SUBCOMMANDS and "margins" in SUBCOMMANDS
