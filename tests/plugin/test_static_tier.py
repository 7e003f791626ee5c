"""The compile-time tier on CPU: ptxas and SASS parsing, budgets, gating, the fixture end to end.

Most tests use a stand-in toolchain (nvcc, cuobjdump and nvdisasm scripts under a fake
$CUDA_HOME) that prints a chosen ptxas log and SASS; the last ones build a tiny kernel with the
real nvcc when one is installed (the `compile` extra), and skip otherwise.
"""
from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any, Callable

import pytest

from pytest_gpuperf._compile.nvcc import NvccNotFound, find_cuobjdump, find_nvcc, find_nvdisasm
from pytest_gpuperf._store.budgets import BUDGET_SCHEMA, Budget, BudgetFile, BudgetStore
from pytest_gpuperf._compile.cuda_module import CudaModule
from pytest_gpuperf._compile.cubin import KernelResources, compile_module
from pytest_gpuperf._compile.kernel_report import count_sass_instructions, kernel_key, parse_ptxas_resources, split_sass
from pytest_gpuperf._compile.static import judge
from pytest_gpuperf.errors import BaselineFileError
from tests.plugin.fake_tools import DEPENDENCY_PASS

# Two kernels as ptxas -v prints them (nvcc 13.0 layout); `scale` calls a non-inlined function
# that spills.
PTXAS_LOG = textwrap.dedent(
    """\
    ptxas info    : 0 bytes gmem
    ptxas info    : Function properties for _Z6helperf
        24 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
    ptxas info    : Compiling entry function '_Z5scaleIfEvPT_S0_' for 'sm_90'
    ptxas info    : Function properties for _Z5scaleIfEvPT_S0_
        16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 40 registers, used 1 barriers, 1024 bytes smem
    ptxas info    : Compile time = 3.1 ms
    ptxas info    : Compiling entry function 'copy4' for 'sm_90'
    ptxas info    : Function properties for copy4
        0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 12 registers, used 0 barriers
    """
)
CLEAN_LOG = textwrap.dedent(
    """\
    ptxas info    : Compiling entry function '_Z5scaleIfEvPT_S0_' for 'sm_90'
    ptxas info    : Function properties for _Z5scaleIfEvPT_S0_
        0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 40 registers, used 0 barriers
    ptxas info    : Compiling entry function 'copy4' for 'sm_90'
    ptxas info    : Function properties for copy4
        0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 12 registers, used 0 barriers
    """
)
C7510_LINE = (
    "ptxas info    : (C7510) Potential Performance Loss: wgmma.mma_async instructions are serialized due "
    "to wgmma pipeline crossing function boundary at a function call in the function '_Z5scaleIfEvPT_S0_'\n"
)
SASS = textwrap.dedent(
    """\

    Fatbin elf code:
    ================
    arch = sm_90
    \tcode for sm_90
    \t\tFunction : _Z5scaleIfEvPT_S0_
    \t.headerflags\t@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
            /*0000*/                   LDC R1, c[0x0][0x28] ;
            /*0010*/                   LDG.E R2, desc[UR4][R2.64] ;
            /*0020*/                   STG.E desc[UR4][R4.64], R2 ;
    \t\tFunction : copy4
            /*0000*/                   LDG.E.128.CONSTANT R4, desc[UR4][R2.64] ;
            /*0010*/                   STG.E.128 desc[UR4][R6.64], R4 ;
            /*0020*/                   EXIT ;
    """
)

