"""Markdown written by ``gpuperf report``, ``gpuperf diff`` and ``gpuperf margins`` quotes test
ids, variant names, device names, keys and notes literally: a value read from a file cannot end
its code span, start a heading or a list, inject HTML, an image or a link, or add a table cell.
The output is rendered with markdown-it (CommonMark and GFM tables) and its tokens inspected."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from pytest_gpuperf._cli.main import main
from pytest_gpuperf._report.markdown import code, text
from pytest_gpuperf._store.baselines import BaselineStore, BaselineEntry
from pytest_gpuperf._store.schema_versions import REPORT_SCHEMA

markdown_it = pytest.importorskip("markdown_it", reason="the test extra installs markdown-it-py")

HOSTILE_ID = "tests/x.py::test_a[`\n## injected <img src=https://e.example/x.png> | ![i](https://e.example/y.png)]"
HOSTILE = "`x` | <b>bold</b>\n## heading\n- item ![i](https://e.example/i.png) [l](https://e.example) &lt;"
HOSTILE_KEY = "key`x<img src=https://e.example/k.png>"


def render(markdown: str) -> list[Any]:
    return list(markdown_it.MarkdownIt("commonmark").enable("table").parse(markdown))


def walk(tokens: list[Any]) -> Iterator[Any]:
    for token in tokens:
        yield token
        yield from walk(token.children or [])


def headings(tokens: list[Any]) -> list[str]:
    return [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]


def assert_nothing_injected(tokens: list[Any]) -> None:
    injected = [t.type for t in walk(tokens) if t.type in ("html_inline", "html_block", "image", "link_open", "hr")]
    assert injected == []
    rows: list[int] = []
    for token in tokens:
        if token.type == "table_open":
            rows = []
        elif token.type == "tr_open":
            rows.append(0)
        elif token.type in ("th_open", "td_open"):
            rows[-1] += 1
        elif token.type == "table_close":
            assert len(set(rows)) == 1, f"a table's rows of {rows} cells"


def shown(inline: Any) -> str:
    """What an inline token shows: its text and code spans, escapes resolved."""
    return "".join(c.content if c.type in ("text", "code_inline") else "" for c in inline.children)


def flat(value: str) -> str:
    return value.replace("\n", " ")


def hostile_report(path: Path) -> Path:
    measurement = {"name": HOSTILE, "median_s": 1e-5, "ci_low_s": 0.9e-5, "ci_high_s": 1.1e-5, "confidence": 0.99}
    test = {"nodeid": HOSTILE_ID, "outcome": "failed",
            "measurements": [{"measurement": measurement, "verdict": "fail", "regression": None, "device": HOSTILE_KEY}],
            "figures": [{"key": HOSTILE, "value": 0.5, "unit": "<i>u</i>"}]}
    data = {"schema": REPORT_SCHEMA, "created": "2026-11-22\n# created", "tests": [test],
            "devices": {HOSTILE_KEY: {"name": HOSTILE, "driver_version": "<img src=https://e.example/d.png>"}},
            "skipped": [{"reason": HOSTILE, "count": 1}], "baseline_changes": [],
            "summary": {"fail <img src=https://e.example/s.png>": 1}, "notes": [HOSTILE, "1. an ordered start", "# h"]}
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("flags", [(), ("--failures-first",)], ids=["default", "failures-first"])
def test_report_markdown_quotes_what_the_report_holds(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     flags: tuple[str, ...]) -> None:
    assert main(["report", str(hostile_report(tmp_path / "r.json")), "--markdown", *flags]) == 0
    tokens = render(capsys.readouterr().out)
    assert headings(tokens) == ["gpu-perf report", "Failed tests (1)", "Figures", "Skipped, and why", "Notes"]
    assert_nothing_injected(tokens)
    spans = [t.content for t in walk(tokens) if t.type == "code_inline"]
    assert flat(HOSTILE_ID) in spans and HOSTILE_KEY in spans
    texts = [t.content for t in walk(tokens) if t.type == "text"]
    items = [shown(tokens[i + 2]) for i, t in enumerate(tokens) if t.type == "list_item_open"]
    assert items[-3:] == [flat(HOSTILE), "1. an ordered start", "# h"], "each note is one literal list item"
    assert any(flat(HOSTILE) in s for s in texts)


def test_diff_quotes_keys_and_device_software(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def entry(median: float) -> BaselineEntry:
        return BaselineEntry(median, median * 0.99, median * 1.01, 0.99, 100, 0.01, "cold", "graph", "2026-11-21T00:00:00+00:00")

    device = {"name": "GPU", "key": "nvidia-h200-sm90-132sm-140gib", "driver_version": "580.1"}
    BaselineStore(tmp_path / "old").update(device["key"], "tests/fam/test_perf.py", device, {HOSTILE_ID + "::k": entry(1e-5)})
    newer = {**device, "driver_version": "<img src=https://e.example/d.png>\n## driver"}
    BaselineStore(tmp_path / "new").update(device["key"], "tests/fam/test_perf.py", newer, {HOSTILE_ID + "::k": entry(2e-5)})
    assert main(["diff", str(tmp_path / "old"), str(tmp_path / "new")]) == 0
    out = capsys.readouterr().out
    tokens = render(out)
    assert headings(tokens) == []
    assert_nothing_injected(tokens)
    cells = [shown(tokens[i + 1]) for i, t in enumerate(tokens) if t.type == "td_open"]
    assert flat(HOSTILE_ID) + "::k" in cells
    assert "driver_version 580.1 -> <img src=https://e.example/d.png> ## driver" in out.replace("\\<", "<")


def test_margins_markdown_quotes_keys_and_tests(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    entry = {"test": HOSTILE_ID, "fast": "fast", "baseline": "slow", "value": None, "reason": HOSTILE}
    path = tmp_path / "margins.json"
    path.write_text(json.dumps({"schema": "pytest-gpuperf/margins/1", "family": "fam", "runs": {},
                                "margins": {"sm90": {HOSTILE: entry}}}))
    main(["margins", "--file", str(path), "--markdown"])
    tokens = render(capsys.readouterr().out)
    assert headings(tokens) == []
    assert_nothing_injected(tokens)
    assert flat(HOSTILE) in [t.content for t in walk(tokens) if t.type == "code_inline"]


@pytest.mark.parametrize("value", [HOSTILE, HOSTILE_ID, "``", "` `", " lead", "a\\|b", "-", "+ x", "1) x", "> q",
                                   "*** ", "___", "~~~", "=", "[r]: https://e.example", "&amp;"])
def test_code_and_text_render_as_the_value_itself(value: str) -> None:
    for markdown in (f"- {code(value)}", f"- {text(value)}", f"| a |\n| --- |\n| {code(value, cell=True)} |",
                     f"| a |\n| --- |\n| {text(value, inline=True)} |"):
        tokens = render(markdown)
        assert_nothing_injected(tokens)
        inline = [t for t in tokens if t.type == "inline"][-1]
        assert shown(inline).strip() == flat(value).strip(), markdown
