"""What every family's ``sweep.py`` shares: its command line's ``--out``, the GPU line it prints
first, and the JSON file it writes, which names the GPU, the time (UTC) and the commit of this
checkout, so a sweep's figures can be cited by date, GPU and commit as a test run's are.

A sweep times each variant and launch shape on its own (``pytest_gpuperf.bench``), not
interleaved: it backs launch settings, while the perf tests gate. Usage::

    parser = sweeps.parser("qkv", __doc__)
    parser.add_argument(...)                    # the family's own options
    args = parser.parse_args(argv)
    run = sweeps.start("qkv")                    # probes the GPU, prints it
    ...
    run.write(args.out, results)                 # results plus gpu, created, provenance, elapsed_s
"""
from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_gpuperf import DeviceInfo

ROOT = Path(__file__).resolve().parent.parent
HEADER_FIELDS = ("family", "gpu", "created", "provenance", "elapsed_s")  # the harness's, in every file


def parser(family: str, description: str | None) -> argparse.ArgumentParser:
    """The sweep's argument parser, with the ``--out`` every sweep takes."""
    parser = argparse.ArgumentParser(
        prog=f"python -m kernels.{family}.sweep",
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", type=Path, required=True,
                        help="JSON file for every figure, with the GPU, the time and the commit")
    return parser


@dataclass
class SweepRun:
    """One sweep on one GPU: started by ``start``, ended by ``write``."""

    family: str
    device: DeviceInfo
    started: float = field(default_factory=time.monotonic)
    created: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))

    def header(self) -> dict[str, Any]:
        from pytest_gpuperf.bench import provenance

        return {
            "family": self.family,
            "gpu": self.device.fingerprint(),
            "created": self.created,
            "provenance": provenance(ROOT),
            "elapsed_s": time.monotonic() - self.started,
        }

    def write(self, out: Path, results: dict[str, Any]) -> dict[str, Any]:
        """Write ``results`` with the header fields to ``out`` atomically (non-finite numbers become
        null, named in ``notes``); return what was written. A family field may not use a header
        field's name."""
        clash = sorted(set(results) & set(HEADER_FIELDS))
        if clash:
            raise ValueError(f"sweep results of {self.family} use the harness's field names {clash}")
        from pytest_gpuperf.bench import write_json

        payload = {**self.header(), **results}
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        write_json(Path(out), payload)
        print(f"wrote {out} ({payload['elapsed_s']:.0f} s)")
        return payload


def start(family: str, device: DeviceInfo | None = None) -> SweepRun:
    """Probe the GPU (the first CUDA device) unless given, print it, and start the clock."""
    if device is None:
        from pytest_gpuperf.bench import device as first_device

        device = first_device()
    print(f"device: {device.describe()}, key {device.key}", flush=True)
    return SweepRun(family, device)