FAKE_TOOL = """\
#!{python}
# Stands in for nvcc, cuobjdump or nvdisasm: answers --version; nvcc writes its -o file and prints
# $FAKE_PTXAS_LOG; cuobjdump -sass prints $FAKE_SASS.
import os, sys
tool = os.path.basename(sys.argv[0])
args = sys.argv[1:]
if "--version" in args:
    print(f"fake {{tool}}: Cuda compilation tools, release 0.0, V0.0.1")
    sys.exit(0)
if tool == "nvcc" and "--dryrun" in args:
    sys.exit(0)
if tool == "nvcc" and "-M" in args:  # the dependency pass: follow #include "..." from the folder, then -I folders
{dependency_pass}if tool == "nvcc":
    count = os.environ.get("FAKE_NVCC_COUNT")
    if count:
        open(count, "a").write("build\\n")
    out = args[args.index("-o") + 1]
    text = "".join(open(a).read() for a in args if a.endswith(".cu"))
    if "#error" in text:
        print("wrapper.cu(1): error: planted", file=sys.stderr)
        sys.exit(2)
    open(out, "w").write("fake binary\\n" + text + " ".join(args))
    sys.stderr.write(os.environ.get("FAKE_PTXAS_LOG", ""))
elif tool == "cuobjdump":
    sys.stdout.write(os.environ.get("FAKE_SASS", ""))
"""


