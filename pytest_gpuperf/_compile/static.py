"""The compile-time tier: build CUDA modules with nvcc, no GPU needed, and gate what ptxas reports.

For each :class:`CudaModule` and target architecture the tier

* compiles the source to a cubin with nvcc, instantiating templates exactly as NVRTC would: a
  generated wrapper ``#include``s the source and takes the address of every name expression
  (``static void* const ...[] = {(void*)&merge<__half, 128, true>, ...}``), so the same
  instantiations exist with the same options (``shared_library=True`` modules are built through
  :func:`~pytest_gpuperf._compile.nvcc.build_shared_library` instead, sharing its cache entry with
  the library the tests load, so a CUTLASS GEMM is never built twice);
* parses ``ptxas -v``: registers, spill stores and loads, static shared memory and stack frame
  per kernel, plus ptxas performance warnings (C75xx, e.g. C7510 "wgmma serialized");
* disassembles the binary with ``cuobjdump -sass`` to check the machine-code facts an
  optimisation depends on (``LDG.E.128`` in a vectorized kernel, ``HGMMA`` in a Hopper GEMM);
* compares the resources with budgets stored beside the perf baselines,
  ``<baselines>/static/<module or group>.json``, and re-records them under
  ``--gpu-perf-update-baselines``; a module that sets ``max_code_growth`` also has each kernel's
  SASS instruction count held within that fraction of its recorded count (code size costs time
  where a kernel's hot code outgrows the SM's instruction cache, as in a persistent megakernel).

Compiles are cached (:class:`~pytest_gpuperf._compile.cache.BuildCache`, ``<cache root>/static``)
under the toolchain's identity, the options, name expressions and architecture, the source, and
every file ``nvcc -M`` says the build read; disassemblies (``<cache root>/static-sass``) under
the binary's bytes and the disassemblers' identity. A warm run costs a few hashes and file
reads per module.

The tier's parts: :mod:`~pytest_gpuperf._compile.cuda_module` (what to build),
:mod:`~pytest_gpuperf._compile.cubin` (building and disassembling),
:mod:`~pytest_gpuperf._compile.kernel_report` (reading ptxas and cuobjdump),
:mod:`~pytest_gpuperf._store.budgets` (the stored budgets) and this module (judging a build
against its budgets and facts); the ``gpu_static`` fixture's object is ``_plugin.gpu_static``.

nvcc and NVRTC share the front end and ptxas, so registers and instructions match what the tests
load through CuPy up to the toolkit version; a difference in minor versions can move a register
count, which is why budgets record the nvcc that produced them.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_gpuperf._compile.cubin import KernelResources, StaticResult
from pytest_gpuperf._compile.cuda_module import CudaModule
from pytest_gpuperf._report.table import text_table
from pytest_gpuperf._store.budgets import (
    BUDGET_FIELDS,
    CODE_FIELD,
    ArchBudgets,
)

if TYPE_CHECKING:
    from pytest_gpuperf._report.records import StaticRecord

__all__ = ["FactCheck", "Judgement", "check_facts", "judge", "matches"]


# --------------------------------------------------------------------------------------------
# SASS facts


@dataclasses.dataclass(frozen=True)
class FactCheck:
    pattern: str
    regex: str
    kernels: tuple[str, ...]  # kernels the pattern matched
    missing_in: tuple[str, ...]  # of those, the ones whose SASS lacks the regex

    @property
    def ok(self) -> bool:
        return bool(self.kernels) and not self.missing_in

    def to_json(self) -> dict[str, Any]:
        return {
            "pattern": self.pattern,
            "regex": self.regex,
            "kernels": len(self.kernels),
            "missing_in": list(self.missing_in),
            "ok": self.ok,
        }


def matches(pattern: str, kernel: KernelResources) -> bool:
    """A fact's kernel pattern: a substring of the demangled name (or mangled), wildcards allowed."""
    glob = f"*{pattern}*"
    return fnmatch.fnmatchcase(kernel.name, glob) or fnmatch.fnmatchcase(kernel.mangled, glob)


def check_facts(result: StaticResult, facts: Mapping[str, Sequence[str]]) -> list[FactCheck]:
    checks = []
    for pattern, regexes in facts.items():
        chosen = [k for k in result.kernels.values() if matches(pattern, k)]
        for regex in regexes:
            compiled = re.compile(regex)
            missing = tuple(k.name for k in chosen if not compiled.search(result.sass.get(k.mangled, "")))
            checks.append(FactCheck(pattern, regex, tuple(k.name for k in chosen), missing))
    return checks


# --------------------------------------------------------------------------------------------
# Judging one result


@dataclasses.dataclass
class Judgement:
    record: StaticRecord  # its "test" is filled in by GpuStatic.check
    failures: list[str]
    missing_note: str | None


