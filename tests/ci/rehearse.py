"""A small GitHub Actions runner for rehearsing a job's ``run:`` steps on this machine.

``rehearse(workflow, job, ...)`` runs the job's steps in order in ``workspace`` (a fresh clone),
as a runner would: each ``run:`` script through ``bash --noprofile --norc -eo pipefail``, with the
workflow's, the job's and the step's ``env:``, ``${{ ... }}`` expressions evaluated from fixed
contexts, and the files a step writes to (``$GITHUB_ENV``, ``$GITHUB_PATH``, ``$GITHUB_OUTPUT``,
``$GITHUB_STEP_SUMMARY``) read back between steps. A step's ``if:`` is evaluated (``success()``
by default; a failed step fails the rest, as on a runner).

What a runner does and this machine cannot is declared by the caller, step by step, with a reason:
``skip`` (a step that needs the network or a GPU), ``replace`` (an offline form of the same step),
and ``uses`` emulations for actions (checkout: the clone itself; setup-python: this interpreter).
An expression naming a context the caller did not provide is an error, so a typo in a workflow
is found here rather than on a runner.
"""
from __future__ import annotations

import os
import re
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import yaml


class RehearsalError(Exception):
    """The workflow uses something the harness cannot evaluate or was not told how to handle."""


@dataclass
class StepResult:
    name: str
    outcome: str  # "ran", "failed", "skipped", "replaced", "emulated", "not run (if: false)"
    reason: str = ""
    output: str = ""
    seconds: float = 0.0

    def line(self) -> str:
        return f"{self.outcome:>20}  {self.name}" + (f"  ({self.reason})" if self.reason else "")


@dataclass
class Runner:
    workspace: Path
    temp: Path
    contexts: dict[str, Any]
    env: dict[str, str] = field(default_factory=dict)
    path: list[str] = field(default_factory=list)
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)
    failed: bool = False


# -- expressions ------------------------------------------------------------------------------
_TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+(?:\.\d+)?)|(?P<op>==|!=|&&|\|\||!|\(|\)|,|<=|>=|<|>)"
                    r"|(?P<name>[A-Za-z_][\w-]*(?:\.[\w-]+|\[\d+\]|\.\*)*))")


class _Parser:
    """GitHub's expression syntax, as far as these workflows use it."""

    def __init__(self, text: str, runner: Runner, functions: Mapping[str, Callable[..., Any]]):
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m or m.end() == pos:
                if text[pos:].strip() == "":
                    break
                raise RehearsalError(f"cannot read the expression {text!r} at {text[pos:]!r}")
            kind = m.lastgroup or ""
            self.tokens.append((kind, m.group(kind)))
            pos = m.end()
        self.i = 0
        self.runner = runner
        self.functions = functions
        self.text = text

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        token = self.peek()
        if token is None or (value is not None and token[1] != value):
            raise RehearsalError(f"expected {value or 'more'} in {self.text!r}")
        self.i += 1
        return token

    def parse(self) -> Any:
        value = self.or_()
        if self.peek() is not None:
            raise RehearsalError(f"unexpected {self.peek()} in {self.text!r}")
        return value

    def or_(self) -> Any:
        value = self.and_()
        while self.peek() == ("op", "||"):
            self.take()
            other = self.and_()
            value = value if _truthy(value) else other
        return value

    def and_(self) -> Any:
        value = self.compare()
        while self.peek() == ("op", "&&"):
            self.take()
            other = self.compare()
            value = other if _truthy(value) else value
        return value

    def compare(self) -> Any:
        value = self.unary()
        while self.peek() in (("op", "=="), ("op", "!=")):
            op = self.take()[1]
            other = self.unary()
            same = _loose(value) == _loose(other)
            value = same if op == "==" else not same
        return value

    def unary(self) -> Any:
        if self.peek() == ("op", "!"):
            self.take()
            return not _truthy(self.unary())
        return self.atom()

    def atom(self) -> Any:
        kind, text = self.take()
        if kind == "str":
            return text[1:-1].replace("''", "'")
        if kind == "num":
            return float(text)
        if text == "(":
            value = self.or_()
            self.take(")")
            return value
        if kind == "name":
            if text in ("true", "false"):
                return text == "true"
            if text == "null":
                return None
            if self.peek() == ("op", "("):
                self.take("(")
                args = []
                while self.peek() != ("op", ")"):
                    args.append(self.or_())
                    if self.peek() == ("op", ","):
                        self.take()
                self.take(")")
                if text not in self.functions:
                    raise RehearsalError(f"the function {text}() is not known to the rehearsal")
                return self.functions[text](*args)
            return self.lookup(text)
        raise RehearsalError(f"unexpected {text!r} in {self.text!r}")

    def lookup(self, path: str) -> Any:
        parts = re.findall(r"[\w-]+|\[\d+\]", path)
        root = parts[0]
        if root == "steps":
            value: Any = {k: {"outputs": v} for k, v in self.runner.outputs.items()}
        elif root == "env":
            value = self.runner.env
        elif root in self.runner.contexts:
            value = self.runner.contexts[root]
        else:
            raise RehearsalError(f"the context {root!r} (in {path!r}) is not provided to the rehearsal")
        for part in parts[1:]:
            if part.startswith("["):
                value = value[int(part[1:-1])] if isinstance(value, list) and int(part[1:-1]) < len(value) else None
            elif isinstance(value, dict):
                if part not in value and root not in ("steps", "env", "vars", "secrets"):
                    raise RehearsalError(f"{path!r}: {part!r} is not provided to the rehearsal")
                value = value.get(part)
            else:
                value = None
        return value


