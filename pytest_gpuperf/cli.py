"""The ``gpuperf`` command: inspect and maintain stored baselines, render saved reports.

    gpuperf list [DIR]                    devices, files, entry counts and recording dates
    gpuperf diff OLD NEW                  two baseline folders (or two files): a markdown table
    gpuperf diff --git REV [DIR]          the working tree's baselines against those at REV
    gpuperf prune [DIR] [--dry-run] [--keep-tests-from PATH ...] [--node-ids FILE]
    gpuperf report FILE [--markdown | --text]

Exit status: 0 done, 1 a file or folder is missing or corrupt (the message names the file
and the field) or a step failed (git, test collection), 2 bad arguments.
"""
from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Iterable, Mapping, Sequence

from pytest_gpuperf.baselines import BaselineFile, BaselineStore, Entry, module_file_name
from pytest_gpuperf.errors import BaselineFileError, GpuPerfError
from pytest_gpuperf.report import REPORT_SCHEMA, _table, fmt_time, summary_rows

DEFAULT_DIR = "baselines"
PROG = "gpuperf"


class ReportFileError(GpuPerfError):
    """A saved ``--gpu-perf-json`` report is unreadable, corrupt or of another schema."""


# -- reading baselines -------------------------------------------------------------
def other_kind(text: str) -> str | None:
    """The schema of another pytest-gpuperf file kind kept beside the baselines (the
    compile-time tier's ``baselines/static/*.json`` budgets), or None for a timing baseline
    file, valid or not, which the store's reader then judges."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    schema = data.get("schema") if isinstance(data, dict) else None
    if isinstance(schema, str) and schema.startswith("pytest-gpuperf/") and schema.split("/")[1] != "baselines":
        return schema
    return None


def baseline_paths(root: Path) -> tuple[list[Path], list[Path]]:
    """The timing baseline files under ``root``, and the files of other kinds found beside them."""
    mine: list[Path] = []
    others: list[Path] = []
    for path in BaselineStore(root).files():
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            text = ""
        (others if other_kind(text) else mine).append(path)
    return mine, others


def load_folder(root: Path) -> dict[str, BaselineFile]:
    """``'<device key>/<module>.json'`` -> validated file, for every baseline file under ``root``."""
    if not root.is_dir():
        raise BaselineFileError(f"baseline folder {root} does not exist (pass the folder, e.g. {DEFAULT_DIR}/)")
    found: dict[str, BaselineFile] = {}
    for path in baseline_paths(root)[0]:
        f = BaselineFile.read(path)
        if f is not None:  # removed since it was listed
            found[path.relative_to(root).as_posix()] = f
    return found


def _load_side(path: Path) -> dict[str, BaselineFile]:
    """A folder, or one baseline file (keyed by its device folder and name)."""
    if path.is_file():
        f = BaselineFile.read(path)
        assert f is not None
        return {f"{path.parent.name}/{path.name}": f}
    return load_folder(path)


def _git(args: Sequence[str], cwd: Path) -> str:
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise GpuPerfError("git is not installed; compare two folders instead: gpuperf diff OLD NEW") from None
    if proc.returncode != 0:
        raise GpuPerfError(f"git {' '.join(args)} failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def load_git(rev: str, root: Path) -> dict[str, BaselineFile]:
    """The baseline files under ``root`` as they were at git revision ``rev``."""
    if rev.startswith("-"):
        raise GpuPerfError(f"{rev!r} is not a git revision")
    here = root if root.is_dir() else Path.cwd()
    top = Path(_git(["rev-parse", "--show-toplevel"], here).strip()).resolve()
    try:
        rel = root.resolve().relative_to(top).as_posix()
    except ValueError:
        raise GpuPerfError(f"{root} is not inside the git work tree {top}") from None
    try:
        commit = _git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], top).strip()
    except GpuPerfError:
        raise GpuPerfError(f"{rev!r} is not a commit of the git repository at {top}") from None
    prefix = PurePosixPath(rel)
    found: dict[str, BaselineFile] = {}
    for name in _git(["ls-tree", "-r", "-z", "--name-only", commit, "--", rel], top).split("\0"):
        if not name.endswith(".json"):
            continue
        inner = PurePosixPath(name).relative_to(prefix) if rel != "." else PurePosixPath(name)
        if len(inner.parts) != 2:  # <device>/<module>.json only, as the store lays them out
            continue
        text = _git(["show", f"{commit}:{name}"], top)
        if other_kind(text) is None:
            found[inner.as_posix()] = BaselineFile.parse(Path(f"{rev}:{name}"), text)
    return found


# -- diff ----------------------------------------------------------------------------
@dataclass(frozen=True)
class DiffRow:
    file: str  # '<device key>/<module>.json'
    key: str  # 'test_name[params]::variant'
    old: Entry | None
    new: Entry | None

    @property
    def delta(self) -> float | None:
        return self.new.median_s / self.old.median_s - 1.0 if self.old and self.new else None

    @property
    def status(self) -> str:
        if self.old is None:
            return "added"
        if self.new is None:
            return "removed"
        if self.old.to_json() == self.new.to_json():
            return "identical"
        from pytest_gpuperf.stats import ratio_of_medians_ci

        ratio = ratio_of_medians_ci(self.new.interval, self.old.interval, self.old.confidence)
        if ratio.low > 1.0:
            return "slower"
        if ratio.high < 1.0:
            return "faster"
        return "within noise"


def diff_baselines(old: Mapping[str, BaselineFile], new: Mapping[str, BaselineFile]) -> list[DiffRow]:
    """Every entry of either side, paired by file and key, sorted."""
    rows: list[DiffRow] = []
    for file in sorted(set(old) | set(new)):
        a = old[file].entries if file in old else {}
        b = new[file].entries if file in new else {}
        rows.extend(DiffRow(file, key, a.get(key), b.get(key)) for key in sorted(set(a) | set(b)))
    return rows


def device_changes(old: Mapping[str, BaselineFile], new: Mapping[str, BaselineFile]) -> list[str]:
    """Software versions recorded with a device that differ between the two sides of a file."""
    found: dict[str, list[str]] = {}
    for name in sorted(set(old) & set(new)):
        a, b = old[name].device, new[name].device
        for field in ("driver_version", "cuda_runtime_version", "cupy_version"):
            if a.get(field) != b.get(field):
                change = f"{field} {a.get(field, '?')} -> {b.get(field, '?')}"
                seen = found.setdefault(name.split("/", 1)[0], [])
                if change not in seen:
                    seen.append(change)
    return [f"`{device}`: " + ", ".join(changes) for device, changes in sorted(found.items())]


def _md(text: str) -> str:
    """A table cell: pipes escaped, no line breaks."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def format_diff(rows: Sequence[DiffRow], devices: Sequence[str] = (), show_all: bool = False) -> str:
    shown = [r for r in rows if show_all or r.status != "identical"]
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    order = ("slower", "faster", "within noise", "added", "removed", "identical")
    summary = ", ".join(f"{counts[s]} {s}" for s in order if counts.get(s))
    out = [f"{len(rows)} baseline entries compared: {summary or 'none on either side'}."]
    if devices:
        out.append("")
        out.extend(f"- device software changed: {line}" for line in devices)
    if not shown:
        out.append("")
        out.append("No baseline entry differs." if rows else "No baseline files found.")
        return "\n".join(out) + "\n"
    out += ["", "| baseline file | key | old median | new median | delta | change |", "| --- | --- | ---: | ---: | ---: | --- |"]
    for r in shown:
        delta = f"{100 * r.delta:+.1f}%" if r.delta is not None else "-"
        out.append(
            f"| {_md(r.file)} | {_md(r.key)} | {fmt_time(r.old.median_s if r.old else None)} | "
            f"{fmt_time(r.new.median_s if r.new else None)} | {delta} | {r.status} |"
        )
    if not show_all and counts.get("identical"):
        out += ["", f"{counts['identical']} identical entries not listed (--all lists them)."]
    return "\n".join(out) + "\n"


