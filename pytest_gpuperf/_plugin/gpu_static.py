"""The ``gpu_static`` fixture's object: the compile-time tier (``_compile.static``) bound to one
test, recording each build on the test's report, and ``static_params`` to parametrize over modules."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from pytest_gpuperf._compile.cubin import StaticResult, compile_module
from pytest_gpuperf._compile.cuda_module import CudaModule, ToolchainMissing, arch_selected
from pytest_gpuperf._compile.static import judge
from pytest_gpuperf._plugin.session import RECORD_KEY, GpuPerfSession
from pytest_gpuperf._store.budgets import BudgetStore
from pytest_gpuperf.errors import GateFailure


class GpuStatic:
    """Bound to one test: ``check(module, arch)`` builds, compares with the budgets, records the
    result on the test's report and raises ``GateFailure`` with a readable table on a failure."""

    def __init__(self, session: GpuPerfSession, item: pytest.Item, cache_dir: Path | None = None):
        self._session = session
        self._item = item
        self.settings = session.settings.for_test(item)
        self.store = BudgetStore(self.settings.baselines_dir)
        self.cache_dir = cache_dir

    def check(self, module: CudaModule, arch: str) -> StaticResult:
        selection = self.settings.static_archs
        if not arch_selected(arch, selection):
            pytest.skip(f"static tier: {arch} not selected by --gpu-perf-static-archs ({','.join(selection)})")
        try:
            result = compile_module(module, arch, cache_dir=self.cache_dir)
        except ToolchainMissing as exc:
            pytest.skip(f"gpu-perf: static tier needs the CUDA compiler tools: {exc}")
        path = self.store.path_for(module.budget_file)
        budgets = self.store.lookup(module.budget_file, module.name, arch)
        update = self.settings.update_baselines
        verdict = judge(result, module, budgets, path, update=update)
        record = verdict.record
        record["test"] = self._item.nodeid
        if update:
            changes = self.store.update(
                module.budget_file,
                module.name,
                arch,
                {n: k.budget(with_code=module.gates_code_size) for n, k in result.kernels.items()},
                result.toolchain,
            )
            record["changes"] = [c.to_json() | {"text": c.describe()} for c in changes]
        self._item.user_properties.append((RECORD_KEY, record))
        if verdict.failures:
            raise GateFailure("\n\n".join(verdict.failures))
        if verdict.missing_note:
            policy = self.settings.missing_baseline
            if policy == "fail":
                raise GateFailure(verdict.missing_note)
            if policy == "skip":
                pytest.skip(verdict.missing_note)
        return result


def static_params(modules: Iterable[CudaModule]) -> list[Any]:
    """``pytest.param(module, arch)`` for every module and each of its archs, with readable ids:
    ``@pytest.mark.parametrize(("module", "arch"), static_params(CUDA_MODULES))``."""
    return [pytest.param(m, arch, id=f"{m.name}-{arch}") for m in modules for arch in m.archs]
