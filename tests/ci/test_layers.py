"""The package's layers (CONTRIBUTING.md: how the package is organised): a module imports only from its
own folder or module and from layers below its own, so no import runs upward and no two layers
import each other. (Within one folder, imports are not ordered here.)"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_gpuperf"

# Bottom to top; a top-level module or folder of pytest_gpuperf per name.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"errors", "_version", "_gates", "numerics"}),
    frozenset({"_store"}),
    frozenset({"_timing"}),
    frozenset({"testing"}),
    frozenset({"_report"}),
    frozenset({"_compile", "_counters", "_history"}),
    frozenset({"_diagnose", "_plan"}),
    frozenset({"_plugin"}),
    frozenset({"_cli", "strategies"}),
    frozenset({"plugin", "__init__", "__main__", "bench", "schemas"}),
)
RANK = {unit: rank for rank, units in enumerate(LAYERS) for unit in units}


def unit_of(dotted: str) -> str:
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports(path: Path, text: str | None = None) -> list[tuple[int, str]]:
    """(line, module) of every pytest_gpuperf import in ``path``, lazy, TYPE_CHECKING and
    relative ones included."""
    package = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8") if text is None else text)):
        if isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            if module.split(".")[0] != "pytest_gpuperf":
                continue
            if module == "pytest_gpuperf" or not node.module:
                found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
            else:
                found.append((node.lineno, module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "pytest_gpuperf"]
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_has_a_layer() -> None:
    units = {unit_of(".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts)) for p in MODULES}
    assert units - set(RANK) == set(), "add the new module or folder to LAYERS (and to CONTRIBUTING.md's table)"


def upward_imports(path: Path, text: str | None = None) -> list[str]:
    own = unit_of(".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts))
    return [
        f"line {line}: {module} (layer {RANK[unit_of(module)]}, this file's {RANK[own]})"
        for line, module in imports(path, text)
        if unit_of(module) != own and RANK[unit_of(module)] >= RANK[own]
    ]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_no_import_runs_upward(path: Path) -> None:
    assert upward_imports(path) == []


def test_relative_and_lazy_imports_count_too() -> None:
    files = PACKAGE / "_store" / "files.py"
    text = (
        "from . import jsonio\nfrom .locks import hold\n"
        "def f():\n    from .._report import summary\n"
        "if TYPE_CHECKING:\n    from pytest_gpuperf._plugin.session import GpuPerfSession\n"
    )
    assert [m for _, m in imports(files, text)] == [
        "pytest_gpuperf._store.jsonio",
        "pytest_gpuperf._store.locks",
        "pytest_gpuperf._report",
        "pytest_gpuperf._plugin.session",
    ]
    assert len(upward_imports(files, text)) == 2  # report and session stand above store