# -- list ------------------------------------------------------------------------------
def format_list(root: Path) -> tuple[str, bool]:
    """The listing of ``root`` and whether every file in it is valid."""
    if not root.is_dir():
        raise BaselineFileError(f"baseline folder {root} does not exist (pass the folder, e.g. {DEFAULT_DIR}/)")
    ok = True
    sections: list[str] = []
    totals = {"devices": 0, "files": 0, "entries": 0}
    paths, others = baseline_paths(root)
    for device in sorted({p.parent.name for p in paths}):
        totals["devices"] += 1
        rows = [["file", "entries", "recorded"]]
        info: dict[str, Any] | None = None
        errors: list[str] = []
        for path in (p for p in paths if p.parent.name == device):
            try:
                f = BaselineFile.read(path)
            except BaselineFileError as exc:
                ok = False
                errors.append(f"  ERROR {exc}")
                continue
            if f is None:
                continue
            info = info or f.device
            dates = sorted(e.recorded_at[:10] for e in f.entries.values())
            when = "-" if not dates else dates[0] if dates[0] == dates[-1] else f"{dates[0]} .. {dates[-1]}"
            rows.append([path.name, str(len(f.entries)), when])
            totals["files"] += 1
            totals["entries"] += len(f.entries)
        head = device
        if info:
            head += (
                f": {info.get('name', '?')}, compute capability {info.get('compute_capability', '?')}, "
                f"{info.get('sm_count', '?')} SMs; driver {info.get('driver_version') or '?'}, "
                f"CUDA {info.get('cuda_runtime_version') or '?'}, CuPy {info.get('cupy_version') or '?'}"
            )
        sections.append("\n".join([head] + ([_table(rows)] if len(rows) > 1 else []) + errors))
    top = f"{root}: {totals['devices']} device(s), {totals['files']} file(s), {totals['entries']} entries"
    for folder in sorted({p.parent.name for p in others}):
        n = sum(1 for p in others if p.parent.name == folder)
        top += f"\n{folder}/: {n} file(s) of another kind, not listed (e.g. the compile-time tier's budgets)"
    return "\n\n".join([top] + sections) + "\n", ok


