"""The public API: the modules a user imports from, each naming in ``__all__`` exactly what it
exports; every other module private (a ``_`` at the start of a folder's or module's name on its
path); and the kernel families and the examples importing public names only."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "pytest_gpuperf"

# The modules a user imports names from.
PUBLIC = (
    "pytest_gpuperf",
    "pytest_gpuperf.bench",
    "pytest_gpuperf.errors",
    "pytest_gpuperf.numerics",
    "pytest_gpuperf.schemas",
    "pytest_gpuperf.strategies",
    "pytest_gpuperf.testing",
    "pytest_gpuperf.testing.noise",
)
# Modules loaded by name from outside: pytest's entry point, python -m pytest_gpuperf.
ENTRY_POINTS = ("pytest_gpuperf.plugin", "pytest_gpuperf.__main__")
# Code that must use the public API only.
CLIENTS = sorted([*(ROOT / "kernels").rglob("*.py"), *(ROOT / "tests" / "examples").rglob("*.py")])


def dotted(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_private(module: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in module.split("."))


def test_every_module_is_public_an_entry_point_or_private() -> None:
    modules = {dotted(p) for p in PACKAGE.rglob("*.py")}
    assert set(PUBLIC) | set(ENTRY_POINTS) <= modules
    named = sorted(m for m in modules if m not in PUBLIC and m not in ENTRY_POINTS and not is_private(m))
    assert named == [], "make these private (a _ folder or module) or add them to PUBLIC with an __all__"


def exported(module: str) -> set[str]:
    """The public names ``module`` binds at its top level: what it defines, and what it imports
    from pytest_gpuperf (a face's re-exports); for the package root also the names it loads on
    first use (``_LAZY``). Imports of other packages are its own business, not exports."""
    mod = importlib.import_module(module)
    tree = ast.parse(Path(mod.__file__ or "").read_text(encoding="utf-8"))
    names: set[str] = set(getattr(mod, "_LAZY", {}))
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pytest_gpuperf"):
            names |= {a.asname or a.name for a in node.names}
    return {n for n in names if not n.startswith("_")}


@pytest.mark.parametrize("module", PUBLIC)
def test_all_is_what_the_module_exports(module: str) -> None:
    mod = importlib.import_module(module)
    assert len(mod.__all__) == len(set(mod.__all__)), "a name is listed twice"
    assert set(mod.__all__) == exported(module)
    for name in mod.__all__:
        assert getattr(mod, name) is not None
        assert name in dir(mod)


def test_the_root_names_the_api() -> None:
    """The package root's names, as the README and the docs use them: changing them is a change of
    the public API, made here on purpose."""
    import pytest_gpuperf

    assert sorted(pytest_gpuperf.__all__) == sorted([
        "Variant", "Measurement", "Comparison", "Verdict", "TimingStream",
        "GpuPerf", "GpuStatic", "GpuCounters", "CounterResult",
        "DeviceInfo", "NoDevice", "TimingBackend", "Prepared",
        "poison", "assert_close", "to_numpy",
        "load_module", "CudaModule", "static_params", "build_shared_library", "BuildResult",
        "build_host_library", "find_host_compiler", "cache_folder",
        "MarginsFile",
        "GpuPerfError", "GpuPerfUsageError", "BaselineFileError", "GateFailure",
    ])
    assert all(is_private(target) or target in PUBLIC for target in pytest_gpuperf._LAZY.values())


def private_uses(path: Path, text: str | None = None) -> list[str]:
    """Every import in ``path`` of a private module, or of a name a public module does not list."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8") if text is None else text)):
        if isinstance(node, ast.Import):
            found += [f"line {node.lineno}: import {a.name}" for a in node.names if _private_module(a.name)]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "pytest_gpuperf":
            module = node.module or ""
            if _private_module(module):
                found.append(f"line {node.lineno}: from {module} import ...")
                continue
            listed = set(importlib.import_module(module).__all__)
            found += [
                f"line {node.lineno}: {a.name} is not in {module}.__all__"
                for a in node.names
                if a.name not in listed and f"{module}.{a.name}" not in PUBLIC
            ]
    return found


def _private_module(name: str) -> bool:
    return name.split(".")[0] == "pytest_gpuperf" and name not in PUBLIC


@pytest.mark.parametrize("path", CLIENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_kernels_and_examples_import_public_names_only(path: Path) -> None:
    assert private_uses(path) == []


def test_the_scan_sees_private_imports() -> None:
    text = (
        "import pytest_gpuperf._timing.bench\n"
        "from pytest_gpuperf import Variant, _LAZY\n"
        "def f():\n    from pytest_gpuperf._store.margins import MarginsFile\n"
        "from pytest_gpuperf import bench\nfrom pytest_gpuperf.bench import time_callable\n"
    )
    assert private_uses(CLIENTS[0], text) == [
        "line 1: import pytest_gpuperf._timing.bench",
        "line 2: _LAZY is not in pytest_gpuperf.__all__",
        "line 4: from pytest_gpuperf._store.margins import ...",
    ]


def test_the_entry_points_resolve() -> None:
    """pytest's plugin module and the gpuperf command, as pyproject.toml names them."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["entry-points"]["pytest11"] == {"gpuperf": "pytest_gpuperf.plugin"}
    module, _, attr = project["scripts"]["gpuperf"].partition(":")
    assert callable(getattr(importlib.import_module(module), attr))
