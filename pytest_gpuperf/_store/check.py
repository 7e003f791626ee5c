"""Every file under a folder validated as the kind its schema names (``gpuperf check``).

Timing baselines (``pytest-gpuperf/baselines/1``) go through ``BaselineFile.validate``, the
compile-time budgets (``static-budgets/1`` and ``/2``) through ``BudgetFile.read`` and saved
reports through ``reports.validate_report``: the readers the plugin and the other
commands use. A file the plugin would never read where it lies (a baseline outside
``<device key>/``, a budget outside ``static/``), a device key that differs from its folder,
a link, or a file that is no pytest-gpuperf JSON at all is a problem too. One line per
problem; the command exits 1 when there is any. Lock files and the temporary files a killed
writer leaves (``.<name>.<hex>.tmp``, which nothing reads) are no problem: a leftover gets a note
saying it can be deleted.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from pytest_gpuperf._store.baselines import BaselineFile
from pytest_gpuperf._store.budgets import BUDGETS_FOLDER, READABLE_SCHEMAS, BudgetFile
from pytest_gpuperf._store.files import is_leftover
from pytest_gpuperf._store.jsonio import read_json, shown
from pytest_gpuperf._store.layout import STORED_KINDS, kind_of, level_problem, schema_of
from pytest_gpuperf._store.reports import validate_report
from pytest_gpuperf.errors import GpuPerfError

IGNORED_SUFFIXES = (".lock",)  # filelock's lock files beside the baselines


@dataclass
class CheckResult:
    files: int = 0
    problems: list[str] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # harmless findings: temporary files of killed writers


def check_folder(root: Path) -> CheckResult:
    """Validate every file under ``root`` (any depth); see the module doc."""
    if not root.is_dir():
        raise GpuPerfError(f"{root} is not a folder (pass the baselines folder, e.g. baselines/)")
    result = CheckResult()
    level = level_problem(root)
    if level:
        result.problems.append(level)
    for folder, dirs, names in os.walk(root, followlinks=False):
        dirs.sort()
        here = Path(folder)
        for name in [d for d in dirs if (here / d).is_symlink()] + sorted(names):
            path = here / name
            if path.name.endswith(IGNORED_SUFFIXES) and not path.is_symlink():
                continue
            if is_leftover(path) and path.is_file() and not path.is_symlink():
                result.notes.append(
                    f"{path} is a temporary file left by an interrupted write; nothing reads it, delete it "
                    "once no pytest or gpuperf run is writing here"
                )
                continue
            result.files += 1
            problem = check_file(root, path, result)
            if problem:
                result.problems.append(problem)
    if result.files == 0:
        result.problems.append(f"{root} holds no files: no baselines, budgets or reports to check")
    return result


def check_file(root: Path, path: Path, result: CheckResult) -> str | None:
    """The problem with one file, or None."""
    if path.is_symlink():
        return f"{path} is a symbolic link; keep only regular files under the baselines folder"
    if not (path.name.endswith(".json") or path.name.endswith(".json.gz")):
        return (
            f"{path} is not a JSON file; only <device key>/<module>.json and {BUDGETS_FOLDER}/<file>.json belong here"
        )
    try:
        data = read_json(path, "file", GpuPerfError)
    except GpuPerfError as exc:
        return str(exc)
    except OSError as exc:
        return f"{path} cannot be read: {exc}"
    schema = schema_of(data)
    kind = kind_of(schema)
    if kind is None:
        return (
            f"{path} is not a pytest-gpuperf file (no pytest-gpuperf 'schema' field, got {shown(schema)}); "
            "remove it or move it out of the baselines folder"
        )
    result.kinds[kind] = result.kinds.get(kind, 0) + 1
    parts = path.relative_to(root).parts
    if kind in STORED_KINDS and not path.name.endswith(".json"):
        return f"{path} is a compressed {kind} file; the plugin reads only plain .json files here, so it is never used"
    try:
        if kind == "baselines":
            baseline = BaselineFile.validate(path, data)
            if len(parts) != 2 or parts[0] == BUDGETS_FOLDER:
                return (
                    f"{path} is a baseline file in the wrong place: the plugin reads only "
                    f"<baselines>/<device key>/<module>.json, so it is never used; move it into its device folder"
                )
            key = baseline.device.get("key")
            if key is not None and key != parts[0]:
                return (
                    f"baseline file {path}: field 'device.key' is {shown(key)} but the file lies in folder "
                    f"{parts[0]!r}; the plugin looks it up by key, so move it to {root / str(key) / path.name}"
                )
        elif kind == "static-budgets":
            if schema not in READABLE_SCHEMAS:
                return f"static budget file {path}: field 'schema' must be one of {list(READABLE_SCHEMAS)}, got {shown(schema)}"
            BudgetFile.read(path)
            if parts[:-1] != (BUDGETS_FOLDER,):
                return (
                    f"{path} is a static budget file in the wrong place: the plugin reads only "
                    f"<baselines>/{BUDGETS_FOLDER}/<file>.json, so it is never used"
                )
        elif kind == "report":
            validate_report(data, path)
        else:
            return f"{path}: schema {shown(schema)} is no kind this version of pytest-gpuperf writes"
    except GpuPerfError as exc:
        return str(exc) + _migrate_hint(path, data)
    return None


def _migrate_hint(path: Path, data: object) -> str:
    """'; run gpuperf migrate PATH' for a file of an older version that ``gpuperf migrate`` brings up to date."""
    from pytest_gpuperf._store.schema_versions import CURRENT, MigrationError, parse_schema, readable

    try:
        found = parse_schema(data)
    except MigrationError:
        return ""
    if found is None or found[1] >= CURRENT[found[0]] or found[1] not in readable(found[0]):
        return ""
    return f"; it is version {found[1]}, which gpuperf migrate {path} rewrites as version {CURRENT[found[0]]}"
