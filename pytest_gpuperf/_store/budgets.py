"""Static budgets: the most each kernel may use (registers, spills, shared memory, stack and,
where a module gates its code size, SASS instructions), stored per module and architecture in
``<baselines>/static/<module or group>.json`` beside the perf baselines."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_gpuperf._store.baselines import locked_for_writing
from pytest_gpuperf._store.files import atomic_write_json, read_json_object
from pytest_gpuperf._store.schema_versions import BUDGET_SCHEMA
from pytest_gpuperf.errors import BaselineFileError

__all__ = [
    "BUDGETS_FOLDER",
    "BUDGET_FIELDS",
    "BUDGET_SCHEMA",
    "CODE_FIELD",
    "READABLE_SCHEMAS",
    "ArchBudgets",
    "Budget",
    "BudgetChange",
    "BudgetFile",
    "BudgetStore",
]

READABLE_SCHEMAS = ("pytest-gpuperf/static-budgets/1", BUDGET_SCHEMA)  # 1: no instruction counts
BUDGET_FIELDS = ("registers", "spill_stores", "spill_loads", "shared_bytes", "stack_bytes")
CODE_FIELD = "sass_instructions"  # budgeted only for modules that set max_code_growth
BUDGETS_FOLDER = "static"  # under the baselines folder
LOCK_TIMEOUT_S = 120.0


@dataclasses.dataclass(frozen=True)
class Budget:
    """The most a kernel may use; spill budgets are 0 unless spills were accepted on purpose.
    ``sass_instructions`` is the instruction count recorded for a module that gates its code size
    (the limit is that count grown by the module's ``max_code_growth``); None elsewhere."""

    registers: int
    spill_stores: int
    spill_loads: int
    shared_bytes: int
    stack_bytes: int
    sass_instructions: int | None = None

    def to_json(self) -> dict[str, int]:
        data = dataclasses.asdict(self)
        if self.sass_instructions is None:
            del data[CODE_FIELD]
        return data

    def code_limit(self, growth: float) -> int | None:
        """The most instructions allowed: the recorded count grown by ``growth`` (rounded down)."""
        return None if self.sass_instructions is None else int(self.sass_instructions * (1 + growth))


@dataclasses.dataclass
class ArchBudgets:
    toolchain: str
    recorded_at: str
    kernels: dict[str, Budget]

    def to_json(self) -> dict[str, Any]:
        return {
            "toolchain": self.toolchain,
            "recorded_at": self.recorded_at,
            "kernels": {k: self.kernels[k].to_json() for k in sorted(self.kernels)},
        }


@dataclasses.dataclass
class BudgetFile:
    """``{"schema": ..., "modules": {module: {arch: {"toolchain", "recorded_at", "kernels": {...}}}}}``"""

    path: Path
    modules: dict[str, dict[str, ArchBudgets]]

    @classmethod
    def read(cls, path: Path) -> BudgetFile | None:
        """The validated file, or None when it does not exist (a bad file raises BaselineFileError)."""
        data = read_json_object(path, "static budget file")
        if data is None:
            return None
        if data.get("schema") not in READABLE_SCHEMAS:
            raise _bad(path, "schema", f"must be one of {list(READABLE_SCHEMAS)}, got {data.get('schema')!r}")
        modules = data.get("modules")
        if not isinstance(modules, dict):
            raise _bad(path, "modules", "must be an object: module -> arch -> budgets")
        parsed: dict[str, dict[str, ArchBudgets]] = {}
        for module, archs in modules.items():
            if not isinstance(archs, dict):
                raise _bad(path, f"modules.{module}", "must be an object: arch -> budgets")
            parsed[module] = {}
            for arch, section in archs.items():
                where = f"modules.{module}.{arch}"
                if not re.fullmatch(r"sm_\d+[af]?", arch):
                    raise _bad(path, where, "must be keyed by an architecture such as 'sm_90' or 'sm_90a'")
                if not isinstance(section, dict) or not isinstance(section.get("kernels"), dict):
                    raise _bad(path, f"{where}.kernels", "must be an object: kernel -> budget")
                for name in ("toolchain", "recorded_at"):
                    if not isinstance(section.get(name), str):
                        raise _bad(path, f"{where}.{name}", f"must be a string, got {section.get(name)!r}")
                kernels = {k: _parse_budget(path, f"{where}.kernels.{k}", v) for k, v in section["kernels"].items()}
                parsed[module][arch] = ArchBudgets(section["toolchain"], section["recorded_at"], kernels)
        return cls(path, parsed)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": BUDGET_SCHEMA,
            "modules": {
                m: {a: self.modules[m][a].to_json() for a in sorted(self.modules[m])} for m in sorted(self.modules)
            },
        }


