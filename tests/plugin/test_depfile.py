"""Reading the dependency files nvcc -M and gcc -MD write."""
from __future__ import annotations

from pathlib import Path

import pytest

from pytest_gpuperf._compile.depfile import parse_depfile


def test_continuations_escapes_and_relative_names() -> None:
    text = (
        "deps : /src/k.cu \\\n"
        "    sub/a.h /usr/include/x.h \\\n"
        "    /odd\\ name/b.h /hash\\#dir/c.h /dollar$$/d.h \\\n"
        "    /src/k.cu\n"
    )
    assert parse_depfile(text, Path("/work")) == (
        Path("/src/k.cu"), Path("/work/sub/a.h"), Path("/usr/include/x.h"),
        Path("/odd name/b.h"), Path("/hash#dir/c.h"), Path("/dollar$/d.h"),
    )


def test_only_the_named_target_counts() -> None:  # -MP adds phony rules; warnings hold colons
    text = "k.cu:3: warning: x\ndeps: /a.h /b.h\n/a.h:\n/b.h: /c.h\n"
    assert parse_depfile(text, Path("/")) == (Path("/a.h"), Path("/b.h"))


def test_text_without_a_rule_is_an_error() -> None:
    with pytest.raises(ValueError, match="not a dependency file"):
        parse_depfile("nvcc fatal : something\n", Path("/"))
