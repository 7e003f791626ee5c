"""Hardware counters of single kernel launches through Nsight Compute (``ncu``).

Counters say *why* a kernel is fast: sectors fetched per load request, L1<->L2 bytes against
the ideal, bank conflicts, instructions per inner-loop iteration. They are counts, not times,
so they hardly move from run to run, and a test can gate the mechanism of an optimisation
("the rearranged weights need at most 4 sectors per request") instead of only its speed.

How a profile is taken: ``profile(target, args, kernel_regex=...)`` runs, in a subprocess,

    ncu --csv --page raw --print-units base --clock-control none --target-processes all
        --kernel-name-base function --print-kernel-base function
        --kernel-name regex:<kernel_regex> --launch-skip N --launch-count 1
        --metrics <metrics> python -c <runner> module:function '<args as JSON>'

The target function (``"package.module:function"``) builds its inputs, warms up if it
likes, and launches; ncu profiles the first launch whose name (ncu's ``function`` name: no
parameters, no template arguments) matches ``kernel_regex`` after ``launch_skip`` matching
launches, replaying it once per counter pass. ``--clock-control none`` leaves the GPU's
clocks alone (never lock or change them on a shared machine); ncu's default cache control
flushes the caches before every pass, so each pass starts cold. Counters hardly depend on the
clock; ``t/us`` does, and under ncu it is the time of one replayed, cold launch.

The columns of the LSU course's hw01 output (the qkv family's design note, kernels/qkv/DESIGN.md), and how
each is computed from the counters (``CounterResult.derived``):

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

Where counters cannot be read, ``CountersUnavailable`` carries the reason (ncu missing, or
counter access refused); the ``gpu_counters`` fixture turns it into a skip.
"""

from __future__ import annotations

import csv
import glob
import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

NCU_ENV = "NCU"
NCU_FALLBACKS = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu")
DEVICE_ENV = "GPU_PERF_COUNTERS_DEVICE"  # the parent's CUDA ordinal of the GPU profiled (for the target's information)
SECTOR_BYTES = 32
DEFAULT_TIMEOUT_S = 600.0

# -- metric names (Nsight Compute 2019.5+; checked against the 2025.3 metric names) ---------
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

# The hw01 columns in the note's order, then this module's additions.
HW01_COLUMNS = ("/itr", "%", "SW", "BXW", "N-Rd", "N-Wr", "GB/s", "t/us")
EXTRA_COLUMNS = ("SW/128B", "SBXW", "DRAM GB/s")

# Lines of ncu's output that mean the counters cannot be read on this machine or by this user.
PERMISSION_MARKERS = (
    "ERR_NVGPUCTRPERM",
    "does not have permission to access NVIDIA GPU Performance Counters",
    "Failed to initialize the profiler",
    "LibraryNotLoaded",
    "Profiling is not supported on this device",
    "not supported on this device",
)
ENABLE_HINT = (
    "enable GPU performance counters for non-admin users with the nvidia kernel-module option "
    "NVreg_RestrictProfilingToAdminUsers=0 (a line 'options nvidia NVreg_RestrictProfilingToAdminUsers=0' "
    "in /etc/modprobe.d/, then reload the driver or reboot), or run as root or a user with CAP_SYS_ADMIN "
    "(containers: --cap-add SYS_ADMIN); sandboxed runtimes such as gVisor expose no counters. "
    "See https://developer.nvidia.com/ERR_NVGPUCTRPERM"
)

# The target process: import module:function and call it with the JSON keyword arguments.
_RUNNER = (
    "import importlib, json, sys\n"
    "mod, _, fn = sys.argv[1].partition(':')\n"
    "getattr(importlib.import_module(mod), fn)(**json.loads(sys.argv[2]))\n"
)


def _visible_devices(ordinal: int, current: str | None) -> str:
    """CUDA_VISIBLE_DEVICES that makes CUDA ordinal ``ordinal`` (of this process) the target's device 0."""
    if current:
        entries = [e.strip() for e in current.split(",") if e.strip()]
        if ordinal < len(entries):
            return entries[ordinal]
    return str(ordinal)


