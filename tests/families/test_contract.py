"""Every kernel family against the contract in kernels/contract.py (docs/kernel-family-contract.md),
no GPU needed: the layout, the sources the compile-time tier builds, the perf grid the perf tests
run, the ungated comparisons and the documented target shortfalls."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from types import ModuleType

import pytest

from kernels.contract import FAMILY_FILES, TEST_FILES, KernelFamily
from pytest_gpuperf import static_params
from pytest_gpuperf._store.margins import MarginsFile, gpu_label

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = tuple(sorted(p.parent.name for p in ROOT.joinpath("kernels").glob("*/family.py")))
# Names the families used before the contract named them: TARGET_SHORTFALLS and UNGATED.
OLD_NAMES = ("CUBLAS_SHORTFALLS", "UNGATED_REASONS")

by_family = pytest.mark.parametrize("name", FAMILIES)


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"kernels.{name}.family")


def _family(name: str) -> KernelFamily:
    family = _module(name).FAMILY
    assert isinstance(family, KernelFamily)
    return family


def test_every_family_is_covered() -> None:
    assert sorted(p.parent.name for p in (ROOT / "kernels").glob("*/family.py")) == list(FAMILIES)


@by_family
def test_family_is_built_from_its_module(name: str) -> None:
    module, family = _module(name), _family(name)
    assert family.name == name
    assert family.directory.resolve() == ROOT / "kernels" / name
    assert family.sources is module.SOURCES
    assert family.cuda_modules is module.CUDA_MODULES
    assert family.margins is module.MARGINS
    assert family.target_shortfalls is getattr(module, "TARGET_SHORTFALLS", family.target_shortfalls)
    assert getattr(module, "UNGATED", family.ungated) == family.ungated
    assert [old for old in OLD_NAMES if hasattr(module, old)] == []


@by_family
def test_layout(name: str) -> None:
    family = _family(name)
    assert [f for f in FAMILY_FILES if not (family.directory / f).is_file()] == []
    assert [f for f in TEST_FILES if not (family.tests_dir / f).is_file()] == []
    assert family.readme.read_text().strip()


@by_family
def test_sources_are_the_cuda_files_the_tier_builds(name: str) -> None:
    family = _family(name)
    assert family.sources and family.cuda_modules
    assert sorted(family.sources) == sorted(family.directory.glob("*.cu"))
    assert {m.source for m in family.cuda_modules} == set(family.sources)


@by_family
def test_static_tier_covers_the_cuda_modules(name: str, family_node_ids: set[str]) -> None:
    """tests/<family>/test_static.py::test_static runs each module on each of its archs, no more."""
    test = f"tests/{name}/test_static.py::test_static"
    collected = {n for n in family_node_ids if n.startswith(test + "[")}
    assert collected == {f"{test}[{p.id}]" for p in static_params(_family(name).cuda_modules)}


@by_family
def test_perf_tests_run_the_perf_grid(name: str, family_node_ids: set[str]) -> None:
    """Each perf case of the grid is a parameter (its id, or a dash-separated part of one) of a
    test in tests/<family>/test_perf.py."""
    family = _family(name)
    params = [n.partition("::")[2] for n in family_node_ids if n.startswith(f"tests/{name}/test_perf.py::")]
    assert family.perf_grid
    missing = [c for c in family.perf_grid if not any(re.search(rf"[\[-]{re.escape(c)}[\]-]", p) for p in params)]
    assert missing == []


@by_family
def test_ungated_comparisons_have_reasons(name: str) -> None:
    family = _family(name)
    for arch, reasons in family.ungated.items():
        for key, reason in reasons.items():
            assert family.margins.entries[arch][key].value is None, (arch, key)
            assert reason.strip(), f"{arch} {key}: ungated without a reason"


@by_family
def test_margins_file_loads(name: str) -> None:
    family = _family(name)
    assert family.margins_path == family.directory / "margins.json"
    assert MarginsFile.read(family.margins_path).family == name


@by_family
def test_target_shortfalls_are_documented(name: str) -> None:
    """Each entry says what was measured, names perf cases of the grid, concerns a target the perf
    tests consult, and is mirrored in the README, which names TARGET_SHORTFALLS and each GPU model
    listed (a family meeting every target does not name it)."""
    family = _family(name)
    readme = family.readme.read_text()
    perf_tests = (family.tests_dir / "test_perf.py").read_text()
    assert ("TARGET_SHORTFALLS" in readme) == any(
        models for targets in family.target_shortfalls.values() for models in targets.values()
    )
    for arch, targets in family.target_shortfalls.items():
        for target, models in targets.items():
            assert f'"{target}"' in perf_tests, f"{arch} {target}: no perf test consults this target"
            for model, (cases, what) in models.items():
                where = f"{arch} {target} {model}"
                assert what.strip(), where
                assert cases is None or set(cases) <= set(family.perf_grid.values()), where
                if model != "*":
                    assert re.search(rf"\b{gpu_label(model)}\b", readme, re.IGNORECASE), where
