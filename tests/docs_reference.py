"""The reference pages generated from the parsers: docs/cli.md (every ``gpuperf`` subcommand, its
arguments and options) and the options and markers tables of docs/options.md.

    python -m tests.docs_reference           # exit 1, naming each page that differs from the parsers
    python -m tests.docs_reference --write   # rewrite the generated blocks

The generator reaches the package only through its entry points in pyproject.toml (the ``gpuperf``
console script's module and the ``pytest11`` plugin module), so it follows the package wherever
its modules live. It reads what a user sees: the pytest options and ini keys the plugin's
``pytest_addoption`` registers (their help ends in ``[kind, default D; env E, ini I]``), the
markers the plugin registers, and the ``gpuperf`` parser. The tables are rendered from the parsed
arguments rather than from ``--help`` text, whose layout differs between Python versions.
tests/ci/test_docs_reference.py fails when a page differs from what this module renders.
"""
from __future__ import annotations

import argparse
import importlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CLI_PAGE = ROOT / "docs" / "cli.md"
OPTIONS_PAGE = ROOT / "docs" / "options.md"
COMMAND = "python -m tests.docs_reference --write"


# -- the entry points ----------------------------------------------------------------------
def _entry(section: str, name: str) -> str:
    """``name = "module:attr"`` under ``[section]`` of pyproject.toml (read as text: no tomllib on 3.10)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    body = re.search(rf"^\[{re.escape(section)}\]\n(.*?)(?=^\[|\Z)", text, re.M | re.S)
    found = body and re.search(rf'^{re.escape(name)}\s*=\s*"([^"]+)"', body.group(1), re.M)
    if not found:
        raise ValueError(f"pyproject.toml has no {name} under [{section}]")
    return found.group(1)


def cli_parser() -> argparse.ArgumentParser:
    """The parser of the ``gpuperf`` console script: its module's ``build_parser()``."""
    module = importlib.import_module(_entry("project.scripts", "gpuperf").split(":")[0])
    parser: argparse.ArgumentParser = module.build_parser()
    return parser


def plugin_module() -> Any:
    """The module pytest loads as the plugin (the ``pytest11`` entry point)."""
    return importlib.import_module(_entry("project.entry-points.pytest11", "gpuperf").split(":")[0])


# -- markdown helpers ----------------------------------------------------------------------
def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _code(text: str) -> str:
    return f"`{text}`" if text else ""


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _block(name: str, body: str) -> str:
    return (f"<!-- generated: {name} ({COMMAND}; do not edit by hand) -->\n"
            f"{body.rstrip()}\n<!-- end generated: {name} -->")


def replace_block(text: str, name: str, body: str) -> str:
    """``text`` with its generated block ``name`` replaced by ``body``; an error if it has none."""
    pattern = re.compile(rf"<!-- generated: {re.escape(name)} .*?<!-- end generated: {re.escape(name)} -->", re.S)
    if not pattern.search(text):
        raise ValueError(f"no generated block {name!r} (<!-- generated: {name} ... --> ... <!-- end generated: {name} -->)")
    return pattern.sub(lambda _m: _block(name, body), text, count=1)


# -- gpuperf -------------------------------------------------------------------------------
def _help(action: argparse.Action, prog: str) -> str:
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    params = {k: v for k, v in vars(action).items() if v is not argparse.SUPPRESS}
    params["prog"] = prog
    if params.get("choices") is not None:
        params["choices"] = ", ".join(map(str, params["choices"]))
    return action.help % params


def _metavar(action: argparse.Action) -> str:
    if action.metavar is not None:
        return str(action.metavar)
    if action.choices is not None:
        return "{" + ",".join(map(str, action.choices)) + "}"
    return action.dest.upper() if action.option_strings else action.dest


def _takes_value(action: argparse.Action) -> bool:
    return action.nargs != 0


def _usage_part(action: argparse.Action) -> str:
    if not action.option_strings:
        name = _metavar(action)
        return {"?": f"[{name}]", "*": f"[{name}...]", "+": f"{name}..."}.get(str(action.nargs), name)
    flag = max(action.option_strings, key=len)
    text = f"{flag} {_metavar(action)}" if _takes_value(action) else flag
    if isinstance(action, argparse._AppendAction):
        text += " ..."  # repeatable
    return text