def _truthy(value: Any) -> bool:
    return value not in (None, False, 0, 0.0, "")


def _loose(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value.lower()
    if isinstance(value, bool):
        return float(value)
    return value


def evaluate(text: str, runner: Runner, functions: Mapping[str, Callable[..., Any]]) -> Any:
    return _Parser(text, runner, functions).parse()


def substitute(text: str, runner: Runner, functions: Mapping[str, Callable[..., Any]]) -> str:
    """``text`` with each ``${{ expr }}`` replaced by its value, as a runner renders it."""

    def render(m: re.Match[str]) -> str:
        value = evaluate(m.group(1), runner, functions)
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return "" if value is None else str(value)

    return re.sub(r"\$\{\{\s*(.*?)\s*\}\}", render, text, flags=re.S)


# -- files a step writes --------------------------------------------------------------------
def read_key_values(path: Path) -> dict[str, str]:
    """``KEY=value`` lines and ``KEY<<DELIMITER`` blocks, as $GITHUB_ENV and $GITHUB_OUTPUT hold them."""
    found: dict[str, str] = {}
    lines = path.read_text().splitlines() if path.exists() else []
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            key, delimiter = line.split("<<", 1)
            block = []
            i += 1
            while i < len(lines) and lines[i] != delimiter:
                block.append(lines[i])
                i += 1
            found[key] = "\n".join(block)
        elif "=" in line:
            key, value = line.split("=", 1)
            found[key] = value
        i += 1
    return found


# -- the job ----------------------------------------------------------------------------------
def _scalar(value: Any) -> str:
    """A YAML value as the runner passes it on: booleans as 'true' / 'false'."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def load_workflow(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    data["on"] = data.pop(True, data.get("on"))  # type: ignore[call-overload]  # YAML 1.1 reads the key `on` as true
    return data


def rehearse(
    workflow: Path,
    job: str,
    *,
    workspace: Path,
    temp: Path,
    contexts: Mapping[str, Any],
    skip: Mapping[str, str] = {},
    replace: Mapping[str, tuple[str, str]] = {},
    uses: Mapping[str, Callable[[Runner, dict[str, Any]], str]] = {},
    base_env: Mapping[str, str] | None = None,
    step_env: Mapping[str, str] = {},
    timeout_s: float = 3600,
) -> list[StepResult]:
    """Run ``job`` of ``workflow`` step by step (see the module doc). ``skip`` maps a step's name
    to the reason it is not run; ``replace`` maps it to (its offline form, why); ``uses`` maps an
    action (``owner/name``) to a function emulating it and returning what it did; ``step_env``
    is added to every ``run:`` step (e.g. PYTEST_ADDOPTS)."""
    import time

    wf = load_workflow(workflow)
    spec = wf["jobs"][job]
    temp.mkdir(parents=True, exist_ok=True)
    files = {name: temp / name.lower() for name in ("GITHUB_ENV", "GITHUB_PATH", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY")}
    runner = Runner(workspace, temp, dict(contexts))
    env = dict(os.environ if base_env is None else base_env)
    env.update({"CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(workspace), "RUNNER_TEMP": str(temp),
                "RUNNER_OS": "Linux", "GITHUB_STEP_SUMMARY": str(files["GITHUB_STEP_SUMMARY"])})
    runner.env = env
    functions: dict[str, Callable[..., Any]] = {
        "success": lambda: not runner.failed,
        "failure": lambda: runner.failed,
        "always": lambda: True,
        "cancelled": lambda: False,
        "hashFiles": lambda *globs: "x" if any(any(workspace.glob(g)) for g in globs) else "",
        "contains": lambda hay, needle: (needle in hay) if isinstance(hay, (list, str)) else False,
        "startsWith": lambda text, prefix: str(text).lower().startswith(str(prefix).lower()),
        "format": lambda fmt, *args: re.sub(r"\{(\d+)\}", lambda m: str(args[int(m.group(1))]), fmt),
    }
    for scope in (wf.get("env") or {}, spec.get("env") or {}):
        env.update({k: substitute(_scalar(v), runner, functions) for k, v in scope.items()})
    shell = ((spec.get("defaults") or wf.get("defaults") or {}).get("run") or {}).get("shell", "bash")
    if shell != "bash":
        raise RehearsalError(f"job {job}: only bash steps are rehearsed, not {shell}")
    results: list[StepResult] = []
    for n, step in enumerate(spec.get("steps", [])):
        name = str(step.get("name") or step.get("uses") or f"step {n + 1}")
        condition = str(step.get("if", "success()"))
        condition = condition[3:-2] if condition.startswith("${{") else condition
        if not _truthy(evaluate(condition, runner, functions)):
            results.append(StepResult(name, "not run (if: false)", f"if: {step.get('if', 'success()')}"))
            continue
        if name in skip:
            results.append(StepResult(name, "skipped", skip[name]))
            continue
        if "uses" in step:
            action = str(step["uses"]).split("@", 1)[0]
            if action not in uses:
                raise RehearsalError(f"step {name!r} uses {action}, which the rehearsal neither emulates nor skips")
            with_ = {k: substitute(_scalar(v), runner, functions) for k, v in (step.get("with") or {}).items()}
            results.append(StepResult(name, "emulated", uses[action](runner, with_)))
            continue
        script = str(step["run"])
        outcome, reason = "ran", ""
        if name in replace:
            script, reason = replace[name]
            outcome = "replaced"
        for f in files.values():
            f.touch()
        files["GITHUB_OUTPUT"].write_text("")
        files["GITHUB_ENV"].write_text("")
        files["GITHUB_PATH"].write_text("")
        step_vars = {k: substitute(_scalar(v), runner, functions) for k, v in (step.get("env") or {}).items()}
        script = substitute(script, runner, functions)
        path = temp / f"step-{n + 1}.sh"
        path.write_text(script + "\n")
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
        run_env = {**env, **step_vars, **step_env, "GITHUB_ENV": str(files["GITHUB_ENV"]), "GITHUB_PATH": str(files["GITHUB_PATH"]),
                   "GITHUB_OUTPUT": str(files["GITHUB_OUTPUT"])}
        run_env["PATH"] = os.pathsep.join([*runner.path, run_env.get("PATH", "")])
        started = time.monotonic()
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(path)], cwd=workspace, env=run_env,
                              capture_output=True, text=True, timeout=timeout_s, check=False)
        seconds = time.monotonic() - started
        output = proc.stdout + proc.stderr
        if proc.returncode != 0:
            runner.failed = True
            results.append(StepResult(name, "failed", f"exit {proc.returncode}", output, seconds))
            continue
        env.update(read_key_values(files["GITHUB_ENV"]))
        runner.path[:0] = [line for line in files["GITHUB_PATH"].read_text().splitlines() if line.strip()][::-1]
        if step.get("id"):
            runner.outputs[str(step["id"])] = read_key_values(files["GITHUB_OUTPUT"])
        results.append(StepResult(name, outcome, reason, output, seconds))
    return results