def judge(
    result: StaticResult,
    module: CudaModule,
    budgets: ArchBudgets | None,
    budget_path: Path,
    *,
    update: bool,
) -> Judgement:
    """Compare ``result`` with its budgets and facts; the record for the report and the failures."""
    failures: list[str] = []
    rows = []
    growth = module.max_code_growth
    for name, k in result.kernels.items():
        budget = budgets.kernels.get(name) if budgets else None
        code_limit = budget.code_limit(growth) if budget is not None and growth is not None else None
        over = []
        if budget is not None and not update:
            over = [f for f in BUDGET_FIELDS if getattr(k, f) > getattr(budget, f)]
            if code_limit is not None and k.sass_instructions is not None and k.sass_instructions > code_limit:
                over.append(CODE_FIELD)
        elif budget is None and not update and (k.spill_stores or k.spill_loads):
            over = [f for f in ("spill_stores", "spill_loads") if getattr(k, f)]
        rows.append(
            {
                "kernel": name,
                **{f: getattr(k, f) for f in BUDGET_FIELDS},
                CODE_FIELD: k.sass_instructions,
                "budget": budget.to_json() if budget else None,
                "code_limit": code_limit,
                "over": over,
            }
        )
    over_rows = [r for r in rows if r["over"]]
    if over_rows:
        failures.append(_format_over(result, over_rows, budgets, budget_path, growth))
    if result.ptxas_warnings:
        failures.append(
            f"ptxas performance warnings in {result.module} for {result.arch} (each costs real speed: C7510 "
            "serializes wgmma, e.g. CUTLASS built without -DNDEBUG):\n"
            + "\n".join("  " + w for w in result.ptxas_warnings)
        )
    facts = check_facts(result, module.facts_for(result.arch))
    bad_facts = [f for f in facts if not f.ok]
    if bad_facts:
        lines = []
        for f in bad_facts:
            if not f.kernels:
                lines.append(
                    f"  {f.pattern!r}: matches no kernel of the module (kernels: {', '.join(list(result.kernels)[:6])}...)"
                )
            else:
                shown = ", ".join(f.missing_in[:4]) + (
                    f" and {len(f.missing_in) - 4} more" if len(f.missing_in) > 4 else ""
                )
                lines.append(f"  {f.pattern!r}: /{f.regex}/ not in the SASS of {shown}")
        failures.append(
            f"SASS facts missing in {result.module} for {result.arch} (the optimisation they stand for is gone; "
            "inspect with cuobjdump -sass):\n" + "\n".join(lines)
        )
    stale = sorted(set(budgets.kernels) - set(result.kernels)) if budgets and not update else []
    if stale:
        failures.append(
            f"{budget_path} lists kernels of {result.module} ({result.arch}) that are no longer built: "
            f"{', '.join(stale[:5])}{' ...' if len(stale) > 5 else ''}; re-record with --gpu-perf-update-baselines"
        )
    missing = [r["kernel"] for r in rows if r["budget"] is None]
    uncounted = [r["kernel"] for r in rows if growth is not None and r["budget"] and CODE_FIELD not in r["budget"]]
    note = None
    if (missing or uncounted) and not update:
        what = []
        if missing:
            what.append(f"no stored budget for {len(missing)} kernel(s)")
        if uncounted:
            what.append(
                f"no stored SASS instruction count for {len(uncounted)} kernel(s), so their code size goes unchecked"
            )
        note = (
            f"{' and '.join(what)} of {result.module} on {result.arch} (looked in "
            f"{budget_path}); record them with: pytest --gpu-perf-update-baselines"
        )
    if failures:
        verdict = "fail"
    elif update:
        verdict = "recorded"
    elif missing or uncounted:
        verdict = "measured"  # no budget to judge against: recorded in the report only
    else:
        verdict = "pass"
    record: StaticRecord = {
        "kind": "static",
        "test": "",
        "module": result.module,
        "arch": result.arch,
        "toolchain": result.toolchain,
        "budget_file": str(budget_path),
        "budget_toolchain": budgets.toolchain if budgets else None,
        "kernels": rows,
        "ptxas_warnings": list(result.ptxas_warnings),
        "facts": [f.to_json() for f in facts],
        "stale_budgets": stale,
        "cached": result.cached,
        "seconds": result.seconds,
        "build_seconds": result.build_seconds,
        "verdict": verdict,
        "budget_note": note,
        "changes": [],
    }
    return Judgement(record, failures, note)


def _format_over(
    result: StaticResult, rows: Sequence[dict[str, Any]], budgets: ArchBudgets | None, path: Path, growth: float | None
) -> str:
    with_code = any(r["code_limit"] is not None for r in rows)
    table = [["kernel", *BUDGET_FIELDS, *([CODE_FIELD] if with_code else [])]]
    for r in rows:
        b = r["budget"]
        cells = [r["kernel"]]
        for f in BUDGET_FIELDS:
            now = r[f]
            if b is None:
                cells.append(f"{now}" + (" (no budget)" if f in r["over"] else ""))
            else:
                cells.append(f"{now}/{b[f]}" + (" OVER" if f in r["over"] else ""))
        if with_code:
            limit = r["code_limit"]
            cells.append(
                "-" if limit is None else f"{r[CODE_FIELD]}/{limit}" + (" OVER" if CODE_FIELD in r["over"] else "")
            )
        table.append(cells)
    text = text_table(table, indent="  ")
    head = f"static budget EXCEEDED: {result.module} for {result.arch} (used/budget; budgets in {path})"
    hints = []
    if budgets and budgets.toolchain != result.toolchain:
        hints.append(f"  the budgets were recorded with {budgets.toolchain}; this build used {result.toolchain}")
    if any(CODE_FIELD in r["over"] for r in rows):
        grown = [
            f"{r['kernel']} {r[CODE_FIELD] / r['budget'][CODE_FIELD] - 1:+.1%}" for r in rows if CODE_FIELD in r["over"]
        ]
        hints.append(
            f"  SASS instructions: the code grew by more than the module's max_code_growth ({growth:.1%}) over the "
            f"count recorded with the budget ({', '.join(grown)}); a hot loop that outgrows the SM's instruction "
            "cache runs slower. Time the change before accepting it"
        )
    hints.append(
        "  Spills and extra registers cost occupancy or local-memory traffic. If the change is intended, "
        "re-record with pytest --gpu-perf-update-baselines"
    )
    return head + "\n" + text + "\n" + "\n".join(hints)