@pytest.fixture
def toolchain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """A fake $CUDA_HOME with nvcc, cuobjdump and nvdisasm; call it to set the log and SASS."""
    home = tmp_path / "cuda"
    (home / "bin").mkdir(parents=True)
    for tool in ("nvcc", "cuobjdump", "nvdisasm"):
        script = home / "bin" / tool
        script.write_text(FAKE_TOOL.format(python=sys.executable, dependency_pass=DEPENDENCY_PASS))
        script.chmod(0o755)
    monkeypatch.setenv("CUDA_HOME", str(home))
    monkeypatch.setenv("GPU_PERF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("FAKE_NVCC_COUNT", str(tmp_path / "builds.txt"))

    def configure(log: str = CLEAN_LOG, sass: str = SASS) -> None:
        monkeypatch.setenv("FAKE_PTXAS_LOG", log)
        monkeypatch.setenv("FAKE_SASS", sass)

    configure()
    return configure


def builds(tmp_path: Path) -> int:
    path = tmp_path / "builds.txt"
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.fixture
def source(tmp_path: Path) -> Path:
    path = tmp_path / "src" / "kernels.cu"
    path.parent.mkdir()
    path.write_text(
        '#include "sub/dep.h"\n'
        "template <typename T> __device__ T helper(T x) { return x; }\n"
        "template <typename T> __global__ void scale(T* x, T s) { x[0] = helper(x[0]) * s; }\n"
        'extern "C" __global__ void copy4(const float4* a, float4* b) { b[0] = a[0]; }\n'
    )
    (path.parent / "sub").mkdir()
    (path.parent / "sub" / "dep.h").write_text("#pragma once\n")
    return path


def module(source: Path, **kwargs: Any) -> CudaModule:
    defaults: dict[str, Any] = {
        "options": ("-std=c++17",),
        "name_expressions": ("scale<float>",),
        "archs": ("sm_90",),
        "sass_facts": {"copy4": (r"\bLDG\.E\.128\b", r"\bSTG\.E\.128\b")},
    }
    return CudaModule("toy", source, **(defaults | kwargs))


# -- parsing ---------------------------------------------------------------------------------
def test_parse_ptxas_resources() -> None:
    kernels = parse_ptxas_resources(PTXAS_LOG)
    assert kernels == {
        # a callee listed before any kernel is charged to none (ptxas lists callees after their caller)
        "_Z5scaleIfEvPT_S0_": {"registers": 40, "spill_stores": 0, "spill_loads": 0, "shared_bytes": 1024,
                        "stack_bytes": 16, "barriers": 1},
        "copy4": {"registers": 12, "spill_stores": 0, "spill_loads": 0, "shared_bytes": 0,
                  "stack_bytes": 0, "barriers": 0},
    }


def test_spills_of_a_called_function_count_against_the_kernel() -> None:
    log = PTXAS_LOG.replace("Function properties for _Z6helperf\n    24 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n", "")
    log = log.replace("Used 12 registers, used 0 barriers", "Used 12 registers, used 0 barriers, 24 bytes cumulative stack size")
    log += "ptxas info    : Function properties for _Z6helperf\n    24 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
    kernels = parse_ptxas_resources(log)
    assert (kernels["copy4"]["spill_stores"], kernels["copy4"]["spill_loads"]) == (8, 4)
    assert kernels["copy4"]["stack_bytes"] == 24  # the callee's frame, through the cumulative size


def test_split_sass() -> None:
    functions = split_sass(SASS)
    assert set(functions) == {"_Z5scaleIfEvPT_S0_", "copy4"}
    assert "LDG.E.128" in functions["copy4"] and "LDG.E.128" not in functions["_Z5scaleIfEvPT_S0_"]


def test_count_sass_instructions_counts_addressed_lines_only() -> None:
    functions = split_sass(SASS)
    assert count_sass_instructions(functions["_Z5scaleIfEvPT_S0_"]) == 3  # not the .headerflags line
    # cuobjdump prints each instruction's encoding on the next line, as a comment: not an instruction.
    with_encodings = textwrap.dedent(
        """\
                /*0000*/                   LDC R1, c[0x0][0x28] ;
                                                                      /* 0x00000a00ff017b82 */
                /*0010*/                   BRA 0x10;
                                                                      /* 0x000fc0000383ffff */
                /*1a2b0*/                  NOP;
        """
    )
    assert count_sass_instructions(with_encodings) == 3


def test_kernel_keys_are_readable_and_independent_of_the_demangler() -> None:
    assert kernel_key("_Z5scaleIfEvPT_S0_", "void scale<float>(float*, float)") == "scale<float>"
    assert kernel_key("copy4", "copy4") == "copy4"
    mangled = "_ZN7cutlass13device_kernelINS_4gemm6kernel13GemmUniversalIJiiiiEEEEEvNT_6ParamsE"
    undemangled = kernel_key(mangled, mangled)  # this demangler could not read it
    assert undemangled.startswith("cutlass::device_kernel<...>#")
    long_demangled = "void cutlass::device_kernel<" + "x" * 400 + ">(int)"
    assert kernel_key(mangled, long_demangled) == undemangled  # a better demangler: the same key


# -- budgets ---------------------------------------------------------------------------------
def budget(registers: int, spills: int = 0, instructions: int | None = None) -> Budget:
    return Budget(registers=registers, spill_stores=spills, spill_loads=spills, shared_bytes=0, stack_bytes=0,
                  sass_instructions=instructions)


def test_budget_round_trip_and_update_keeps_other_entries(tmp_path: Path) -> None:
    store = BudgetStore(tmp_path)
    changes = store.update("fam", "mod_a", "sm_90", {"k1": budget(32), "k2": budget(40)}, "nvcc 13.0.88")
    assert [(c.kernel, c.old) for c in changes] == [("k1", None), ("k2", None)]
    store.update("fam", "mod_a", "sm_80", {"k1": budget(30)}, "nvcc 13.0.88")
    store.update("fam", "mod_b", "sm_90", {"k9": budget(64)}, "nvcc 13.0.88")
    changes = store.update("fam", "mod_a", "sm_90", {"k1": budget(34), "k2": budget(40)}, "nvcc 13.0.88")
    assert [c.describe() for c in changes] == ["~ mod_a sm_90 k1: registers 32 -> 34"]
    f = BudgetFile.read(store.path_for("fam"))
    assert f is not None
    assert f.modules["mod_a"]["sm_80"].kernels == {"k1": budget(30)}
    assert f.modules["mod_b"]["sm_90"].kernels == {"k9": budget(64)}
    assert f.modules["mod_a"]["sm_90"].kernels == {"k1": budget(34), "k2": budget(40)}
    assert json.loads(store.path_for("fam").read_text())["schema"] == BUDGET_SCHEMA
    assert not list(store.root.glob("*.tmp")), "temporary files left behind"
    # A kernel no longer built leaves its module's budgets on the next update.
    changes = store.update("fam", "mod_a", "sm_90", {"k1": budget(34)}, "nvcc 13.0.88")
    assert [c.describe() for c in changes] == ["- mod_a sm_90 k2: removed (no longer built)"]


def test_instruction_counts_round_trip_and_old_files_still_read(tmp_path: Path) -> None:
    store = BudgetStore(tmp_path)
    changes = store.update("fam", "m", "sm_90", {"k": budget(32, instructions=9208)}, "nvcc 13.0.88")
    assert changes[0].describe() == ("+ m sm_90 k: 32 registers, 0/0 B spill stores/loads, 0 B shared, 0 B stack, "
                                     "9208 SASS instructions")
    changes = store.update("fam", "m", "sm_90", {"k": budget(32, instructions=9400)}, "nvcc 13.0.88")
    assert [c.describe() for c in changes] == ["~ m sm_90 k: sass_instructions 9208 -> 9400"]
    assert store.lookup("fam", "m", "sm_90").kernels["k"] == budget(32, instructions=9400)  # type: ignore[union-attr]
    # A file of schema 1 (before instruction counts) is read as it is: no count, so none gated.
    data = json.loads(store.path_for("fam").read_text())
    data["schema"] = "pytest-gpuperf/static-budgets/1"
    del data["modules"]["m"]["sm_90"]["kernels"]["k"]["sass_instructions"]
    store.path_for("fam").write_text(json.dumps(data))
    assert store.lookup("fam", "m", "sm_90").kernels["k"] == budget(32)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d.update(schema="other/1"), "schema"),
        (lambda d: d["modules"]["m"]["sm_90"]["kernels"]["k"].update(registers=-1), "registers"),
        (lambda d: d["modules"]["m"]["sm_90"]["kernels"]["k"].update(regs=3), "unknown keys"),
        (lambda d: d["modules"]["m"]["sm_90"]["kernels"]["k"].update(sass_instructions="9k"), "sass_instructions"),
        (lambda d: d["modules"]["m"].update(sm90=d["modules"]["m"].pop("sm_90")), "architecture"),
        (lambda d: d["modules"]["m"]["sm_90"].pop("toolchain"), "toolchain"),
    ],
)
def test_bad_budget_files_name_the_field(tmp_path: Path, mutate: Callable[[dict], Any], field: str) -> None:
    store = BudgetStore(tmp_path)
    store.update("fam", "m", "sm_90", {"k": budget(32)}, "nvcc 13.0.88")
    data = json.loads(store.path_for("fam").read_text())
    mutate(data)
    store.path_for("fam").write_text(json.dumps(data))
    with pytest.raises(BaselineFileError, match=field):
        store.lookup("fam", "m", "sm_90")


