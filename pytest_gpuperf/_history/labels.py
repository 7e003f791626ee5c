"""What moved across a change point: the environment, or else only the code.

The environments compared are those of the runs around the change: the last ``min_size`` runs
before it and the first ``min_size`` after it, so that a change placed a run or two away from
a driver update (the noise can move the place found) is still laid at the update's door. Any
difference in the GPU model, the driver, the CUDA runtime, the CUDA driver API or CuPy between
two neighbouring runs of that stretch makes the change *environment*, naming each field as
``old -> new``; otherwise it is *code*, with the commit range from the last run before to the
first run after. The physical GPUs (uuid) count too, as a set: when none of the GPUs of the last
``min_size`` runs before the change ran any of the first ``min_size`` after it, the machine may
explain the change (GPUs of one model differ by several percent), and it is *environment*; when
one GPU ran on both sides, the machine does not explain it, and the uuids are a detail (fleets
that rotate machines keep finding code changes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_gpuperf._history.series import Environment, Point

__all__ = ["CODE", "ENVIRONMENT", "Label", "label_change"]

CODE = "code"
ENVIRONMENT = "environment"
_FIELDS = (
    ("device_key", "GPU model"),
    ("driver_version", "driver"),
    ("cuda_runtime_version", "CUDA runtime"),
    ("cuda_driver_version", "CUDA driver API"),
    ("cupy_version", "CuPy"),
)


@dataclass(frozen=True)
class Label:
    kind: str  # CODE or ENVIRONMENT
    moved: tuple[str, ...]  # "driver 580.1 -> 590.2", ... (environment)
    commits: tuple[str | None, str | None]  # last commit before, first after
    gpus: tuple[str | None, str | None]  # uuid of the last run before, the first after

    @property
    def git_range(self) -> str | None:
        before, after = self.commits
        return f"{before[:12]}..{after[:12]}" if before and after else None


def _differences(a: Environment, b: Environment) -> list[str]:
    return [
        f"{label} {getattr(a, name) or '?'} -> {getattr(b, name) or '?'}"
        for name, label in _FIELDS
        if getattr(a, name) != getattr(b, name)
    ]


def _gpus(uuids: set[str | None]) -> str:
    return "/".join(sorted(str(u)[:12] for u in uuids))


def label_change(points: Sequence[Point], index: int, around: int) -> Label:
    """The label of a change before ``points[index]`` (points: the series' usable points)."""
    stretch = points[max(0, index - around) : index + around]
    moved: list[str] = []
    for a, b in zip(stretch, stretch[1:], strict=False):
        moved += [d for d in _differences(a.environment, b.environment) if d not in moved]
    before, after = points[index - 1], points[index]
    gpus_before = {p.environment.uuid for p in points[max(0, index - around) : index]}
    gpus_after = {p.environment.uuid for p in points[index : index + around]}
    if None not in gpus_before | gpus_after and gpus_before.isdisjoint(gpus_after):
        moved.append(f"GPU {_gpus(gpus_before)} -> {_gpus(gpus_after)} (no GPU ran on both sides)")
    return Label(
        ENVIRONMENT if moved else CODE,
        tuple(moved),
        (before.commit, after.commit),
        (before.environment.uuid, after.environment.uuid),
    )