def _usage(prog: str, parser: argparse.ArgumentParser) -> str:
    grouped: dict[int, list[argparse.Action]] = {}
    group_of: dict[int, int] = {}
    for n, group in enumerate(parser._mutually_exclusive_groups):
        for action in group._group_actions:
            group_of[id(action)] = n
            grouped.setdefault(n, []).append(action)
    parts: list[str] = []
    done: set[int] = set()
    actions = [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]
    for action in [a for a in actions if a.option_strings] + [a for a in actions if not a.option_strings]:
        if id(action) in group_of:
            n = group_of[id(action)]
            if n not in done:
                done.add(n)
                parts.append("[" + " | ".join(_usage_part(a) for a in grouped[n]) + "]")
            continue
        part = _usage_part(action)
        parts.append(part if not action.option_strings or action.required else f"[{part}]")
    return " ".join([prog, *parts])


def _default(action: argparse.Action) -> str:
    if action.default in (None, False, argparse.SUPPRESS) or not _takes_value(action):
        return ""
    return f"{action.default:g}" if isinstance(action.default, float) else str(action.default)


def _subcommands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:  # type: ignore[type-arg]
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def cli_markdown() -> str:
    """The generated part of docs/cli.md."""
    parser = cli_parser()
    prog = parser.prog
    sub = _subcommands(parser)
    helps = {a.dest: a.help or "" for a in sub._choices_actions}
    out = [f"`{prog}`: {parser.description}", ""]
    out.append(_table(["command", "what it does"],
                      [[f"[`{prog} {name}`](#{prog}-{name})", helps.get(name, "")] for name in sub.choices]))
    top = [a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]
    out += ["", "Options of `gpuperf` itself: " + "; ".join(f"`{max(a.option_strings, key=len)}`: {_help(a, prog) or a.help or 'prints the version'}"
                                                         for a in top) + "."]
    for name, p in sub.choices.items():
        out += _command_section(f"{prog} {name}", helps.get(name, ""), p, "##")
    return "\n".join(out) + "\n"