# -- building with the stand-in toolchain ----------------------------------------------------
def test_wrapper_instantiates_every_name_expression(source: Path) -> None:
    text = module(source, name_expressions=("scale<float>", "scale<double>")).wrapper_source()
    assert '#include "kernels.cu"' in text  # found through -I its folder
    assert "(void*)&scale<float>," in text and "(void*)&scale<double>," in text


def test_compile_parses_and_caches(tmp_path: Path, source: Path, toolchain: Callable[..., None]) -> None:
    first = compile_module(module(source), "sm_90")
    assert set(first.kernels) == {"scale<float>", "copy4"}
    assert first.kernels["scale<float>"] == KernelResources(
        name="scale<float>", mangled="_Z5scaleIfEvPT_S0_", registers=40, spill_stores=0, spill_loads=0,
        shared_bytes=0, stack_bytes=0, barriers=0, sass_instructions=3,  # disassembled for its facts
    )
    assert "-cubin" in first.command and "-gencode=arch=compute_90,code=sm_90" in first.command
    assert "LDG.E.128" in first.sass["copy4"]
    again = compile_module(module(source), "sm_90")
    assert (first.cached, again.cached, builds(tmp_path)) == (False, True, 1)
    # Any input changes the key: a header it includes from a sub-folder, the name expressions, the arch.
    (source.parent / "sub" / "dep.h").write_text("#pragma once\n// edited\n")
    compile_module(module(source), "sm_90")
    compile_module(module(source, name_expressions=("scale<double>",)), "sm_90")
    compile_module(module(source, archs=("sm_80", "sm_90")), "sm_80")
    assert builds(tmp_path) == 4


