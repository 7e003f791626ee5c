"""Explaining a kernel that moved: finding its binary, its resources and instruction classes, and
the SASS and resource difference between two sides.

The default tier reads canned ``cuobjdump`` text, and runs a stand-in cuobjdump (a script under a
fake $CUDA_HOME) on fake binaries that carry the text it prints. The tests marked ``build``
compile two versions of a tiny kernel with the real nvcc, put them where CuPy's and Triton's
caches and the plugin's own build cache keep them, and explain the difference; they skip without
the CUDA compiler tools.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_gpuperf._compile.nvcc import NvccNotFound, build_shared_library, find_cuobjdump, find_nvcc, find_nvdisasm
from pytest_gpuperf._diagnose.binaries import LOCATIONS, BinarySearch, find_binary
from pytest_gpuperf._diagnose.device_code import Binary
from pytest_gpuperf._diagnose.explain import KernelDiff, explain_kernel
from pytest_gpuperf._diagnose.instructions import CLASSES, classify, normalise, parse_instructions, sass_by_arch
from pytest_gpuperf._diagnose.resources import (
    KernelReport,
    format_bytes,
    parse_res_usage,
    resource_changes,
)
from pytest_gpuperf._diagnose.sass_diff import SassDiff, sass_diff

KERNEL = "_Z5scaleILi4EEvPfi"  # scale<4>(float*, int)


def function_sass(*instructions: str, name: str = KERNEL, padding: int = 3) -> str:
    """One function as cuobjdump -sass prints it: addressed lines, each with its two encoding
    comments, then the NOPs that pad the function."""
    lines = [f"\t\tFunction : {name}", '\t.headerflags\t@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"']
    for k, text in enumerate([*instructions, *["NOP ;"] * padding]):
        lines.append(f"        /*{16 * k:04x}*/                   {text:<40} /* 0x000fe20000000f00 */")
        lines.append("                                                                 /* 0x000fc00000000000 */")
    return "\n".join(lines) + "\n"


LOOP = (
    "LDC R1, c[0x0][0x28] ;",
    "S2R R0, SR_TID.X ;",
    "ISETP.GE.AND P0, PT, R0, UR4, PT ;",
    "@P0 EXIT ;",
    "LDG.E R2, desc[UR4][R2.64] ;",
    "FFMA R5, R2.reuse, R2, R5 ;",
    "@!P0 BRA 0x70 ;",
    "STG.E desc[UR4][R2.64], R5 ;",
    "EXIT ;",
    "BRA 0x90;",
)
# The same code with other register numbers and at other addresses: the diff must not show it.
LOOP_RENUMBERED = tuple(
    line.replace("R2", "R8").replace("R5", "R9").replace("P0", "P3").replace("0x70", "0x80").replace("0x90", "0xa0")
    for line in LOOP
)
# One more load and FMA inside the loop, a shared-memory load gone, a spill.
LOOP_GROWN = (
    *LOOP[:5],
    "LDG.E R6, desc[UR4][R6.64] ;",
    "FFMA R5, R6, R6, R5 ;",
    "STL [R1], R6 ;",
    *LOOP[5:],
)


# -- instructions and their classes --------------------------------------------------------------
def test_instructions_are_read_with_guards_and_without_padding() -> None:
    found = parse_instructions(function_sass(*LOOP))
    assert [i.opcode for i in found] == ["LDC", "S2R", "ISETP.GE.AND", "EXIT", "LDG.E", "FFMA", "BRA", "STG.E",
                                         "EXIT", "BRA"]
    assert found[3].guard == "@P0" and found[6].guard == "@!P0" and found[6].operands == "0x70"
    assert found[4].address == 0x40 and found[4].base == "LDG"
    assert len(parse_instructions(function_sass(*LOOP), padding=True)) == len(LOOP) + 3


@pytest.mark.parametrize(
    ("opcode", "cls"),
    [
        ("HGMMA.64x128x16.F32.BF16", "mma"), ("HMMA.16816.F32", "mma"), ("UTCHMMA", "mma"),
        ("UTMALDG.2D", "tma/bulk"), ("UBLKCP.S.G", "tma/bulk"), ("LDGSTS.E.BYPASS.128", "tma/bulk"),
        ("LDG.E.128.CONSTANT", "global load"), ("STG.E", "global store"), ("LDSM.16.M88.4", "shared load"),
        ("STS.128", "shared store"), ("LDL", "local load"), ("STL.64", "local store"), ("ATOMG.E.ADD", "atomic"),
        ("LDC.64", "other memory"), ("ULDC", "other memory"), ("BRA.DIV", "control"), ("BSSY", "control"),
        ("SYNCS.PHASECHK.TRANS64.TRYWAIT", "sync"), ("BAR.SYNC.DEFER_BLOCKING", "sync"), ("UCGABAR_ARV", "sync"),
        ("WARPGROUP.ARRIVE", "sync"), ("FFMA", "float"), ("HFMA2.MMA", "float"), ("MUFU.EX2", "float"),
        ("IMAD.WIDE.U32", "integer"), ("UIADD3", "integer"), ("LOP3.LUT", "integer"), ("MOV", "other"),
        ("SHFL.BFLY", "other"), ("SOMETHINGNEW", "other"),
    ],
)  # fmt: skip
def test_opcodes_fall_in_their_class(opcode: str, cls: str) -> None:
    assert classify(opcode) == cls
    assert cls in {name for name, _ in CLASSES}


def test_normalising_drops_what_moves_with_unrelated_changes() -> None:
    bra, ffma = parse_instructions(function_sass(*LOOP))[6], parse_instructions(function_sass(*LOOP))[5]
    assert normalise(bra) == "BRA"
    assert normalise(bra, operands=True) == "@!P BRA <target>"
    assert normalise(ffma, operands=True) == "FFMA R, R, R, R"
    assert normalise(ffma, operands=True, registers=True) == "FFMA R5, R2, R2, R5"
    label = parse_instructions("        /*0010*/    @P1 BRA `(.L_x_12) ;")[0]
    assert normalise(label, operands=True) == "@P BRA <target>"
    bar = parse_instructions("        /*0010*/    BAR.SYNC.DEFER_BLOCKING 0x0 ;")[0]
    assert normalise(bar, operands=True) == "BAR.SYNC.DEFER_BLOCKING 0x0"  # a barrier id, not a target


FATBIN_SASS = (
    "\nFatbin elf code:\n================\narch = sm_80\n\n\tcode for sm_80\n"
    + function_sass(*LOOP[:4])
    + "\nFatbin elf code:\n================\narch = sm_90\n\n\tcode for sm_90\n"
    + function_sass(*LOOP)
    + function_sass("EXIT ;", name="copy4")
)


def test_sass_is_split_per_architecture_then_function() -> None:
    split = sass_by_arch(FATBIN_SASS)
    assert set(split) == {"sm_80", "sm_90"} and set(split["sm_90"]) == {KERNEL, "copy4"}
    assert len(parse_instructions(split["sm_80"][KERNEL])) == 4
    assert len(parse_instructions(split["sm_90"][KERNEL])) == len(LOOP)


RES_USAGE_FATBIN = textwrap.dedent(
    f"""\

    Fatbin elf code:
    ================
    arch = sm_80
    code version = [1,8]

    Resource usage:
     Common:
      GLOBAL:0
     Function {KERNEL}:
      REG:40 STACK:0 SHARED:1024 LOCAL:0 CONSTANT[0]:368 TEXTURE:0 SURFACE:0 SAMPLER:0

    Fatbin elf code:
    ================
    arch = sm_90
    code version = [1,8]

    Resource usage:
     Common:
      GLOBAL:0
     Function {KERNEL}:
      REG:48 STACK:16 SHARED:2048 LOCAL:8 CONSTANT[0]:544 TEXTURE:0 SURFACE:0 SAMPLER:0
     Function copy4:
      REG:12 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:544 TEXTURE:0 SURFACE:0 SAMPLER:0
    """
)


def test_res_usage_is_read_per_architecture() -> None:
    usage = parse_res_usage(RES_USAGE_FATBIN)
    assert usage["sm_80"][KERNEL]["REG"] == 40
    assert usage["sm_90"][KERNEL] == {"REG": 48, "STACK": 16, "SHARED": 2048, "LOCAL": 8, "CONSTANT[0]": 544,
                                      "TEXTURE": 0, "SURFACE": 0, "SAMPLER": 0}
    lone = parse_res_usage("Resource usage:\n Common:\n  GLOBAL:0\n Function copy4:\n  REG:12 STACK:0 SHARED:0\n")
    assert lone == {None: {"copy4": {"REG": 12, "STACK": 0, "SHARED": 0}}}


# -- the SASS diff --------------------------------------------------------------------------------
def test_renumbered_and_moved_code_is_identical() -> None:
    diff = sass_diff(function_sass(*LOOP), function_sass(*LOOP_RENUMBERED, padding=7), operands=True)
    assert diff.identical and diff.lines == ()
    assert diff.render_lines() == [f"SASS identical ({len(LOOP)} instructions)"]
    assert not sass_diff(function_sass(*LOOP), function_sass(*LOOP_RENUMBERED), operands=True, registers=True).identical


def test_a_grown_loop_is_told_in_a_summary_and_a_unified_diff() -> None:
    diff = sass_diff(function_sass(*LOOP), function_sass(*LOOP_GROWN), context=1)
    assert (diff.added, diff.removed) == (3, 0)
    assert diff.summary() == "SASS +3 -0 instructions (10 -> 13): +1 FFMA, +1 LDG, +1 STL"
    assert diff.lines == ("@@ -5,2 +5,5 @@ 0x0040 -> 0x0040", " LDG.E", "+LDG.E", "+FFMA", "+STL", " FFMA")
    rendered = diff.render_lines(limit=4)
    assert rendered == ["SASS +3 -0 instructions (10 -> 13): +1 FFMA, +1 LDG, +1 STL", "  @@ -5,2 +5,5 @@ 0x0040 -> 0x0040",
                        "   LDG.E", "  ... 4 more diff lines"]
    back = sass_diff(function_sass(*LOOP_GROWN), function_sass(*LOOP), context=1)
    assert back.summary() == "SASS +0 -3 instructions (13 -> 10): -1 FFMA, -1 LDG, -1 STL"


def test_the_diff_is_cut_at_max_lines_and_survives_json() -> None:
    many = tuple(f"FFMA R{k}, R{k}, R{k}, R{k} ;" for k in range(60))
    diff = sass_diff(function_sass(*LOOP), function_sass(*LOOP[:5], *many, *LOOP[5:]), max_lines=10)
    assert diff.added == 60 and len(diff.lines) == 10 and diff.omitted > 0
    assert diff.summary().startswith("SASS +60 -0 instructions (10 -> 70): +60 FFMA")
    assert SassDiff.from_json(json.loads(json.dumps(diff.to_json()))) == diff
    with pytest.raises(ValueError, match="SASS diff"):
        SassDiff.from_json({"added": 1})


# -- resources and their changes ------------------------------------------------------------------
def report(**overrides: object) -> KernelReport:
    fields: dict[str, object] = dict(
        kernel=KERNEL, arch="sm_90", binary="/x/a.cubin", found_in="triton cache", registers=96, stack_bytes=0,
        shared_bytes=48 * 1024, local_bytes=0, instructions=412, classes={"float": 200, "global load": 8},
        spill_stores=0, spill_loads=0, barriers=1,
    )
    fields.update(overrides)
    return KernelReport(**fields)  # type: ignore[arg-type]


def test_resource_changes_are_told_in_a_fixed_order_with_units() -> None:
    before = report()
    after = report(registers=128, spill_stores=24, spill_loads=24, shared_bytes=64 * 1024, dynamic_shared_bytes=16 * 1024)
    told = [str(c) for c in resource_changes(before, after)]
    assert told == ["registers 96 -> 128", "spill stores 0 B -> 24 B", "spill loads 0 B -> 24 B",
                    "shared 48 KiB -> 64 KiB", "dynamic shared ? -> 16 KiB"]
    assert resource_changes(before, before) == ()
    # A build log on one side only (spills known there) is no change when it says none.
    assert resource_changes(report(spill_stores=None, spill_loads=None), before) == ()
    assert [c.field for c in resource_changes(report(spill_stores=None), report(spill_stores=8))] == ["spill_stores"]


def test_format_bytes() -> None:
    assert [format_bytes(n) for n in (None, 0, 24, 1024, 1536, 48 * 1024, 2 << 20)] == [
        "?", "0 B", "24 B", "1 KiB", "1.5 KiB", "48 KiB", "2 MiB"]


def test_a_report_renders_and_survives_json() -> None:
    r = report(dynamic_shared_bytes=16384, warnings=("(C7510) wgmma serialized in _Z5scaleILi4EEvPfi",))
    assert r.summary() == "registers 96, shared 48 KiB + 16 KiB dynamic, no spills, stack 0 B, barriers 1"
    assert r.class_summary() == "412 instructions: float 200, global load 8"
    assert report(spill_stores=None, spill_loads=None).summary().count("spills unknown (no build log)") == 1
    assert r.render_lines(limit=3)[0] == "sm_90, triton cache: /x/a.cubin"
    assert KernelReport.from_json(json.loads(json.dumps(r.to_json()))) == r
    with pytest.raises(ValueError, match="unknown fields"):
        KernelReport.from_json({**r.to_json(), "colour": 1})


# -- a stand-in cuobjdump on fake binaries --------------------------------------------------------
# A fake binary: the ELF magic, the kernel's name between NULs as a symbol table holds it, then
# the JSON of what cuobjdump prints for it.
SEPARATOR = b"\0GPUPERF-FAKE\0"
FAKE_CUOBJDUMP = """\
#!{python}
import json, sys
args = sys.argv[1:]
if "--version" in args:
    print("fake cuobjdump: Cuda compilation tools, release 0.0, V0.0.1")
    sys.exit(0)