def _nested(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:  # type: ignore[type-arg]
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def _command_section(title: str, summary: str, p: argparse.ArgumentParser, level: str) -> list[str]:
    """A command's heading, description, usage and argument table; then its own subcommands'."""
    out = ["", f"{level} `{title}`", "", (summary[:1].upper() + summary[1:] + ".") if summary else ""]
    if p.description:
        out += ["", p.description]
    nested = _nested(p)
    out += ["", "```", _usage(title, p) + (" ..." if nested else ""), "```", ""]
    rows = []
    if True:  # one indentation level, as the table's code had it
        for action in p._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            names = ", ".join(action.option_strings) if action.option_strings else _metavar(action)
            value = _metavar(action) if action.option_strings and _takes_value(action) else ""
            extra = []
            if action.required and action.option_strings:
                extra.append("required")
            if isinstance(action, argparse._AppendAction):
                extra.append("repeatable")
            if action.choices is not None and action.metavar is not None:
                extra.append("one of " + ", ".join(map(str, action.choices)))
            text = _help(action, p.prog) + (f" ({'; '.join(extra)})" if extra else "")
            rows.append([_code(names), _code(value), _code(_default(action)), text])
        out.append(_table(["argument", "value", "default", "meaning"], rows))
    if nested is not None:
        helps = {a.dest: a.help or "" for a in nested._choices_actions}
        for name, child in nested.choices.items():
            out += _command_section(f"{title} {name}", helps.get(name, ""), child, level + "#")
    return out


# -- pytest options and markers --------------------------------------------------------------
HELP_TAIL = re.compile(r"^(?P<text>.*) \[(?P<kind>[^\[\]]+), default (?P<default>[^;\]]+); env (?P<env>[A-Z0-9_]+), "
                       r"ini (?P<ini>[a-z0-9_]+)\]$", re.S)


@dataclass(frozen=True)
class Option:
    flag: str
    off_flag: str | None  # --no-... for a switch
    metavar: str | None
    kind: str
    default: str
    env: str
    ini: str
    help: str


def _parser() -> Any:
    from _pytest.config.argparsing import Parser

    parser = Parser(_ispytest=True)
    plugin_module().pytest_addoption(parser)
    return parser


def plugin_options() -> tuple[str, list[Option]]:
    """The plugin's option group's title and its options, as ``pytest --help`` lists them."""
    parser = _parser()
    group = next(g for g in parser._groups if g.options and any(o.names()[0].startswith("--gpu-perf") for o in g.options))
    switches_off = {o.attrs()["dest"]: o.names()[0] for o in group.options
                    if o.names()[0].startswith("--no-") and o.attrs().get("help") != argparse.SUPPRESS}
    options = []
    for o in group.options:
        attrs = o.attrs()
        name = o.names()[0]
        if attrs.get("help") == argparse.SUPPRESS or name.startswith("--no-"):
            continue  # the --flag=0 spellings, and the off switches (named with their option)
        m = HELP_TAIL.match(attrs["help"].replace("%%", "%"))
        if not m:
            raise ValueError(f"{name}: its help does not end in [kind, default D; env E, ini I]: {attrs['help']!r}")
        switch = attrs.get("nargs") == 0
        options.append(Option(name, switches_off.get(attrs["dest"]) if switch else None, attrs.get("metavar"),
                              m["kind"], m["default"], m["env"], m["ini"], m["text"]))
    return getattr(group, "description", "") or group.name, options


def plugin_markers() -> dict[str, str]:
    markers: dict[str, str] = dict(plugin_module().MARKERS)
    return markers


def per_test_keywords() -> list[str]:
    """The keywords ``@pytest.mark.gpu_perf(...)`` takes, as its registered help lists them."""
    text = plugin_markers()["gpu_perf"]
    return [k.strip() for k in text.split("for this test:", 1)[1].split(",")]


def options_markdown() -> str:
    """The options table of docs/options.md."""
    _, options = plugin_options()
    keywords = set(per_test_keywords())
    rows = []
    for o in options:
        if o.off_flag:
            takes = f"switch; `{o.off_flag}` turns it off"
        else:
            shown = o.metavar or o.kind
            takes = shown if o.kind in (shown, "on/off") or shown.startswith("{") else f"{shown} ({o.kind})"
            takes = "on/off" if o.kind == "on/off" else takes
        keyword = o.ini.removeprefix("gpu_perf_")
        rows.append([_code(o.flag), takes, o.default, f"`{o.ini}` / `{o.env}`",
                     _code(keyword) if keyword in keywords else "", o.help])
    return _table(["option", "takes", "default", "ini key / environment variable", "marker keyword", "meaning"], rows)


def markers_markdown() -> str:
    rows = []
    for name, text in plugin_markers().items():
        signature, _, meaning = text.partition(": ") if text.startswith(name) else (name, "", text)
        rows.append([f"`@pytest.mark.{signature}`", meaning or text])
    return _table(["marker", "meaning"], rows)


# -- pages -----------------------------------------------------------------------------------
def pages() -> dict[Path, str]:
    """Each generated page as it should read: its current text with the blocks re-rendered."""
    cli = replace_block(CLI_PAGE.read_text(encoding="utf-8"), "gpuperf", cli_markdown())
    opts = OPTIONS_PAGE.read_text(encoding="utf-8")
    opts = replace_block(opts, "options", options_markdown())
    opts = replace_block(opts, "markers", markers_markdown())
    return {CLI_PAGE: cli, OPTIONS_PAGE: opts}


def main(argv: list[str] | None = None) -> int:
    write = "--write" in (sys.argv[1:] if argv is None else argv)
    stale = []
    for path, text in pages().items():
        if path.read_text(encoding="utf-8") != text:
            stale.append(path)
            if write:
                path.write_text(text, encoding="utf-8")
    for path in stale:
        print(f"{'rewrote' if write else 'differs from the parsers'}: {path.relative_to(ROOT)}")
    return 1 if stale and not write else 0


if __name__ == "__main__":
    sys.exit(main())