class CountersUnavailable(Exception):
    """Counters cannot be read here (ncu missing, or access refused); ``reason`` says why and what to do."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class CounterError(RuntimeError):
    """ncu ran but the profile failed (target error, no matching launch, unreadable output)."""


# -- finding ncu ----------------------------------------------------------------------------
def find_ncu() -> str:
    """Path of ``ncu``: $NCU, then PATH, then /usr/local/cuda/bin, then /opt/nvidia/nsight-compute/*/.

    Raises CountersUnavailable naming every place looked in.
    """
    explicit = os.environ.get(NCU_ENV, "").strip()
    if explicit:
        path = shutil.which(explicit) or (
            explicit if os.access(explicit, os.X_OK) and os.path.isfile(explicit) else None
        )
        if path:
            return path
        raise CountersUnavailable(f"${NCU_ENV} is set to {explicit!r}, which is not an executable ncu")
    on_path = shutil.which("ncu")
    if on_path:
        return on_path
    for pattern in NCU_FALLBACKS:
        for candidate in sorted(glob.glob(pattern), reverse=True):  # newest Nsight Compute first
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
    raise CountersUnavailable(
        "Nsight Compute (ncu) not found: set $NCU to its path or put it on PATH "
        f"(also looked in {', '.join(NCU_FALLBACKS)})"
    )


# -- parsing ncu's CSV ---------------------------------------------------------------------
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


# -- results and derived columns ---------------------------------------------------------------
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
        """The hw01 columns and this module's additions, by column name (see the module docstring)."""
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


def _fmt(value: float | None, column: str) -> str:
    if value is None:
        return "-"
    if column in ("%", "GB/s", "DRAM GB/s", "t/us") or abs(value) >= 100:
        return f"{value:.0f}" if abs(value) >= 10 else f"{value:.1f}"
    return f"{value:.2f}" if abs(value) < 10 else f"{value:.1f}"


def format_table(
    rows: Sequence[tuple[str, Mapping[str, float | None]]], columns: Sequence[str] = HW01_COLUMNS + EXTRA_COLUMNS
) -> str:
    """A plain-text table: one row per ``(label, derived columns)``."""
    table = [["", *columns]] + [[label, *(_fmt(values.get(c), c) for c in columns)] for label, values in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    return "\n".join(
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(r, widths, strict=False))
        ).rstrip()
        for r in table
    )


# -- running ncu ---------------------------------------------------------------------------
def ncu_command(
    ncu: str,
    target: str,
    args: Mapping[str, Any],
    *,
    kernel_regex: str,
    metrics: Sequence[str],
    launch_skip: int = 0,
    launch_count: int = 1,
    python: str | None = None,
) -> list[str]:
    """The ncu command line that profiles ``launch_count`` matching launches of ``target(**args)``."""
    if ":" not in target:
        raise ValueError(f"target: expected 'package.module:function', got {target!r}")
    if launch_skip < 0 or launch_count < 1:
        raise ValueError(f"launch_skip must be >= 0 and launch_count >= 1, got {launch_skip} and {launch_count}")
    re.compile(kernel_regex)  # a bad pattern fails here, with Python's message, not inside ncu
    return [
        ncu,
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        "--clock-control",
        "none",
        "--target-processes",
        "all",
        "--kernel-name-base",
        "function",
        "--print-kernel-base",
        "function",
        "--kernel-name",
        f"regex:{kernel_regex}",
        "--launch-skip",
        str(launch_skip),
        "--launch-count",
        str(launch_count),
        "--metrics",
        ",".join(metrics),
        python or sys.executable,
        "-c",
        _RUNNER,
        target,
        json.dumps(dict(args), sort_keys=True),
    ]


def unavailable_reason(output: str) -> str | None:
    """The skip reason when ncu's output says the counters cannot be read here, else None."""
    for line in output.splitlines():
        if any(marker.lower() in line.lower() for marker in PERMISSION_MARKERS):
            text = line.strip().removeprefix("==ERROR==").strip()
            return f"ncu cannot read this GPU's performance counters ({text[:300]}); {ENABLE_HINT}"
    return None


def _missing_metrics(output: str, metrics: Sequence[str]) -> list[str]:
    """Requested metrics that ncu's error lines name (unknown on this GPU or this ncu)."""
    errors = [line for line in output.splitlines() if "ERROR" in line or "Failed" in line or "invalid" in line.lower()]
    return [m for m in metrics if any(m in line or m.rsplit(".", 1)[0] in line for line in errors)]


def profile_launches(
    target: str,
    args: Mapping[str, Any] | None = None,
    *,
    kernel_regex: str,
    launch_count: int = 1,
    launch_skip: int = 0,
    metrics: Sequence[str] = DEFAULT_METRICS,
    ncu: str | None = None,
    cwd: str | os.PathLike[str] | None = None,
    device: int | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> list[CounterResult]:
    """Profile ``launch_count`` launches matching ``kernel_regex`` (after ``launch_skip``) of ``target(**args)``.

    ``cwd`` (default: the current directory) is put first on the target's PYTHONPATH, so
    ``target`` may live in the project. Results come in launch order. A metric this ncu or
    GPU does not know is dropped after one retry and listed in ``CounterResult.missing``.
    Raises CountersUnavailable (no ncu, counters refused) or CounterError (anything else).
    """
    ncu = ncu or find_ncu()
    workdir = Path(cwd or os.getcwd())
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(workdir), env.get("PYTHONPATH", "")) if p)
    if device is not None:  # the target sees only that GPU, as its device 0, whatever library it uses
        env["CUDA_VISIBLE_DEVICES"] = _visible_devices(device, os.environ.get("CUDA_VISIBLE_DEVICES"))
        env[DEVICE_ENV] = str(device)
    wanted = list(dict.fromkeys(metrics))
    dropped: list[str] = []
    for attempt in (1, 2):
        command = ncu_command(
            ncu,
            target,
            args or {},
            kernel_regex=kernel_regex,
            metrics=wanted,
            launch_skip=launch_skip,
            launch_count=launch_count,
        )
        try:
            done = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout_s)
        except FileNotFoundError as exc:
            raise CountersUnavailable(f"ncu could not be started ({exc}); set ${NCU_ENV} or PATH") from None
        except subprocess.TimeoutExpired:
            raise CounterError(f"ncu did not finish within {timeout_s:g} s: {' '.join(command[:-3])} ...") from None
        output = (done.stdout or "") + "\n" + (done.stderr or "")
        reason = unavailable_reason(output)
        if reason:
            raise CountersUnavailable(reason)
        rows = parse_ncu_csv(done.stdout or "")
        if rows and done.returncode == 0:
            break
        missing = _missing_metrics(output, wanted) if attempt == 1 else []
        if missing and len(missing) < len(wanted):
            dropped += missing
            wanted = [m for m in wanted if m not in missing]
            continue
        tail = "\n".join(output.strip().splitlines()[-25:])
        if not rows and done.returncode == 0:
            raise CounterError(
                f"ncu profiled no launch of a kernel matching regex {kernel_regex!r} (ncu's 'function' name: no "
                f"parameters or template arguments; launch_skip={launch_skip}) in {target}; ncu said:\n{tail}"
            )
        raise CounterError(f"ncu exited with status {done.returncode} profiling {target}; last lines:\n{tail}")
    results = [
        CounterResult(
            kernel=row["kernel"],
            metrics=row["metrics"],
            launch_id=row["id"],
            block=row["block"],
            grid=row["grid"],
            device=row["device"],
            missing=tuple(dropped),
            command=tuple(command),
        )
        for row in rows[:launch_count]  # ncu profiles no more; a longer CSV (an imported report) is cut
    ]
    if len(results) < launch_count:
        raise CounterError(
            f"ncu profiled {len(results)} launch(es) matching {kernel_regex!r} in {target}, expected {launch_count}"
        )
    return results


def profile(
    target: str,
    args: Mapping[str, Any] | None = None,
    *,
    kernel_regex: str,
    launch_skip: int = 0,
    metrics: Sequence[str] = DEFAULT_METRICS,
    ideal_read_bytes: float | None = None,
    ideal_write_bytes: float | None = None,
    iterations: float | None = None,
    ncu: str | None = None,
    cwd: str | os.PathLike[str] | None = None,
    device: int | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> CounterResult:
    """Counters of the first launch matching ``kernel_regex`` after ``launch_skip`` such launches of ``target(**args)``.

    ``ideal_read_bytes`` / ``ideal_write_bytes`` (every input byte read once, every output
    byte written once) and ``iterations`` (inner-loop iterations of the whole launch) make
    the N-Rd, N-Wr and /itr columns; without them those are None.
    """
    (result,) = profile_launches(
        target,
        args,
        kernel_regex=kernel_regex,
        launch_count=1,
        launch_skip=launch_skip,
        metrics=metrics,
        ncu=ncu,
        cwd=cwd,
        device=device,
        timeout_s=timeout_s,
    )[:1]
    return result.with_ideal(read_bytes=ideal_read_bytes, write_bytes=ideal_write_bytes, iterations=iterations)