data = open(args[-1], "rb").read()
if not data.startswith(b"\\x7fELF") or {separator!r} not in data:
    print("cuobjdump info    : File does not contain device code", file=sys.stderr)
    sys.exit(255)
spec = json.loads(data.split({separator!r}, 1)[1])
sys.stdout.write(spec["res"] if "-res-usage" in args else spec["sass"])
"""


def fake_binary(path: Path, *functions: str, res: str = RES_USAGE_FATBIN, sass: str = FATBIN_SASS,
                prefix: bytes = b"") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    names = b"".join(b"\0" + f.encode() + b"\0" for f in functions)
    path.write_bytes(prefix + b"\x7fELF" + names + SEPARATOR + json.dumps({"res": res, "sass": sass}).encode())
    return path


@pytest.fixture
def fake_cuda(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake $CUDA_HOME with cuobjdump and nvdisasm, a fresh home and plugin cache; returns home."""
    bin_dir = tmp_path / "cuda" / "bin"
    bin_dir.mkdir(parents=True)
    for tool in ("cuobjdump", "nvdisasm"):
        (bin_dir / tool).write_text(FAKE_CUOBJDUMP.format(python=sys.executable, separator=SEPARATOR))
        (bin_dir / tool).chmod(0o755)
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GPU_PERF_CACHE_DIR", str(home / "gpuperf-cache"))
    for name in ("XDG_CACHE_HOME", "CUPY_CACHE_DIR", "TRITON_CACHE_DIR", "TRITON_HOME", "TORCH_EXTENSIONS_DIR"):
        monkeypatch.delenv(name, raising=False)
    return home


