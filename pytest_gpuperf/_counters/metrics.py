"""Nsight Compute's metrics: the names read, ncu's CSV in base units, and what one launch's
counters derive.

The figures a launch's counters give (``CounterResult.derived``), named as the qkv family's design
note (kernels/qkv/DESIGN.md) names its table's columns, and how each is computed:

``/itr``   thread-level SASS instructions executed (``smsp__thread_inst_executed.sum``) per
           inner-loop iteration, the iteration count given by the caller (``iterations``;
           for qkv one multiply-add: d_ws x d_qkv x d_model). Counting thread instructions
           (not warp instructions x 32) keeps idle lanes out: 3 is a scalar kernel's ideal
           (two loads and an FMA); a kernel that reuses registers goes below 2.
``%``      ``smsp__issue_active.avg.pct_of_peak_sustained_active``: the share of active
           cycles in which a warp scheduler issued an instruction.
``SW``     global-load sectors per request: ``l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum
           / l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum`` (one request per warp-level
           load instruction). 4 is what 32 consecutive 4-byte loads need; 32 is one sector
           per thread.
``SW/128B`` the same sectors per 128 bytes the threads asked for
           (``sm__sass_data_bytes_mem_global_op_ld.sum``, SASS-counted): equal to SW for
           4-byte loads by full warps, and the comparable figure for wider loads, where a
           fully used 16-byte-per-thread request counts 16 sectors (its SW is 16, its SW/128B
           is 4). Gate scalar-load kernels on SW (the note's column), vector-load ones on
           SW/128B.
``BXW``    L1 data-bank conflicts of global loads per request
           (``l1tex__data_bank_conflicts_pipe_lsu_mem_global_op_ld.sum`` / requests).
``SBXW``   shared-memory load bank conflicts per shared load instruction
           (``l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum /
           smsp__inst_executed_op_shared_ld.sum``); None when there are no shared loads.
``N-Rd``   bytes L2 served to the L1s, ``lts__t_sectors_srcunit_tex_op_read.sum x 32``,
           divided by the caller's ideal (``ideal_read_bytes``: every input byte once).
``N-Wr``   ``lts__t_sectors_srcunit_tex_op_write.sum x 32 / ideal_write_bytes``.
``GB/s``   L1<->L2 bytes (read + write sectors x 32) per second of ``gpu__time_duration``.
``DRAM GB/s`` ``dram__bytes.sum.per_second``, achieved device-memory bandwidth.
``t/us``   ``gpu__time_duration.sum``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

SECTOR_BYTES = 32
GLOBAL_LD_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
GLOBAL_LD_REQUESTS = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"
GLOBAL_LD_THREAD_BYTES = "sm__sass_data_bytes_mem_global_op_ld.sum"
GLOBAL_LD_BANK_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_global_op_ld.sum"
SHARED_LD_BANK_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"
SHARED_LD_INSTRUCTIONS = "smsp__inst_executed_op_shared_ld.sum"
L2_READ_SECTORS = "lts__t_sectors_srcunit_tex_op_read.sum"
L2_WRITE_SECTORS = "lts__t_sectors_srcunit_tex_op_write.sum"
DRAM_BYTES = "dram__bytes.sum"
DRAM_BYTES_PER_SECOND = "dram__bytes.sum.per_second"
THREAD_INSTRUCTIONS = "smsp__thread_inst_executed.sum"
WARP_INSTRUCTIONS = "smsp__inst_executed.sum"
ISSUE_ACTIVE_PCT = "smsp__issue_active.avg.pct_of_peak_sustained_active"
DURATION = "gpu__time_duration.sum"

DEFAULT_METRICS: tuple[str, ...] = (
    GLOBAL_LD_SECTORS,
    GLOBAL_LD_REQUESTS,
    GLOBAL_LD_THREAD_BYTES,
    GLOBAL_LD_BANK_CONFLICTS,
    SHARED_LD_BANK_CONFLICTS,
    SHARED_LD_INSTRUCTIONS,
    L2_READ_SECTORS,
    L2_WRITE_SECTORS,
    DRAM_BYTES,
    DRAM_BYTES_PER_SECOND,
    THREAD_INSTRUCTIONS,
    WARP_INSTRUCTIONS,
    ISSUE_ACTIVE_PCT,
    DURATION,
)

_PREFIX = {
    "p": 1e-12,
    "n": 1e-9,
    "u": 1e-6,
    "\u00b5": 1e-6,
    "m": 1e-3,
    "K": 1e3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
}

_SHORT_TIME = {"ps": "psecond", "ns": "nsecond", "us": "usecond", "ms": "msecond", "s": "second"}

_BASE_UNITS = ("second", "byte", "hz", "Hz", "sector", "request", "inst", "cycle", "warp", "thread", "wavefront")


def to_base_unit(value: float, unit: str) -> tuple[float, str]:
    """``(2.5, "Gbyte/second")`` -> ``(2.5e9, "byte/second")``; "usecond" -> "second"; others unchanged.

    ncu prints base units with ``--print-units base``; this also reads its default
    auto-scaled units (msecond, Kbyte, Gbyte/second, ...) so a CSV from either works.
    """
    num, slash, den = unit.partition("/")
    # `--print-units base` abbreviates time ("ns" on the H200 with Nsight Compute 2025.3).
    num, den = _SHORT_TIME.get(num, num), _SHORT_TIME.get(den, den)
    factor = 1.0
    parts = []
    for i, part in enumerate((num, den) if slash else (num,)):
        scale = 1.0
        for base in _BASE_UNITS:
            if part.endswith(base) and len(part) == len(base) + 1 and part[0] in _PREFIX:
                scale, part = _PREFIX[part[0]], base
                break
        factor = factor * scale if i == 0 else factor / scale
        parts.append(part)
    return value * factor, "/".join(parts)


def _number(text: str) -> float | None:
    cleaned = text.strip().replace(",", "")
    if cleaned in ("", "n/a", "N/A", "nan"):
        return None
    try:
        return float(cleaned)
    except ValueError:
        return None


@dataclass(frozen=True)
class Metric:
    """One metric of one launch, in base units (bytes, seconds, byte/second; % stays %)."""

    value: float | None
    unit: str
    raw: str = ""  # the text ncu printed, with its unit

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "unit": self.unit}


IDENTITY_COLUMNS = (
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
)


def parse_ncu_csv(text: str) -> list[dict[str, Any]]:
    """Rows of ncu's ``--csv --page raw`` output: ``{"id", "kernel", "block", "grid", "device", "metrics"}``.

    The raw page is one header row (identity columns, then metric names), one row of units
    and one row per profiled launch. ncu's own ``==PROF==``/``==WARNING==`` lines and the
    target's output are mixed into stdout; only lines that start with a double quote are CSV.
    """
    lines = [line for line in text.splitlines() if line.startswith('"')]
    rows = [row for row in csv.reader(io.StringIO("\n".join(lines))) if row]
    header_at = next((i for i, row in enumerate(rows) if row and row[0] == "ID"), None)
    if header_at is None:
        return []
    header = rows[header_at]
    body = rows[header_at + 1 :]
    units: list[str] = [""] * len(header)
    if body and not body[0][0].strip().isdigit():  # the units row has an empty ID cell
        units = body[0] + [""] * (len(header) - len(body[0]))
        body = body[1:]
    results = []
    for row in body:
        if not row or not row[0].strip().isdigit():
            continue
        cells = dict(zip(header, row, strict=False))
        metrics: dict[str, Metric] = {}
        for i, name in enumerate(header):
            if name in IDENTITY_COLUMNS or i >= len(row):
                continue
            value = _number(row[i])
            unit = units[i].strip() if i < len(units) else ""
            if value is not None and unit:
                value, base = to_base_unit(value, unit)
            else:
                base = unit
            metrics[name] = Metric(value, base, (row[i] + (" " + unit if unit else "")).strip())
        results.append(
            {
                "id": int(row[0]),
                "kernel": cells.get("Kernel Name", ""),
                "block": cells.get("Block Size", ""),
                "grid": cells.get("Grid Size", ""),
                "device": cells.get("Device", ""),
                "metrics": metrics,
            }
        )
    return results


@dataclass(frozen=True)
class CounterResult:
    """The counters of one profiled launch, and the hw01 columns derived from them."""

    kernel: str
    metrics: Mapping[str, Metric]
    launch_id: int = 0
    block: str = ""
    grid: str = ""
    device: str = ""
    ideal_read_bytes: float | None = None
    ideal_write_bytes: float | None = None
    iterations: float | None = None
    missing: tuple[str, ...] = ()  # requested metrics this ncu could not collect
    command: tuple[str, ...] = field(default=(), compare=False)

    def with_ideal(
        self, *, read_bytes: float | None = None, write_bytes: float | None = None, iterations: float | None = None
    ) -> CounterResult:
        """This result with the ideal traffic and iteration count the normalised columns divide by."""
        return replace(self, ideal_read_bytes=read_bytes, ideal_write_bytes=write_bytes, iterations=iterations)

    def get(self, name: str) -> float | None:
        """The value of metric ``name`` in base units, or None when it was not collected."""
        m = self.metrics.get(name)
        return None if m is None else m.value

    def value(self, name: str) -> float:
        """The value of metric ``name``; KeyError naming what was collected when it is missing."""
        v = self.get(name)
        if v is None:
            raise KeyError(
                f"metric {name!r} was not collected for {self.kernel} (have: {', '.join(sorted(self.metrics))})"
            )
        return v

    # derived columns: None when an input is missing or the denominator is zero
    @property
    def sectors_per_request(self) -> float | None:
        return _ratio(self.get(GLOBAL_LD_SECTORS), self.get(GLOBAL_LD_REQUESTS))

    @property
    def sectors_per_128_bytes(self) -> float | None:
        bytes_asked = self.get(GLOBAL_LD_THREAD_BYTES)
        return _ratio(self.get(GLOBAL_LD_SECTORS), None if bytes_asked is None else bytes_asked / 128.0)

    @property
    def global_bank_conflicts_per_request(self) -> float | None:
        return _ratio(self.get(GLOBAL_LD_BANK_CONFLICTS), self.get(GLOBAL_LD_REQUESTS))

    @property
    def shared_bank_conflicts_per_request(self) -> float | None:
        return _ratio(self.get(SHARED_LD_BANK_CONFLICTS), self.get(SHARED_LD_INSTRUCTIONS))

    @property
    def l2_read_bytes(self) -> float | None:
        s = self.get(L2_READ_SECTORS)
        return None if s is None else s * SECTOR_BYTES

    @property
    def l2_write_bytes(self) -> float | None:
        s = self.get(L2_WRITE_SECTORS)
        return None if s is None else s * SECTOR_BYTES

    @property
    def n_rd(self) -> float | None:
        return _ratio(self.l2_read_bytes, self.ideal_read_bytes)

    @property
    def n_wr(self) -> float | None:
        return _ratio(self.l2_write_bytes, self.ideal_write_bytes)

    @property
    def duration_s(self) -> float | None:
        return self.get(DURATION)

    @property
    def l1_l2_bytes_per_second(self) -> float | None:
        rd, wr = self.l2_read_bytes, self.l2_write_bytes
        return None if rd is None or wr is None else _ratio(rd + wr, self.duration_s)

    @property
    def dram_bytes_per_second(self) -> float | None:
        direct = self.get(DRAM_BYTES_PER_SECOND)
        return direct if direct is not None else _ratio(self.get(DRAM_BYTES), self.duration_s)

    @property
    def instructions_per_iteration(self) -> float | None:
        return _ratio(self.get(THREAD_INSTRUCTIONS), self.iterations)

    @property
    def issue_active_pct(self) -> float | None:
        return self.get(ISSUE_ACTIVE_PCT)

    def derived(self) -> dict[str, float | None]:
        """The derived figures by name (see the module docstring)."""
        gbps = self.l1_l2_bytes_per_second
        dram = self.dram_bytes_per_second
        t = self.duration_s
        return {
            "/itr": self.instructions_per_iteration,
            "%": self.issue_active_pct,
            "SW": self.sectors_per_request,
            "BXW": self.global_bank_conflicts_per_request,
            "N-Rd": self.n_rd,
            "N-Wr": self.n_wr,
            "GB/s": None if gbps is None else gbps / 1e9,
            "t/us": None if t is None else t * 1e6,
            "SW/128B": self.sectors_per_128_bytes,
            "SBXW": self.shared_bank_conflicts_per_request,
            "DRAM GB/s": None if dram is None else dram / 1e9,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "launch_id": self.launch_id,
            "block": self.block,
            "grid": self.grid,
            "device": self.device,
            "metrics": {name: m.to_json() for name, m in sorted(self.metrics.items())},
            "derived": self.derived(),
            "ideal_read_bytes": self.ideal_read_bytes,
            "ideal_write_bytes": self.ideal_write_bytes,
            "iterations": self.iterations,
            "missing_metrics": list(self.missing),
        }


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den == 0:
        return None
    return num / den
