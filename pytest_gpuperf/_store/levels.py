"""The ``levels`` field of a baseline entry: a variant's levels as ``gpuperf levels`` stores them.

A kernel that holds one of a few calibrated times for a whole run (``_gates.levels``) needs a band
wider than the distance between them against a single baseline; with its levels stored in its
entry, the regression check judges a run against every level with the level band
(``--gpu-perf-level-noise``)::

    "levels": {
      "reference": "reference:gemm",       # the entry's calibration reference
      "band": 0.03,                        # runs within this of a level's first run joined it
      "derived_at": "2026-11-27T10:00:00+00:00",
      "reports": [{"file": ..., "created": ..., "commit": ..., "dirty": ..., "gpu": ...}],
      "levels": [{"ratio": 7.54, "log_center": ..., "log_se": ..., "df": ..., "n": ..., "runs": 5,
                  "reports": [0, 3, ...]}, ...]     # fastest first; indexes into "reports"
    }
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pytest_gpuperf._gates.stats import Estimate

Placed = list[tuple[Estimate, list[int]]]  # each level and the indexes of the reports its runs came from


def levels_json(
    levels: Placed,
    reference: str,
    band: float,
    sources: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """The ``levels`` field of an entry (module doc); ``sources`` describe the command's reports."""
    used = sorted({i for _, members in levels for i in members})
    index = {report: j for j, report in enumerate(used)}
    return {
        "reference": reference,
        "band": band,
        "derived_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "reports": [dict(sources[i]) for i in used],
        "levels": [
            {
                "ratio": round(math.exp(level.center), 6),
                "log_center": level.center,
                "log_se": level.se,
                "df": level.df,
                "n": level.n,
                "runs": len(members),
                "reports": [index[i] for i in members],
            }
            for level, members in levels
        ],
    }


def source_of(path: Path, report: Mapping[str, Any]) -> dict[str, Any]:
    """What a levels field records of one report: its file, date, commit and GPU."""
    provenance = report.get("provenance")
    provenance = provenance if isinstance(provenance, dict) else {}
    devices = report.get("devices")
    devices = devices.values() if isinstance(devices, dict) else []
    gpus = sorted({str(d["uuid"]) for d in devices if isinstance(d, dict) and isinstance(d.get("uuid"), str)})

    def text(value: Any) -> str | None:
        return value if isinstance(value, str) else None

    return {
        "file": path.name,
        "created": text(report.get("created")),
        "commit": text(provenance.get("commit")),
        "dirty": provenance.get("dirty") if isinstance(provenance.get("dirty"), bool) else None,
        "gpu": ", ".join(gpus) or None,
    }