def judged(
    source: Path, log: str, budgets: dict[str, Budget] | None, *, facts: Any = None, update: bool = False,
    growth: float | None = None,
) -> Any:
    mod = module(source, max_code_growth=growth) if facts is None else module(source, sass_facts=facts, max_code_growth=growth)
    result = compile_module(mod, "sm_90")
    from pytest_gpuperf._store.budgets import ArchBudgets

    stored = ArchBudgets("fake 0.0.1", "2026-11-21T00:00:00+00:00", budgets) if budgets is not None else None
    return judge(result, mod, stored, Path("baselines/static/toy.json"), update=update)


def test_within_budget_passes(source: Path, toolchain: Callable[..., None]) -> None:
    verdict = judged(source, CLEAN_LOG, {"scale<float>": budget(40), "copy4": budget(12)})
    assert verdict.failures == [] and verdict.record["verdict"] == "pass"
    assert all(f["ok"] for f in verdict.record["facts"])


def test_registers_over_budget_fail_with_a_table(source: Path, toolchain: Callable[..., None]) -> None:
    verdict = judged(source, CLEAN_LOG, {"scale<float>": budget(32), "copy4": budget(12)})
    assert verdict.record["verdict"] == "fail"
    text = verdict.failures[0]
    assert "static budget EXCEEDED: toy for sm_90" in text
    assert "40/32 OVER" in text and "copy4" not in text
    assert "recorded with fake 0.0.1" in text  # the toolchain changed: said so


def test_a_spill_fails_where_the_budget_has_none(source: Path, toolchain: Callable[..., None]) -> None:
    toolchain(log=PTXAS_LOG.replace("16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads",
                                    "16 bytes stack frame, 32 bytes spill stores, 32 bytes spill loads"))
    failing = judged(source, "", {"scale<float>": budget(40), "copy4": budget(12)})
    assert failing.record["verdict"] == "fail" and "32/0 OVER" in failing.failures[0]
    unbudgeted = judged(source, "", None)
    assert unbudgeted.record["verdict"] == "fail" and "(no budget)" in unbudgeted.failures[0]
    accepted = judged(source, "", {"scale<float>": Budget(40, 32, 32, 1024, 16), "copy4": budget(12)})
    assert accepted.failures == []


def test_code_growth_beyond_the_modules_limit_fails(source: Path, toolchain: Callable[..., None]) -> None:
    within = {"scale<float>": budget(40, instructions=100), "copy4": budget(12, instructions=3)}
    # 3 instructions against 100 recorded: smaller code passes; so does growth within the limit.
    assert judged(source, "", within, growth=0.02).record["verdict"] == "pass"
    exit_line = "        /*0020*/                   EXIT ;\n"
    assert exit_line in SASS
    longer = SASS.replace(exit_line, "".join(f"        /*{16 * i:04x}*/                   NOP ;\n" for i in range(2, 6)))
    toolchain(sass=longer)  # copy4: 3 -> 6 instructions (a new binary: the edit below changes the key)
    source.write_text(source.read_text() + "// longer\n")
    verdict = judged(source, "", within, growth=0.02)
    assert verdict.record["verdict"] == "fail"
    text = verdict.failures[0]
    assert "6/3 OVER" in text and "copy4 +100.0%" in text and "max_code_growth (2.0%)" in text
    (row,) = [r for r in verdict.record["kernels"] if r["kernel"] == "copy4"]
    assert (row["sass_instructions"], row["code_limit"], row["over"]) == (6, 3, ["sass_instructions"])
    # The limit is the recorded count grown by the fraction, rounded down: 5 x 1.2 = 6 fits, 5 x 1.19 does not.
    five = {"scale<float>": budget(40, instructions=100), "copy4": budget(12, instructions=5)}
    assert judged(source, "", five, growth=0.2).failures == []
    assert "6/5 OVER" in judged(source, "", five, growth=0.19).failures[0]
    # A module that does not gate its code size ignores the counts; one that does, with budgets of
    # schema 1 (no counts), says so and is only measured.
    assert judged(source, "", within).failures == []
    uncounted = judged(source, "", {"scale<float>": budget(40), "copy4": budget(12)}, growth=0.02)
    assert uncounted.failures == [] and uncounted.record["verdict"] == "measured"
    assert "no stored SASS instruction count for 2 kernel(s)" in (uncounted.missing_note or "")


