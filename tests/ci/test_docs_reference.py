"""docs/cli.md and the options and markers tables of docs/options.md are what the parsers produce
(tests/docs_reference.py renders them; ``python -m tests.docs_reference --write`` rewrites them),
and the generator sees every option that a real ``pytest --help`` lists."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import docs_reference as ref

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("path", [ref.CLI_PAGE, ref.OPTIONS_PAGE], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_generated_page_is_what_the_parsers_produce(path: Path) -> None:
    expected = ref.pages()[path]
    assert path.read_text(encoding="utf-8") == expected, (
        f"{path.relative_to(ROOT)} differs from the parsers: run `python -m tests.docs_reference --write`"
    )


def test_every_subcommand_and_option_has_its_place_in_the_cli_page() -> None:
    text = ref.CLI_PAGE.read_text(encoding="utf-8")
    sub = ref._subcommands(ref.cli_parser())
    for name, parser in sub.choices.items():
        assert f"## `gpuperf {name}`" in text
        section = text.split(f"## `gpuperf {name}`", 1)[1].split("\n## ", 1)[0]
        for action in parser._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}" in section or f", {flag}" in section, f"gpuperf {name} {flag} is not in its section"


def test_the_options_table_lists_what_pytest_help_lists(tmp_path: Path) -> None:
    """A real `pytest --help` (the plugin loaded through its entry point, as a user's run loads it)
    names the same --gpu-perf options as the generated table, their off switches included."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPU_PERF", "PYTEST_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env["COLUMNS"] = "200"
    out = subprocess.run([sys.executable, "-m", "pytest", "--help", "-p", "no:cacheprovider"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=120, check=True).stdout
    shown = set(re.findall(r"^\s+(--(?:no-)?gpu-perf[a-z-]*)", out, re.M))
    _, options = ref.plugin_options()
    table = {o.flag for o in options} | {o.off_flag for o in options if o.off_flag}
    assert shown == table
    page = ref.OPTIONS_PAGE.read_text(encoding="utf-8")
    for o in options:
        assert f"| `{o.flag}` |" in page and f"`{o.ini}` / `{o.env}`" in page


def test_the_block_replacement_needs_its_markers() -> None:
    text = "a\n<!-- generated: x (old) -->\nold\n<!-- end generated: x -->\nb\n"
    assert "new" in ref.replace_block(text, "x", "new") and "old\n" not in ref.replace_block(text, "x", "new")
    with pytest.raises(ValueError, match="no generated block 'y'"):
        ref.replace_block(text, "y", "new")
