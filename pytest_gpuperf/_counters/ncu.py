"""Finding and running Nsight Compute (``ncu``) on one target function, in a subprocess.

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

Where counters cannot be read, ``CountersUnavailable`` carries the reason (ncu missing, or
counter access refused); the ``gpu_counters`` fixture turns it into a skip.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_gpuperf._counters.metrics import DEFAULT_METRICS, CounterResult, parse_ncu_csv

NCU_ENV = "NCU"
NCU_FALLBACKS = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu")

DEVICE_ENV = "GPU_PERF_COUNTERS_DEVICE"  # the parent's CUDA ordinal of the GPU profiled (for the target's information)

DEFAULT_TIMEOUT_S = 600.0

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