def test_a_ptxas_performance_warning_fails_even_within_budget(source: Path, toolchain: Callable[..., None]) -> None:
    toolchain(log=CLEAN_LOG + C7510_LINE)
    verdict = judged(source, "", {"scale<float>": budget(40), "copy4": budget(12)})
    assert verdict.record["verdict"] == "fail"
    assert "C7510" in verdict.failures[0] and "ptxas performance warnings" in verdict.failures[0]
    assert verdict.record["ptxas_warnings"]
    # ... and in update mode too: re-recording budgets does not accept a serialized wgmma.
    assert judged(source, "", None, update=True).failures


def test_a_missing_sass_fact_fails(source: Path, toolchain: Callable[..., None]) -> None:
    toolchain(sass=SASS.replace("LDG.E.128.CONSTANT", "LDG.E.CONSTANT"))
    verdict = judged(source, "", {"scale<float>": budget(40), "copy4": budget(12)})
    assert verdict.record["verdict"] == "fail"
    assert r"/\bLDG\.E\.128\b/ not in the SASS of copy4" in verdict.failures[0]
    nowhere = judged(source, "", {"scale<float>": budget(40), "copy4": budget(12)}, facts={"gemm": ("HGMMA",)})
    assert "matches no kernel" in nowhere.failures[0]


def test_missing_and_stale_budgets(source: Path, toolchain: Callable[..., None]) -> None:
    missing = judged(source, "", {"scale<float>": budget(40)})
    assert missing.failures == [] and missing.record["verdict"] == "measured"
    assert "no stored budget for 1 kernel(s) of toy on sm_90" in (missing.missing_note or "")
    stale = judged(source, "", {"scale<float>": budget(40), "copy4": budget(12), "gone<int>": budget(8)})
    assert "no longer built: gone<int>" in stale.failures[0]


def test_arch_specific_facts(source: Path) -> None:
    mod = module(source, archs=("sm_80", "sm_90a"), sass_facts={"copy4": "LDG"},
                 sass_facts_by_arch={"sm_90": {"scale": (r"\bUBLKPF\b",)}})
    assert mod.facts_for("sm_80") == {"copy4": ("LDG",)}
    assert mod.facts_for("sm_90a") == {"copy4": ("LDG",), "scale": (r"\bUBLKPF\b",)}


def test_bad_declarations_are_rejected(source: Path) -> None:
    with pytest.raises(ValueError, match="arch"):
        module(source, archs=("sm90",))
    with pytest.raises(ValueError, match="bad regex"):
        module(source, sass_facts={"copy4": ("LDG(",)})
    with pytest.raises(ValueError, match="max_code_growth is a fraction"):
        module(source, max_code_growth=2)


# -- the fixture, end to end -----------------------------------------------------------------
STATIC_TESTS = """
import pytest
from pathlib import Path
from pytest_gpuperf._compile.cuda_module import CudaModule

MODULE = CudaModule(
    "toy", Path({source!r}), name_expressions=("scale<float>",), archs=("sm_90",),
    sass_facts={{"copy4": (r"\\bLDG\\.E\\.128\\b",)}},
)

def test_static(gpu_static):
    gpu_static.check(MODULE, "sm_90")

def test_perf(gpu_perf):
    pass

@pytest.mark.sm80
def test_gpu_values():
    pass

def test_cpu():
    pass
"""