def plugin_entry(cache_root: Path, kind: str, key: str, command: list[str], log: str, mtime: float) -> Path:
    """An entry of the plugin's nvcc or static build cache, as BuildCache publishes it."""
    entry = cache_root / kind / "entries" / key
    binary_name, log_name = ("lib.so", "nvcc.log") if kind == "nvcc" else ("module.cubin", "ptxas.log")
    binary = fake_binary(entry / binary_name, KERNEL)
    (entry / log_name).write_text(log)
    meta = {"command": command, **({"library": binary_name} if kind == "nvcc" else {})}
    files = {name: {"size": 1, "sha256": "0"} for name in (binary_name, log_name)}
    (entry / "build.json").write_text(json.dumps({"format": 1, "files": files, "meta": meta}))
    os.utime(binary, (mtime, mtime))
    os.utime(entry, (mtime, mtime))
    return binary


def test_the_first_location_holding_the_kernel_wins_newest_file_first(fake_cuda: Path) -> None:
    home = fake_cuda
    fake_binary(home / ".triton" / "cache" / "h1" / "scale.cubin", KERNEL)
    old = fake_binary(home / ".cupy" / "kernel_cache" / "a_2.cubin", KERNEL, prefix=b"0" * 40)
    new = fake_binary(home / ".cupy" / "kernel_cache" / "b_2.cubin", KERNEL, prefix=b"f" * 32)
    fake_binary(home / ".cupy" / "kernel_cache" / "c_2.cubin", "_Z5otherv")
    os.utime(old, (1_000, 1_000))
    os.utime(new, (2_000, 2_000))
    found = find_binary(KERNEL)
    assert found.binary == Binary(new, "cupy cache", offset=32) and found.confirmed
    assert found.reason is None and found.render_lines()[0] == f"{KERNEL}: cupy cache, {new}"
    absent = find_binary("copy4")  # every fake cuobjdump lists it, but no file holds the name
    assert absent.binary is None and absent.files_read == 4
    assert "cupy cache: 3 files in" in (absent.reason or "") and "triton cache: 1 files in" in (absent.reason or "")