# -- prune ---------------------------------------------------------------------------
def collect_node_ids(paths: Sequence[str]) -> list[str]:
    """Test node ids as ``pytest --collect-only -q`` lists them (run in the current folder)."""
    cmd = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *paths]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise GpuPerfError(
            f"collecting the tests failed ({' '.join(cmd[1:])} exited {proc.returncode}); nothing was pruned:\n{tail}"
        )
    ids: list[str] = []
    for line in proc.stdout.splitlines():
        if not line.strip():
            break  # the node ids come first, then a blank line and the summary
        if "::" in line:
            ids.append(line.strip())
    if not ids:
        raise GpuPerfError(
            "pytest listed no test node ids (is -q in addopts, making the listing per file?); nothing was pruned. "
            "Pass the ids with --node-ids FILE instead."
        )
    return ids


def read_node_ids(source: str) -> list[str]:
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        raise GpuPerfError(f"cannot read the node id file {source}: {exc}") from None
    ids = [line.strip() for line in text.splitlines() if "::" in line and not line.lstrip().startswith("#")]
    if not ids:
        raise GpuPerfError(f"{source} holds no test node ids (lines like tests/x/test_perf.py::test_y[p]); nothing was pruned")
    return ids


def stale_entries(
    files: Mapping[str, BaselineFile], node_ids: Iterable[str], *, whole_suite: bool
) -> dict[str, list[str]]:
    """``file -> keys`` whose test no longer exists.

    An entry ``test[params]::variant`` in ``<device>/<module>.json`` is kept when the node id
    ``<module path>::test[params]`` was collected. Files of modules that nothing was collected
    from are pruned only when ``whole_suite`` (the whole test suite was collected): after
    ``--keep-tests-from tests/qkv`` the other families' files are left alone.
    """
    tests: dict[str, set[str]] = {}
    for nid in node_ids:
        module, _, test = nid.partition("::")
        tests.setdefault(module_file_name(module), set()).add(test)
    stale: dict[str, list[str]] = {}
    for name, f in sorted(files.items()):
        known = tests.get(PurePosixPath(name).name)
        if known is None and not whole_suite:
            continue
        gone = [k for k in sorted(f.entries) if k.rsplit("::", 1)[0] not in (known or set())]
        if gone:
            stale[name] = gone
    return stale