def test_cpu_only_gpu_perf_run_reports_static_checks_and_skipped_gpu_parts(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], toolchain: Callable[..., None], source: Path
) -> None:
    fake_gpu(cc="none")
    pytester.makepyfile(STATIC_TESTS.format(source=str(source)))
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-json=report.json")
    result.assert_outcomes(passed=2, skipped=2)
    result.stdout.fnmatch_lines([
        "*gpu-perf static checks*",
        "module*arch*kernels*max regs*spills*max SASS instrs*ptxas warnings*SASS facts*budgets*verdict",
        "toy*sm_90*2*40*0 B*3*0*1/1*0/2*measured",
        "*have kernels without a stored budget; record them with: pytest --gpu-perf-update-baselines",
        "no GPU (fake: this machine has no GPU): 1 GPU correctness tests and 1 perf tests skipped; static checks ran: 1",
    ])
    report = json.loads((pytester.path / "report.json").read_text())
    (static,) = [t for t in report["tests"] if t["static"]]
    assert static["nodeid"].endswith("test_static") and static["static"][0]["module"] == "toy"
    assert {k["kernel"] for k in static["static"][0]["kernels"]} == {"scale<float>", "copy4"}


def test_update_records_budgets_then_a_regression_fails(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], toolchain: Callable[..., None], source: Path
) -> None:
    fake_gpu(cc="none")
    pytester.makepyfile(STATIC_TESTS.format(source=str(source)))
    result = pytester.runpytest("-k", "static", "--gpu-perf-update-baselines")
    result.assert_outcomes(passed=1, deselected=3)
    result.stdout.fnmatch_lines(["static budgets updated (2 entries):", "  + toy sm_90 copy4: 12 registers*"])
    budgets = json.loads((pytester.path / "baselines" / "static" / "toy.json").read_text())
    assert budgets["modules"]["toy"]["sm_90"]["kernels"]["scale<float>"]["registers"] == 40
    pytester.runpytest("-k", "static").assert_outcomes(passed=1, deselected=3)
    toolchain(log=CLEAN_LOG.replace("Used 40 registers", "Used 48 registers"))
    source.write_text(source.read_text() + "// an edit that costs registers\n")  # a new cache key
    result = pytester.runpytest("-k", "static")
    result.assert_outcomes(failed=1, deselected=3)
    result.stdout.fnmatch_lines(["*static budget EXCEEDED: toy for sm_90*", "*scale<float>*48/40 OVER*"])


def test_recorded_instruction_counts_then_code_growth_fails(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], toolchain: Callable[..., None], source: Path
) -> None:
    fake_gpu(cc="none")
    tests = STATIC_TESTS.format(source=str(source)).replace('archs=("sm_90",),', 'archs=("sm_90",), max_code_growth=0.5,')
    pytester.makepyfile(tests)
    pytester.runpytest("-k", "static", "--gpu-perf-update-baselines").assert_outcomes(passed=1, deselected=3)
    budgets = json.loads((pytester.path / "baselines" / "static" / "toy.json").read_text())
    assert budgets["schema"] == BUDGET_SCHEMA
    assert budgets["modules"]["toy"]["sm_90"]["kernels"]["copy4"]["sass_instructions"] == 3
    toolchain(sass=SASS.replace("EXIT ;", "NOP ;\n        /*0030*/ NOP ;\n        /*0040*/ EXIT ;"))  # 5 > 3 x 1.5
    source.write_text(source.read_text() + "// an edit that grows the code\n")
    result = pytester.runpytest("-k", "static")
    result.assert_outcomes(failed=1, deselected=3)
    result.stdout.fnmatch_lines(["*static budget EXCEEDED: toy for sm_90*", "*copy4*5/4 OVER*",
                                 "*max_code_growth (50.0%)*copy4 +66.7%*"])


def test_missing_budget_policy_fail(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], toolchain: Callable[..., None], source: Path
) -> None:
    pytester.makepyfile(STATIC_TESTS.format(source=str(source)))
    result = pytester.runpytest("-k", "static", "--gpu-perf-missing-baseline=fail")
    result.assert_outcomes(failed=1, deselected=3)
    result.stdout.fnmatch_lines(["*no stored budget for 2 kernel(s) of toy on sm_90*"])


def test_archs_not_selected_are_skipped(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], toolchain: Callable[..., None], source: Path
) -> None:
    pytester.makepyfile(STATIC_TESTS.format(source=str(source)))
    result = pytester.runpytest("-k", "static", "-rs", "--gpu-perf-static-archs=sm_80")
    result.assert_outcomes(skipped=1, deselected=3)
    result.stdout.fnmatch_lines(["*sm_90 not selected by --gpu-perf-static-archs (sm_80)*"])
    bad = pytester.runpytest("-k", "static", "--gpu-perf-static-archs=hopper")
    bad.stderr.fnmatch_lines(["*invalid value 'hopper' for gpu_perf_static_archs*"])