def test_a_cupy_module_built_with_name_expressions_is_read_behind_its_table_of_names(fake_cuda: Path) -> None:
    """CuPy writes the digest, then ``\\x93CUPYNE`` and the mangled names, then the cubin."""
    table = b"\x93CUPYNE\x00\x01\x00\x00\x00" + len(KERNEL).to_bytes(4, "little") + KERNEL.encode()
    cached = fake_binary(fake_cuda / ".cupy" / "kernel_cache" / "t_2.cubin", KERNEL, prefix=b"a" * 40 + table)
    found = find_binary(KERNEL)
    assert found.binary == Binary(cached, "cupy cache", offset=40 + len(table)) and found.confirmed
    fake_binary(fake_cuda / ".cupy" / "kernel_cache" / "u_2.cubin", "_Z5otherv", prefix=b"a" * 40 + b"junk")
    assert find_binary("_Z5otherv").binary is None, "bytes between the digest and the cubin that are no table"


def test_a_file_holding_the_name_that_cuobjdump_cannot_read_is_named_as_skipped(fake_cuda: Path) -> None:
    """NVRTC newer than the toolkit's cuobjdump writes cubins that cuobjdump calls empty."""
    unreadable = fake_cuda / ".triton" / "cache" / "h1" / "scale.cubin"
    unreadable.parent.mkdir(parents=True)
    unreadable.write_bytes(b"\x7fELF\0" + KERNEL.encode() + b"\0")  # the stand-in refuses it as cuobjdump 13.0 did
    found = find_binary(KERNEL)
    assert found.binary is None
    assert any(str(unreadable) in s and "holds the name but cannot be read" in s for s in found.skipped)
    assert "skipped 1: " in (found.reason or "")