# -- report ----------------------------------------------------------------------------
def _need(value: Any, where: str, kinds: tuple[type, ...], path: Path, what: str) -> Any:
    if not isinstance(value, kinds) or isinstance(value, bool) and bool not in kinds:
        raise ReportFileError(f"report file {path}: field {where!r} must be {what}, got {value!r}")
    return value


def read_report_text(path: Path) -> str:
    """The text of a report file, decompressed when its name ends in ``.gz``."""
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return f.read()
    return path.read_text(encoding="utf-8")


def load_report(path: Path) -> dict[str, Any]:
    """A saved ``--gpu-perf-json`` report, checked field by field where the renderer reads it.

    A name ending in ``.gz`` is read through gzip (reports archived compressed)."""
    try:
        text = read_report_text(path)
    except FileNotFoundError:
        written = path.with_suffix("") if path.suffix == ".gz" else path
        raise ReportFileError(f"report file {path} does not exist (write one with pytest --gpu-perf --gpu-perf-json {written})") from None
    except (OSError, EOFError, UnicodeDecodeError, zlib.error) as exc:  # gzip: damaged data is zlib.error
        raise ReportFileError(f"report file {path} cannot be read: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReportFileError(f"report file {path} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    num, text_t, obj, seq = (int, float), (str,), (dict,), (list,)
    _need(data, "<top level>", obj, path, "a JSON object")
    if data.get("schema") != REPORT_SCHEMA:
        raise ReportFileError(
            f"report file {path}: field 'schema' must be {REPORT_SCHEMA!r}, got {data.get('schema')!r} (written by another version?)"
        )
    _need(data.get("devices", {}), "devices", obj, path, "an object")
    for i, t in enumerate(_need(data.get("tests"), "tests", seq, path, "a list")):
        at = f"tests[{i}]"
        _need(t, at, obj, path, "an object")
        _need(t.get("nodeid"), f"{at}.nodeid", text_t, path, "a string")
        for j, m in enumerate(_need(t.get("measurements", []), f"{at}.measurements", seq, path, "a list")):
            mat = f"{at}.measurements[{j}]"
            _need(m, mat, obj, path, "an object")
            meas = _need(m.get("measurement"), f"{mat}.measurement", obj, path, "an object")
            _need(meas.get("name"), f"{mat}.measurement.name", text_t, path, "a string")
            for k in ("median_s", "ci_low_s", "ci_high_s"):
                _need(meas.get(k), f"{mat}.measurement.{k}", num, path, "a number")
            _need(m.get("verdict"), f"{mat}.verdict", text_t, path, "a string")
            if m.get("regression") is not None:
                reg = _need(m["regression"], f"{mat}.regression", obj, path, "an object or null")
                _need(reg.get("slowdown"), f"{mat}.regression.slowdown", num, path, "a number")
        for j, c in enumerate(_need(t.get("comparisons", []), f"{at}.comparisons", seq, path, "a list")):
            cat = f"{at}.comparisons[{j}]"
            _need(c, cat, obj, path, "an object")
            for k in ("fast", "baseline", "verdict"):
                _need(c.get(k), f"{cat}.{k}", text_t, path, "a string")
            for k in ("speedup", "ci_low", "ci_high"):
                _need(c.get(k), f"{cat}.{k}", num, path, "a number")
            if c.get("at_least") is not None:
                _need(c["at_least"], f"{cat}.at_least", num, path, "a number or null")
        for j, fig in enumerate(_need(t.get("figures", []), f"{at}.figures", seq, path, "a list")):
            fat = f"{at}.figures[{j}]"
            _need(fig, fat, obj, path, "an object")
            _need(fig.get("key"), f"{fat}.key", text_t, path, "a string")
            _need(fig.get("value"), f"{fat}.value", num, path, "a number")
    for j, s in enumerate(_need(data.get("skipped", []), "skipped", seq, path, "a list")):
        _need(s, f"skipped[{j}]", obj, path, "an object")
        _need(s.get("reason"), f"skipped[{j}].reason", text_t, path, "a string")
        _need(s.get("count"), f"skipped[{j}].count", (int,), path, "an integer")
    for j, ch in enumerate(_need(data.get("baseline_changes", []), "baseline_changes", seq, path, "a list")):
        _need(ch, f"baseline_changes[{j}]", obj, path, "an object")
        _need(ch.get("key"), f"baseline_changes[{j}].key", text_t, path, "a string")
        _need(ch.get("new_median_s"), f"baseline_changes[{j}].new_median_s", num, path, "a number")
        if ch.get("old_median_s") is not None:
            _need(ch["old_median_s"], f"baseline_changes[{j}].old_median_s", num, path, "a number or null")
    report: dict[str, Any] = data
    return report


def report_records(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The report's tests back as the per-result records the terminal summary is built from."""
    records: list[dict[str, Any]] = []
    for t in data["tests"]:
        for c in t.get("comparisons", []):
            records.append({"kind": "comparison", "test": t["nodeid"], "comparison": c})
        for m in t.get("measurements", []):
            records.append({"kind": "measurement", "test": t["nodeid"], **m})
    return records


def _fmt_value(value: float, unit: str) -> str:
    return f"{value:.4g}" + (f" {unit}" if unit else "")


def format_report(data: Mapping[str, Any], markdown: bool = True) -> str:
    """The terminal summary's table, then figures, skips, failures and baseline changes."""
    rows = summary_rows(report_records(data))
    figures = [
        [t["nodeid"].split("::", 1)[-1], f["key"], _fmt_value(f["value"], f.get("unit") or "")]
        for t in data["tests"]
        for f in t.get("figures", [])
    ]
    failed = [t["nodeid"] for t in data["tests"] if t.get("outcome") in ("failed", "error")]
    devices = [
        f"{d.get('name', '?')} (`{key}`), driver {d.get('driver_version') or '?'}, CUDA {d.get('cuda_runtime_version') or '?'}"
        for key, d in sorted(data.get("devices", {}).items())
        if isinstance(d, dict)
    ]
    verdicts = data.get("summary") or {}
    skipped = data.get("skipped", [])
    changes = data.get("baseline_changes", [])

    def table(body: list[list[str]], right: Iterable[int] = ()) -> list[str]:
        if not markdown:
            return [_table(body)]
        align = ["---:" if i in set(right) else "---" for i in range(len(body[0]))]
        lines = ["| " + " | ".join(_md(c) for c in body[0]) + " |", "| " + " | ".join(align) + " |"]
        lines += ["| " + " | ".join(_md(c) for c in r) + " |" for r in body[1:]]
        return lines

    def heading(text: str) -> str:
        return f"### {text}" if markdown else f"{text}:"

    out = ["## gpu-perf report" if markdown else "gpu-perf report"]
    out.append(f"Created {data.get('created', '?')}" + (f" on {'; '.join(devices)}" if devices else " (no GPU measured)") + ".")
    if verdicts:
        out.append("Verdicts: " + ", ".join(f"{n} {k}" for k, n in sorted(verdicts.items())) + ".")
    if failed:
        out += ["", heading(f"Failed tests ({len(failed)})")]
        out += [f"- `{n}`" if markdown else f"  {n}" for n in failed]
    out.append("")
    out += table(rows, right=(2,)) if len(rows) > 1 else ["No GPU measurements in this report."]
    if figures:
        out += ["", heading("Figures")] + table([["test", "figure", "value"]] + figures, right=(2,))
    if skipped:
        out += ["", heading("Skipped, and why")]
        out += table([["count", "reason"]] + [[str(s["count"]), s["reason"]] for s in skipped], right=(0,))
    if changes:
        body = [["key", "old median", "new median", "delta"]]
        for ch in changes:
            old, new = ch.get("old_median_s"), ch["new_median_s"]
            body.append([ch["key"], fmt_time(old), fmt_time(new), f"{100 * (new / old - 1):+.1f}%" if old else "new"])
        out += ["", heading(f"Baselines updated ({len(changes)} entries)")] + table(body, right=(1, 2, 3))
    return "\n".join(out) + "\n"


# -- command line -------------------------------------------------------------------------
def _cmd_list(args: argparse.Namespace) -> int:
    text, ok = format_list(Path(args.dir))
    sys.stdout.write(text)
    return 0 if ok else 1


def _cmd_diff(args: argparse.Namespace) -> int:
    if args.git is not None:
        if len(args.paths) > 1:
            raise _Usage("diff --git REV takes at most one folder (default: baselines)")
        root = Path(args.paths[0] if args.paths else DEFAULT_DIR)
        old = load_git(args.git, root)
        new = load_folder(root) if root.exists() else {}
    else:
        if len(args.paths) != 2:
            raise _Usage("diff takes two baseline folders (OLD NEW), or --git REV [DIR]")
        old, new = (_load_side(Path(p)) for p in args.paths)
    sys.stdout.write(format_diff(diff_baselines(old, new), device_changes(old, new), show_all=args.all))
    return 0


def _cmd_prune(args: argparse.Namespace) -> int:
    root = Path(args.dir)
    files = load_folder(root)
    if args.node_ids is not None:
        if args.keep_tests_from:
            raise _Usage("prune takes --node-ids or --keep-tests-from, not both")
        ids, whole = read_node_ids(args.node_ids), True
    else:
        ids, whole = collect_node_ids(args.keep_tests_from or []), not args.keep_tests_from
    stale = stale_entries(files, ids, whole_suite=whole)
    store = BaselineStore(root)
    verb = "would remove" if args.dry_run else "removed"
    count = 0
    for name, keys in stale.items():
        removed = keys if args.dry_run else store.remove_entries(root / name, keys)
        for key in removed:
            print(f"{verb} {name} :: {key}")
        if removed and len(removed) == len(files[name].entries):
            print(f"{verb} {name} (no entries left)")
        count += len(removed)
    done = "would be removed" if args.dry_run else "removed"
    print(f"{count} stale entr{'y' if count == 1 else 'ies'} {done} from {len(stale)} file(s) under {root}"
          + (" (dry run: nothing changed)" if args.dry_run else ""))
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    sys.stdout.write(format_report(load_report(Path(args.file)), markdown=not args.text))
    return 0


class _Usage(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Inspect and maintain pytest-gpuperf baselines and reports.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("list", help="devices, files, entry counts and recording dates of stored baselines")
    p.add_argument("dir", nargs="?", default=DEFAULT_DIR, metavar="DIR", help=f"baseline folder (default: {DEFAULT_DIR})")
    p.set_defaults(run=_cmd_list)

    p = sub.add_parser(
        "diff",
        help="compare two baseline folders, or the working tree with a git revision; prints a markdown table",
        description="Compare baselines: OLD NEW (two folders or two files), or --git REV [DIR] (DIR at REV "
        "against DIR in the working tree). 'slower' or 'faster' when the interval of new/old median (at the "
        "stored confidence, as the regression gate computes it) excludes 1, otherwise 'within noise'.",
    )
    p.add_argument("paths", nargs="*", metavar="PATH")
    p.add_argument("--git", metavar="REV", help="compare DIR (default: baselines) at this git revision with the working tree")
    p.add_argument("--all", action="store_true", help="also list identical entries")
    p.set_defaults(run=_cmd_diff)

    p = sub.add_parser(
        "prune",
        help="remove entries whose tests no longer exist",
        description="Remove baseline entries whose test node id is no longer collected. Node ids come from "
        "'pytest --collect-only -q' run in the current folder (the project root), or from --node-ids. With "
        "--keep-tests-from PATHS, only the files of modules collected from PATHS are pruned.",
    )
    p.add_argument("dir", nargs="?", default=DEFAULT_DIR, metavar="DIR", help=f"baseline folder (default: {DEFAULT_DIR})")
    p.add_argument("--dry-run", action="store_true", help="print what would be removed and change nothing")
    p.add_argument("--keep-tests-from", nargs="+", metavar="PATH", default=None, help="test paths to collect (default: the whole suite)")
    p.add_argument("--node-ids", metavar="FILE", help="a file of node ids, one a line ('-': standard input), instead of collecting")
    p.set_defaults(run=_cmd_prune)

    p = sub.add_parser("report", help="render a saved --gpu-perf-json report (markdown by default)")
    p.add_argument("file", metavar="FILE")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--markdown", action="store_true", help="GitHub-flavoured markdown (the default)")
    fmt.add_argument("--text", action="store_true", help="aligned plain text, like the terminal summary")
    p.set_defaults(run=_cmd_report)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except _Usage as exc:
        parser.error(str(exc))
    except GpuPerfError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    return 0  # unreachable: parser.error exits


if __name__ == "__main__":
    raise SystemExit(main())
