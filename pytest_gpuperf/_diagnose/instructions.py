"""One kernel's SASS as instructions: ``cuobjdump -sass`` text split per architecture and function,
each instruction read into its opcode and operands, normalised for comparison, and sorted into a
small table of classes by opcode.

The classes (:data:`CLASSES`) are chosen by the opcode's base (``LDG`` of ``LDG.E.128.CONSTANT``);
an opcode of the uniform datapath (``UIADD3``, ``ULDC``) falls in the class of its vector namesake.
An opcode the table does not name counts as ``other``.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Iterable, Mapping

from pytest_gpuperf._compile.kernel_report import split_sass

__all__ = [
    "CLASSES",
    "Instruction",
    "class_counts",
    "classify",
    "normalise",
    "parse_instructions",
    "sass_by_arch",
]

# (class, what it holds), in the order reports list them.
CLASSES: tuple[tuple[str, str], ...] = (
    ("mma", "tensor-core matrix multiply: every opcode ending in MMA (HMMA, HGMMA, IMMA, DMMA, QGMMA, UTCHMMA)"),
    ("tma/bulk", "TMA and bulk copies and cp.async: UTMA*, UBLK*, LDGSTS, LDGDEPBAR"),
    ("global load", "LDG"),
    ("global store", "STG"),
    ("shared load", "LDS, LDSM"),
    ("shared store", "STS, STSM"),
    ("local load", "LDL: local memory, where spilled registers are reloaded from"),
    ("local store", "STL: local memory, where registers spill to"),
    ("atomic", "ATOM, ATOMG, ATOMS, RED, REDG, REDAS"),
    ("other memory", "generic LD and ST, constant loads (LDC, ULDC), cache control, textures and surfaces"),
    ("control", "BRA, BRX, JMP, CALL, RET, EXIT, BSSY, BSYNC, BREAK, ELECT, ..."),
    ("sync", "BAR, SYNCS (mbarriers), MEMBAR, FENCE, DEPBAR, WARPSYNC, WARPGROUP, ERRBAR, CGA barriers, ..."),
    ("float", "FP32, FP16x2 and FP64 arithmetic, compares and conversions: FFMA, FADD, HFMA2, DFMA, MUFU, F2F, I2F"),
    ("integer", "integer and logic arithmetic and compares: IMAD, IADD3, ISETP, LOP3, SHF, LEA, PRMT, VIADD"),
    ("other", "moves, special registers, shuffles, votes, NOP and any opcode not named above"),
)
CLASS_NAMES: tuple[str, ...] = tuple(name for name, _ in CLASSES)

_OPCODES_BY_CLASS: Mapping[str, str] = {
    "tma/bulk": "LDGSTS LDGDEPBAR",
    "global load": "LDG",
    "global store": "STG",
    "shared load": "LDS LDSM",
    "shared store": "STS STSM",
    "local load": "LDL",
    "local store": "STL",
    "atomic": "ATOM ATOMG ATOMS RED REDG REDAS",
    "other memory": "LD ST LDC CCTL CCTLL SULD SUST SUATOM SURED TEX TLD TLD4 TXQ TMML",
    "control": "BRA BRX BRXU JMP JMX JMXU CALL RET EXIT BSSY BSYNC BREAK BMOV BPT KILL YIELD RTT ELECT ENDCOLLECTIVE",
    "sync": "BAR SYNCS MEMBAR FENCE DEPBAR WARPSYNC WARPGROUP ERRBAR CGAERRBAR ARRIVES NANOSLEEP UTCBAR ACQBULK",
    "float": (
        "FADD FADD32I FMUL FMUL32I FFMA FFMA32I FMNMX FSET FSETP FSEL FCHK FRND FSWZADD MUFU FADD2 FMUL2 FFMA2 "
        "HADD2 HADD2_32I HMUL2 HMUL2_32I HFMA2 HFMA2_32I HMNMX2 HSET2 HSETP2 DADD DMUL DFMA DMNMX DSET DSETP "
        "F2F F2I I2F F2FP I2FP F2IP"
    ),
    "integer": (
        "IADD IADD3 IADD32I IMAD IMUL IMNMX IABS ISETP ISET ISCADD LOP LOP3 LOP32I PLOP3 SHF SHL SHR LEA PRMT SEL "
        "POPC FLO BREV BMSK SGXT IDP VIADD VIADDMNMX VIMNMX VIMNMX3 VABSDIFF VABSDIFF4 I2I I2IP REDUX"
    ),
}
_BY_OPCODE: Mapping[str, str] = {op: cls for cls, ops in _OPCODES_BY_CLASS.items() for op in ops.split()}


def classify(opcode: str) -> str:
    """The class (one of :data:`CLASSES`) of an opcode, with or without its modifiers."""
    base = opcode.split(".", 1)[0]
    if base.endswith("MMA"):
        return "mma"
    if base.startswith(("UTMA", "UBLK")):
        return "tma/bulk"
    if base.startswith(("CGABAR", "UCGABAR")):
        return "sync"
    if base in _BY_OPCODE:
        return _BY_OPCODE[base]
    if base.startswith("U") and base[1:] in _BY_OPCODE:  # the uniform datapath
        return _BY_OPCODE[base[1:]]
    return "other"


@dataclasses.dataclass(frozen=True)
class Instruction:
    """One SASS instruction: ``@!P0 LDG.E.128 R4, desc[UR4][R2.64]`` at ``address``."""

    address: int
    guard: str  # the predicate guard ("@!P0"), or ""
    opcode: str  # with its modifiers: "LDG.E.128"
    operands: str

    @property
    def base(self) -> str:
        """The opcode without modifiers: ``LDG``."""
        return self.opcode.split(".", 1)[0]


_LINE_RE = re.compile(r"^\s*/\*([0-9a-fA-F]{4,})\*/\s+([^;]*?)\s*;")
_GUARD_RE = re.compile(r"^(@!?U?P(?:T|\d+))\s+")


def parse_instructions(function_sass: str, *, padding: bool = False) -> list[Instruction]:
    """The instructions of one function's ``cuobjdump -sass`` (or ``nvdisasm``) text, in order.
    Without ``padding``, the NOPs after the last other instruction are left out: they pad the
    code to an alignment and come and go with its length."""
    found: list[Instruction] = []
    for line in function_sass.splitlines():
        match = _LINE_RE.match(line)
        if not match:
            continue
        text = match.group(2).strip()
        guard = _GUARD_RE.match(text)
        if guard:
            text = text[guard.end() :]
        opcode, _, operands = text.partition(" ")
        found.append(Instruction(int(match.group(1), 16), guard.group(1) if guard else "", opcode, operands.strip()))
    if not padding:
        while found and found[-1].base == "NOP":
            found.pop()
    return found


def class_counts(instructions: Iterable[Instruction]) -> dict[str, int]:
    """Instructions per class, in the order of :data:`CLASSES`, classes with none left out."""
    counts = Counter(classify(i.opcode) for i in instructions)
    return {name: counts[name] for name in CLASS_NAMES if counts[name]}


# Branch targets and labels change whenever code moves; operands of these opcodes that are
# addresses are replaced by "<target>".
_TARGET_OPCODES = frozenset({"BRA", "BRX", "BRXU", "JMP", "JMX", "JMXU", "CALL", "RET", "BSSY", "SSY", "PBK", "PCNT"})
_HEX_RE = re.compile(r"\b0x[0-9a-fA-F]+\b")
_LABEL_RE = re.compile(r"`\(\.L_x_\d+\)")
_REUSE_RE = re.compile(r"\.reuse\b")
_REGISTER_RE = re.compile(r"\b(UR|R|UP|P|B)\d+\b")


def normalise(instruction: Instruction, *, operands: bool = False, registers: bool = False) -> str:
    """The instruction as the SASS diff compares it: its opcode with modifiers and, with
    ``operands``, its guard and operands, without operand-reuse flags, with branch targets and
    labels as ``<target>`` and, unless ``registers``, register numbers dropped (``R12`` -> ``R``)."""
    if not operands:
        return instruction.opcode
    text = _REUSE_RE.sub("", instruction.operands)
    text = _LABEL_RE.sub("<target>", text)
    if instruction.base in _TARGET_OPCODES:
        text = _HEX_RE.sub("<target>", text)
    guard = instruction.guard
    if not registers:
        text = _REGISTER_RE.sub(r"\1", text)
        guard = _REGISTER_RE.sub(r"\1", guard)
    return " ".join(part for part in (guard, instruction.opcode, text) if part)


_ARCH_RE = re.compile(r"^\s*code for (sm_\w+)\s*$")


def sass_by_arch(text: str) -> dict[str, dict[str, str]]:
    """``cuobjdump -sass`` output of a cubin, fatbin or library split per architecture, then per
    function (mangled name -> its SASS). A binary holding one kernel twice for one architecture
    (two translation units) keeps the first."""
    chunks: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        match = _ARCH_RE.match(line)
        if match:
            chunks.append((match.group(1), []))
        elif chunks:
            chunks[-1][1].append(line)
    result: dict[str, dict[str, str]] = {}
    for arch, lines in chunks:
        functions = result.setdefault(arch, {})
        for name, sass in split_sass("\n".join(lines)).items():
            functions.setdefault(name, sass)
    return result