def test_binaries_the_caller_does_not_accept_are_passed_over(fake_cuda: Path) -> None:
    old = fake_binary(fake_cuda / ".triton" / "cache" / "h1" / "scale.cubin", KERNEL)
    new = fake_binary(fake_cuda / ".triton" / "cache" / "h2" / "scale.cubin", KERNEL)
    os.utime(old, (1_000, 1_000))
    os.utime(new, (2_000, 2_000))
    assert find_binary(KERNEL).binary == Binary(new, "triton cache")
    assert find_binary(KERNEL, accept=lambda b: b.path != new).binary == Binary(old, "triton cache")


def test_a_name_the_tool_does_not_list_is_no_match(fake_cuda: Path) -> None:
    # The bytes hold the name (a host-side string, say) but cuobjdump lists no such function.
    fake_binary(fake_cuda / ".triton" / "cache" / "h1" / "k.cubin", "_Z4hostv")
    assert find_binary("_Z4hostv").binary is None


def test_registered_paths_come_first_and_world_writable_folders_are_skipped(fake_cuda: Path, tmp_path: Path) -> None:
    fake_binary(fake_cuda / ".triton" / "cache" / "h1" / "scale.cubin", KERNEL)
    mine = fake_binary(tmp_path / "build" / "sub" / "kernels.fatbin", KERNEL)
    shared = tmp_path / "shared"
    fake_binary(shared / "planted.cubin", KERNEL)
    shared.chmod(0o777)
    found = find_binary(KERNEL, extra=[shared, tmp_path / "build"])
    assert found.binary == Binary(mine, "registered path")
    assert found.skipped == (f"{shared} is writable by every user",)
    by_glob = find_binary(KERNEL, extra=[str(tmp_path / "build" / "**" / "*.fatbin")])
    assert by_glob.binary is not None and by_glob.binary.path == mine
    only_shared = find_binary(KERNEL, extra=[shared / "planted.cubin"])
    assert only_shared.binary is not None and only_shared.binary.found_in == "triton cache"
    assert any("writable by every user" in line for line in only_shared.render_lines())


def test_a_world_writable_cache_is_not_searched(fake_cuda: Path) -> None:
    cache = fake_cuda / ".triton" / "cache"
    fake_binary(cache / "h1" / "scale.cubin", KERNEL)
    cache.chmod(0o777)
    found = find_binary(KERNEL)
    assert found.binary is None and found.skipped == (f"{cache} is writable by every user",)
    fake_binary(fake_cuda / ".cupy" / "kernel_cache" / "a_2.cubin", KERNEL, prefix=b"0" * 32)
    earlier = find_binary(KERNEL)  # found before the search reaches Triton's cache, which is not walked
    assert earlier.binary is not None and earlier.binary.found_in == "cupy cache" and earlier.skipped == ()


