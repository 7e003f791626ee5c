"""The kernel-family contract: what every ``kernels/<family>/family.py`` declares as ``FAMILY``.

docs/kernel-family-contract.md describes the layout and the rules; tests/families/test_contract.py
checks every family against them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pytest_gpuperf import CudaModule
from pytest_gpuperf import MarginsFile

__all__ = ["FAMILY_FILES", "TEST_FILES", "KernelFamily", "Shortfall", "TargetShortfalls"]

# kernels/<family>/ holds these (sweep.py is optional), tests/<family>/ these.
FAMILY_FILES = ("README.md", "DESIGN.md", "launch.py", "reference.py", "family.py", "margins.json")
TEST_FILES = ("test_correctness.py", "test_perf.py", "test_static.py")

# (the perf cases that fall short, by their perf-grid value, or None for every case the target
# applies to; what was measured)
Shortfall = tuple[tuple[object, ...] | None, str]
# arch -> target -> GPU model as NVML names it ("*": the architecture's other models) -> Shortfall
TargetShortfalls = Mapping[str, Mapping[str, Mapping[str, Shortfall]]]


# eq=False: the fields hold dicts, so equality and hashing go by identity (one FAMILY per family).
@dataclass(frozen=True, eq=False)
class KernelFamily:
    """One kernel family, built in its family.py from the module's own constants.

    ``perf_grid`` maps each perf case's id, as the perf tests' parameter ids spell it, to the case
    (a shape, a position, a PerfCase). ``margin_tests`` names the perf test functions whose
    interleaved comparisons the margins file gates: every collected test of them has an entry
    (the family's other comparisons are report-only or gate a fixed requirement).
    ``target_shortfalls`` lists the absolute targets a GPU model does not reach: the tests that
    gate them expect to fail there.
    """

    name: str
    directory: Path
    sources: tuple[Path, ...]
    cuda_modules: tuple[CudaModule, ...]
    margins: MarginsFile
    perf_grid: Mapping[str, object]
    margin_tests: tuple[str, ...]
    target_shortfalls: TargetShortfalls = field(default_factory=dict)

    @property
    def readme(self) -> Path:
        return self.directory / "README.md"

    @property
    def margins_path(self) -> Path:
        return self.margins.path

    @property
    def tests_dir(self) -> Path:
        return self.directory.parents[1] / "tests" / self.name

    @property
    def ungated(self) -> dict[str, dict[str, str]]:
        """arch -> comparison key -> why it has no margin: the margins file's entries with ``"value": null``."""
        return self.margins.ungated()

    def target_shortfall(self, arch: str, device_name: str, target: str, case: object = None) -> str | None:
        """What was measured where ``target`` falls short on this GPU model (at perf case ``case``),
        or None where it is an ordinary gate."""
        by_model = self.target_shortfalls.get(arch, {}).get(target, {})
        entry = by_model.get(device_name, by_model.get("*"))
        if entry is None:
            return None
        cases, what = entry
        if cases is not None and case is not None and case not in cases:
            return None
        return what