def test_without_nvcc_the_fixture_skips_naming_the_extra(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, source: Path
) -> None:
    import pytest_gpuperf._compile.nvcc as nvcc_module

    def missing() -> Path:
        raise NvccNotFound("nvcc not found; looked in nowhere")

    monkeypatch.setattr(nvcc_module, "find_nvcc", missing)
    pytester.makepyfile(STATIC_TESTS.format(source=str(source)))
    result = pytester.runpytest("-k", "static", "-rs")
    result.assert_outcomes(skipped=1, deselected=3)
    result.stdout.fnmatch_lines(["*static tier: nvcc not found; install the compile extra: pip install 'pytest-gpuperf?compile?'*"])


# -- the real toolchain on a tiny kernel ------------------------------------------------------
TINY_KERNELS = r"""
// copy4: one 16-byte load and store per thread. pressure: 48 live accumulators, which spill
// under -maxrregcount=16.
extern "C" __global__ void copy4(const float4* __restrict__ a, float4* __restrict__ b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] = a[i];
}
template <int N>
__global__ void pressure(const float* __restrict__ x, float* __restrict__ y, int n) {
  float acc[N];
#pragma unroll
  for (int k = 0; k < N; ++k) acc[k] = x[k * n + threadIdx.x];
  for (int r = 0; r < n; ++r) {
#pragma unroll
    for (int k = 0; k < N; ++k) acc[k] = acc[k] * acc[(k + 1) % N] + x[r];
  }
#pragma unroll
  for (int k = 0; k < N; ++k) y[k * n + threadIdx.x] = acc[k];
}
"""


@pytest.fixture
def real_toolchain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    try:
        find_nvcc()
        find_cuobjdump()
        find_nvdisasm()
    except NvccNotFound as exc:
        pytest.skip(f"needs the CUDA compiler tools (pip install 'pytest-gpuperf[compile]'): {exc}")
    monkeypatch.setenv("GPU_PERF_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "tiny.cu"
    path.write_text(TINY_KERNELS)
    return path


@pytest.mark.build
def test_real_nvcc_reports_resources_and_sass(real_toolchain: Path) -> None:
    mod = CudaModule(
        "tiny", real_toolchain, options=("-std=c++17",), name_expressions=("pressure<48>",),
        archs=("sm_80", "sm_90"), sass_facts={"copy4": (r"\bLDG\.E\.128\b", r"\bSTG\.E\.128\b")},
    )
    for arch in mod.archs:
        result = compile_module(mod, arch)
        assert set(result.kernels) == {"copy4", "pressure<48>"}
        assert 0 < result.kernels["copy4"].registers <= 32
        assert result.kernels["pressure<48>"].registers > 48
        assert 0 < result.kernels["copy4"].sass_instructions < result.kernels["pressure<48>"].sass_instructions
        assert result.perf_warnings == ()
        verdict = judge(result, mod, None, Path("toy.json"), update=False)
        assert verdict.failures == [] and all(f["ok"] for f in verdict.record["facts"])
        assert compile_module(mod, arch).cached


@pytest.mark.build
def test_real_nvcc_detects_a_spill(real_toolchain: Path) -> None:
    mod = CudaModule("tiny", real_toolchain, options=("-std=c++17", "-maxrregcount=16"),
                     name_expressions=("pressure<48>",), archs=("sm_90",))
    result = compile_module(mod, "sm_90")
    spilled = result.kernels["pressure<48>"]
    assert spilled.registers <= 24 and spilled.spill_stores > 0 and spilled.spill_loads > 0  # ptxas floor: 24
    assert any(w.startswith("spills in ") for w in result.perf_warnings)
    verdict = judge(result, mod, None, Path("toy.json"), update=False)
    assert verdict.record["verdict"] == "fail" and "spill_stores" in verdict.failures[0]