def test_plugin_caches_carry_their_logs_and_filter_by_source_root(fake_cuda: Path, tmp_path: Path) -> None:
    cache = fake_cuda / "gpuperf-cache"
    ours, theirs = tmp_path / "work", tmp_path / "rev"
    mine = plugin_entry(cache, "nvcc", "e1", ["nvcc", f"{ours}/k.cu", "-o", "x"], "log a", mtime=1_000)
    other = plugin_entry(cache, "nvcc", "e2", ["nvcc", f"-I{theirs}/include", "k.cu"], "log b", mtime=2_000)
    static = plugin_entry(cache, "static", "s1", ["nvcc", f"-I{ours}"], "log c", mtime=3_000)
    assert find_binary(KERNEL).binary == Binary(other, "nvcc cache", log=other.parent / "nvcc.log")
    assert find_binary(KERNEL, source_root=ours).binary == Binary(mine, "nvcc cache", log=mine.parent / "nvcc.log")
    (mine.parent / "build.json").unlink()  # a damaged entry: the next place is searched
    assert find_binary(KERNEL, source_root=ours).binary == Binary(static, "static cache", log=static.parent / "ptxas.log")
    assert find_binary(KERNEL, source_root=tmp_path / "elsewhere").binary is None


def test_caps_on_files_and_bytes(fake_cuda: Path) -> None:
    for k in range(3):
        fake_binary(fake_cuda / ".triton" / "cache" / f"h{k}" / "other.cubin", "_Z5otherv")
    found = find_binary(KERNEL, max_files=2)
    assert found.files_read == 2 and "stopped after reading 2 files" in found.skipped
    big = fake_binary(fake_cuda / ".triton" / "cache" / "big" / "scale.cubin", KERNEL)
    limited = find_binary(KERNEL, max_bytes=big.stat().st_size - 1)
    assert limited.binary is None and any("over the" in s for s in limited.skipped)


def test_a_search_survives_json(fake_cuda: Path) -> None:
    fake_binary(fake_cuda / ".cupy" / "kernel_cache" / "a_2.cubin", KERNEL, prefix=b"0" * 32)
    for search in (find_binary(KERNEL), find_binary("_Z7missingv")):
        assert BinarySearch.from_json(json.loads(json.dumps(search.to_json()))) == search


def test_explaining_two_sides_end_to_end(fake_cuda: Path, tmp_path: Path) -> None:
    grown_sass = FATBIN_SASS.replace(function_sass(*LOOP), function_sass(*LOOP_GROWN))
    grown_res = RES_USAGE_FATBIN.replace("REG:48 STACK:16 SHARED:2048 LOCAL:8", "REG:64 STACK:24 SHARED:4096 LOCAL:8")
    before = Binary(fake_binary(tmp_path / "a" / "k.cubin", KERNEL), "triton cache")
    after_path = fake_binary(tmp_path / "b" / "k.cubin", KERNEL, res=grown_res, sass=grown_sass)
    log = tmp_path / "b" / "nvcc.log"
    log.write_text(
        f"ptxas info    : Compiling entry function '{KERNEL}' for 'sm_90'\n"
        f"ptxas info    : Function properties for {KERNEL}\n"
        "    24 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
        "ptxas info    : Used 64 registers, used 1 barriers\n"
    )
    after = Binary(after_path, "nvcc cache", log=log)
    diff = explain_kernel(KERNEL, before, after, dynamic_smem=(0, 0), context=1)
    assert diff.name == "scale<4>" or diff.name == KERNEL  # the short name where c++filt exists
    assert diff.before is not None and diff.after is not None and diff.before.arch == diff.after.arch == "sm_90"
    assert diff.after.classes["local store"] == 1 and "local store" not in diff.before.classes
    assert (diff.after.spill_stores, diff.after.barriers, diff.before.spill_stores) == (8, 1, None)
    lines = diff.render_lines(limit=8)
    assert lines[0] == f"{diff.name}: before sm_90 (triton cache); after sm_90 (nvcc cache)"
    assert lines[1] == ("resources: registers 48 -> 64, spill stores ? -> 8 B, spill loads ? -> 8 B, "
                        "stack 16 B -> 24 B, shared 2 KiB -> 4 KiB, barriers ? -> 1")
    assert lines[2] == "SASS +3 -0 instructions (10 -> 13): +1 FFMA, +1 LDG, +1 STL"
    assert lines[3:] == ["  @@ -5,2 +5,5 @@ 0x0040 -> 0x0040", "   LDG.E", "  +LDG.E", "  +FFMA", "  ... 2 more diff lines"]
    assert KernelDiff.from_json(json.loads(json.dumps(diff.to_json()))) == diff
    sm80 = explain_kernel(KERNEL, before, after, arch="sm_80")
    assert sm80.before is not None and sm80.before.registers == 40 and sm80.sass is not None and sm80.sass.identical