def _bad(path: Path, field: str, problem: str) -> BaselineFileError:
    return BaselineFileError(
        f"static budget file {path}: field {field!r} {problem}. Fix the file or restore it from version "
        "control; to start over delete it and run with --gpu-perf-update-baselines."
    )


def _parse_budget(path: Path, where: str, raw: Any) -> Budget:
    if not isinstance(raw, dict):
        raise _bad(path, where, f"must be an object, got {type(raw).__name__}")
    unknown = sorted(set(raw) - {*BUDGET_FIELDS, CODE_FIELD})
    if unknown:
        raise _bad(
            path, where, f"has unknown keys {unknown}; expected {list(BUDGET_FIELDS)} and optionally {CODE_FIELD!r}"
        )
    values = {}
    for name in (*BUDGET_FIELDS, CODE_FIELD):
        value = raw.get(name)
        if name == CODE_FIELD and value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise _bad(path, f"{where}.{name}", f"must be a non-negative integer, got {value!r}")
        values[name] = value
    return Budget(**values)


@dataclasses.dataclass(frozen=True)
class BudgetChange:
    file: str
    module: str
    arch: str
    kernel: str
    old: Budget | None  # None: a new kernel
    new: Budget | None  # None: a kernel no longer built, removed

    def describe(self) -> str:
        where = f"{self.module} {self.arch} {self.kernel}"
        if self.old is None:
            return f"+ {where}: " + _budget_text(self.new)
        if self.new is None:
            return f"- {where}: removed (no longer built)"
        diffs = [
            f"{f} {getattr(self.old, f)} -> {getattr(self.new, f)}"
            for f in (*BUDGET_FIELDS, CODE_FIELD)
            if getattr(self.old, f) != getattr(self.new, f)
        ]
        return f"~ {where}: " + ", ".join(diffs)

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "module": self.module,
            "arch": self.arch,
            "kernel": self.kernel,
            "old": self.old.to_json() if self.old else None,
            "new": self.new.to_json() if self.new else None,
        }


def _budget_text(b: Budget | None) -> str:
    if b is None:
        return "-"
    text = (
        f"{b.registers} registers, {b.spill_stores}/{b.spill_loads} B spill stores/loads, "
        f"{b.shared_bytes} B shared, {b.stack_bytes} B stack"
    )
    return text if b.sass_instructions is None else f"{text}, {b.sass_instructions} SASS instructions"


class BudgetStore:
    """``<baselines>/static/<file>.json``: read with validation, updated under a lock, atomically."""

    def __init__(self, baselines_dir: Path):
        self.baselines_dir = Path(baselines_dir)
        self.root = self.baselines_dir / BUDGETS_FOLDER

    def path_for(self, file: str) -> Path:
        return self.root / f"{file}.json"

    def lookup(self, file: str, module: str, arch: str) -> ArchBudgets | None:
        found = BudgetFile.read(self.path_for(file))
        return found.modules.get(module, {}).get(arch) if found else None

    def update(
        self, file: str, module: str, arch: str, kernels: Mapping[str, Budget], toolchain: str
    ) -> list[BudgetChange]:
        """Replace the budgets of ``module`` on ``arch`` (other modules and archs are kept)."""
        path = self.path_for(file)
        with locked_for_writing(path, self.baselines_dir, kind="static budget file", timeout_s=LOCK_TIMEOUT_S):
            current = BudgetFile.read(path) or BudgetFile(path, {})
            old = current.modules.get(module, {}).get(arch)
            old_kernels = old.kernels if old else {}
            changes = [
                BudgetChange(str(path), module, arch, k, old_kernels.get(k), kernels.get(k))
                for k in sorted(set(old_kernels) | set(kernels))
                if old_kernels.get(k) != kernels.get(k)
            ]
            stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
            if changes or old is None or old.toolchain != toolchain:
                current.modules.setdefault(module, {})[arch] = ArchBudgets(toolchain, stamp, dict(kernels))
                atomic_write_json(path, current.to_json())
        return changes