def test_a_side_that_cannot_be_read_says_why(fake_cuda: Path, tmp_path: Path) -> None:
    good = Binary(fake_binary(tmp_path / "a" / "k.cubin", KERNEL), "registered path")
    junk = tmp_path / "junk.cubin"
    junk.write_bytes(b"not device code")
    missing = find_binary("_Z7missingv")
    diff = explain_kernel(KERNEL, Binary(junk, "registered path"), good)
    assert diff.before is None and "does not contain device code" in (diff.before_missing or "")
    assert diff.after is not None and diff.sass is None and diff.changes == ()
    lines = diff.render_lines()
    assert lines[0].startswith(f"{diff.name}: before: ") and lines[0].endswith("; after sm_90 (registered path)")
    assert lines[1:] == ["after: registers 48, shared 2 KiB, spills unknown (no build log), stack 16 B, local 8 B",
                         "after: 10 instructions: control 4, global load 1, global store 1, other memory 1, float 1, "
                         "integer 1, ..."]
    gone = explain_kernel(KERNEL, missing, None)
    assert gone.before_missing == missing.reason and gone.after_missing == "no binary given"
    assert explain_kernel(KERNEL, good, good, arch="sm_75").after_missing == (
        f"{good.path} holds {KERNEL} for sm_90, sm_80, not for sm_75")


def test_the_documentation_lists_the_locations_and_classes_as_the_code_has_them() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "diagnose.md").read_text(encoding="utf-8")

    def table(after_heading: str) -> list[list[str]]:
        section = page.split(after_heading, 1)[1].split("\n## ", 1)[0]
        rows = [line for line in section.splitlines() if line.startswith("| ")][2:]  # after the header
        return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]

    assert [row[0] for row in table("## Where a kernel's binary is found")] == [name for name, _ in LOCATIONS]
    assert table("## Instruction classes") == [list(c) for c in CLASSES]


# -- the real toolchain: two versions of a kernel, found in CuPy's and Triton's caches -----------
AXPY = r"""
extern "C" __global__ void axpy(const float* __restrict__ x, float* __restrict__ y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""
# The same kernel with 32 live accumulators over an extra loop: under -maxrregcount=24 it spills.
AXPY_GROWN = r"""
extern "C" __global__ void axpy(const float* __restrict__ x, float* __restrict__ y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float acc[32];
#pragma unroll
  for (int k = 0; k < 32; ++k) acc[k] = x[(i + k * 97) % n];
  for (int r = 0; r < n; r += 64) {
#pragma unroll
    for (int k = 0; k < 32; ++k) acc[k] = a * acc[k] + acc[(k + 7) % 32];
  }
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < 32; ++k) s += acc[k];
  y[i] = s;
}
"""
SHARED_KERNEL = r"""
constexpr int TILE = TILE_SIZE;
template <typename T>
__global__ void tiled(const T* __restrict__ x, T* __restrict__ y, int n) {
  __shared__ T tile[TILE];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x % TILE] = i < n ? x[i] : 0.f;
  __syncthreads();
  if (i < n) y[i] = tile[(threadIdx.x + 1) % TILE];
}
template __global__ void tiled<float>(const float*, float*, int);
"""


@pytest.fixture
def real_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    try:
        find_nvcc()
        find_cuobjdump()
        find_nvdisasm()
    except NvccNotFound as exc:
        pytest.skip(f"needs the CUDA compiler tools (pip install 'pytest-gpuperf[compile]'): {exc}")
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GPU_PERF_CACHE_DIR", str(home / "gpuperf-cache"))
    for name in ("XDG_CACHE_HOME", "CUPY_CACHE_DIR", "TRITON_CACHE_DIR", "TRITON_HOME", "TORCH_EXTENSIONS_DIR"):
        monkeypatch.delenv(name, raising=False)
    return home


def nvcc_cubin(source: str, folder: Path, *flags: str) -> Path:
    import subprocess

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "k.cu").write_text(source)
    out = folder / "k.cubin"
    subprocess.run([str(find_nvcc()), "-cubin", "-arch=sm_90", *flags, str(folder / "k.cu"), "-o", str(out)],
                   check=True, capture_output=True, timeout=300)
    return out


@pytest.mark.build
def test_real_cubins_found_in_cupy_and_triton_caches_are_explained(
    real_tools: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before_cubin = nvcc_cubin(AXPY, tmp_path / "before")
    after_cubin = nvcc_cubin(AXPY_GROWN, tmp_path / "after", "-maxrregcount=24")
    # Each side's binaries where its launcher caches them: CuPy writes a hex digest before the cubin.
    cupy_dir, triton_dir = tmp_path / "cupy", tmp_path / "triton"
    cupy_dir.mkdir()
    payload = before_cubin.read_bytes()
    (cupy_dir / "0123abcd_2.cubin").write_bytes(hashlib.md5(payload).hexdigest().encode() + payload)
    (triton_dir / "HASH123").mkdir(parents=True)
    (triton_dir / "HASH123" / "axpy.cubin").write_bytes(after_cubin.read_bytes())
    (triton_dir / "HASH123" / "axpy.json").write_text('{"name": "axpy", "shared": 0}')

    monkeypatch.setenv("CUPY_CACHE_DIR", str(cupy_dir))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "empty"))
    before = find_binary("axpy")
    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(triton_dir))
    after = find_binary("axpy")
    assert before.binary is not None and before.binary.found_in == "cupy cache" and before.binary.offset == 32
    assert after.binary is not None and after.binary.found_in == "triton cache" and after.confirmed

    diff = explain_kernel("axpy", before, after)
    assert diff.before is not None and diff.after is not None
    assert diff.before.arch == diff.after.arch == "sm_90"
    assert diff.after.registers <= 24
    assert diff.before.stack_bytes == 0 and diff.after.stack_bytes > 0
    assert diff.after.classes.get("local store", 0) > 0 and diff.after.classes.get("local load", 0) > 0
    assert "local store" not in diff.before.classes and "local load" not in diff.before.classes
    assert diff.before.spill_stores is None  # no build log in CuPy's or Triton's cache
    lines = diff.render_lines(limit=8)
    assert lines[0] == "axpy: before sm_90 (cupy cache); after sm_90 (triton cache)"
    assert f"stack 0 B -> {diff.after.stack_bytes} B" in lines[1]
    assert diff.sass is not None and diff.sass.added > diff.sass.removed
    opcodes = dict(diff.sass.opcodes)
    assert opcodes["STL"] > 0 and opcodes["LDL"] > 0 and opcodes["FFMA"] > 0
    assert lines[2].startswith(f"SASS +{diff.sass.added} -{diff.sass.removed} instructions ")
    assert lines[3].startswith("  @@ -1,") and lines[-1].endswith(" more diff lines") and len(lines) == 8
    assert any(line.startswith("+") for line in diff.sass.lines) and diff.sass.omitted > 0


@pytest.mark.build
def test_real_libraries_of_two_checkouts_in_the_nvcc_cache(real_tools: Path, tmp_path: Path) -> None:
    kernel = "_Z5tiledIfEvPKT_PS0_i"  # tiled<float>: one name on both sides, as the driver gives it
    checkouts = {}
    for side, tile in (("base", 256), ("head", 768)):
        source = tmp_path / side / "kernels" / "tiled.cu"
        source.parent.mkdir(parents=True)
        source.write_text(SHARED_KERNEL.replace("TILE_SIZE", str(tile)))
        build_shared_library([source], arch="sm_90", name="tiled")
        checkouts[side] = tmp_path / side
    base = find_binary(kernel, source_root=checkouts["base"])
    head = find_binary(kernel, source_root=checkouts["head"])
    assert base.binary is not None and head.binary is not None and base.binary != head.binary
    assert base.binary.found_in == head.binary.found_in == "nvcc cache"
    assert base.binary.log is not None and base.binary.log.name == "nvcc.log"
    assert find_binary(kernel).binary == head.binary  # the newest build, without a checkout to pick
    assert find_binary(kernel, source_root=tmp_path / "elsewhere").binary is None

    diff = explain_kernel(kernel, base, head, dynamic_smem=(0, 4096))
    assert diff.before is not None and diff.after is not None
    # Spills and barriers come from each build's nvcc.log.
    assert (diff.before.spill_stores, diff.before.barriers, diff.after.spill_stores, diff.after.barriers) == (0, 1, 0, 1)
    # cuobjdump's static shared memory: the tile, and on sm_90 the 1 KiB reserved beside it.
    assert (diff.before.shared_bytes, diff.after.shared_bytes) == (1024 + 1024, 3072 + 1024)
    lines = diff.render_lines(limit=8)
    assert lines[0].endswith(": before sm_90 (nvcc cache); after sm_90 (nvcc cache)")
    assert lines[0].startswith(("tiled<float>:", f"{kernel}:"))  # demangled where c++filt is installed
    assert lines[1] == "resources: shared 2 KiB -> 4 KiB, dynamic shared 0 B -> 4 KiB" or lines[1].startswith(
        "resources: registers ")
    assert "shared 2 KiB -> 4 KiB, dynamic shared 0 B -> 4 KiB" in lines[1]
    assert diff.sass is not None and not diff.sass.identical  # % 768 is not a mask like % 256
    assert lines[2] == diff.sass.summary() and len(lines) == 8
