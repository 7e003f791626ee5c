"""The gates' error rates under the noise real GPUs have, simulated through the real sampler.

Each trial drives ``sampler.measure`` / ``sampler.compare`` and the regression check at the
default settings with the fake backend, whose samples are taken in interleaved time order and
carry time-indexed noise (``pytest_gpuperf.testing.noise``). A regression trial records a
baseline in one simulated run and checks a second, independent run against it.

``python -m tests.plugin.gate_simulation --seeds 10000`` prints every rate with its 95% Wilson
interval (the table in docs/statistics.md); the tests assert bounds on fewer seeds.
"""
from __future__ import annotations

import argparse
import math
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from typing import Callable, Sequence

from pytest_gpuperf import Variant, Verdict
from pytest_gpuperf.store.baselines import Entry
from pytest_gpuperf.options import BY_NAME
from pytest_gpuperf.regression import check_regression
from pytest_gpuperf.testing import FakeBackend, noise
from pytest_gpuperf.timing import SamplingPolicy, compare, measure

T0 = 10e-6  # the kernel: 10 us per launch
POLICY = SamplingPolicy()  # the defaults a user gets
TOLERANCE = BY_NAME["tolerance"].default
MACHINE_BAND = BY_NAME["machine-noise"].default
CALIBRATED_BAND = BY_NAME["calibrated-noise"].default

# name -> the noise models of one simulated run (fresh state each run)
MODELS: dict[str, Callable[[], list[noise.Noise]]] = {
    "iid 1%": lambda: [noise.Lognormal(0.01), noise.Outliers(0.02, 1.5)],
    "iid 3%": lambda: [noise.Lognormal(0.03), noise.Outliers(0.02, 1.5)],
    "student-t(3)": lambda: [noise.StudentT(3.0, 0.01)],
    "drift 5%/s": lambda: [noise.Lognormal(0.01), noise.Drift(0.05)],
    "AR(1) 0.8 shared": lambda: [noise.Lognormal(0.005), noise.AR1(0.8, 0.01, shared=True)],
    "AR(1) 0.8 per variant": lambda: [noise.Lognormal(0.005), noise.AR1(0.8, 0.01, shared=False)],
    "two-level clock, Markov": lambda: [noise.Lognormal(0.01), noise.TwoLevel(1.1, switch_probability=0.02)],
    "two-level clock, dwell 2 s": lambda: [noise.Lognormal(0.01), noise.TwoLevel(1.1, dwell_s=2.0)],
}


def _noop() -> None:
    pass


@dataclass(frozen=True)
class Scenario:
    """One row of the table: a gate, the truth, the noise model, the machine and the mode."""

    gate: str  # "speedup" or "regression"
    truth: float  # regression: t_now / t_stored of the code; speedup: t_fast / t_baseline
    model: str
    machine: float = 1.0  # the checking run's machine runs everything this many times as long
    calibrate: bool = True

    @property
    def label(self) -> str:
        what = "A/A" if self.truth == 1.0 else f"{100 * (self.truth - 1):+.0f}% code"
        machine = "" if self.machine == 1.0 else f", machine {100 * (self.machine - 1):+.1f}%"
        mode = "" if self.calibrate or self.gate == "speedup" else ", uncalibrated"
        return f"{self.gate} {what}{machine}{mode} | {self.model}"

    def run(self, seed: int) -> Verdict:
        if self.gate == "speedup":
            backend = FakeBackend({"fast": T0 * self.truth, "baseline": T0}, noise=MODELS[self.model](), seed=seed, call_launch=False)
            return compare(backend, Variant("fast", _noop), Variant("baseline", _noop), POLICY, 1.0, "cold").verdict
        return self._regression(seed)

    def _regression(self, seed: int) -> Verdict:
        policy = POLICY
        before = FakeBackend({"k": T0}, noise=MODELS[self.model](), seed=2 * seed, call_launch=False)
        ref = before.reference("copy") if self.calibrate else None
        stored = Entry.from_measurement(measure(before, Variant("k", _noop), policy, "cold", reference=ref).summary())
        models = MODELS[self.model]() + ([noise.MachineOffset(self.machine)] if self.machine != 1.0 else [])
        after = FakeBackend({"k": T0 * self.truth}, noise=models, seed=2 * seed + 1, call_launch=False)
        ref = after.reference("copy") if self.calibrate else None
        now = measure(after, Variant("k", _noop), policy, "cold", reference=ref)
        return check_regression(now, stored, TOLERANCE, MACHINE_BAND, CALIBRATED_BAND).verdict


def scenarios() -> list[Scenario]:
    out = []
    for model in MODELS:
        out += [Scenario("speedup", 1.0, model), Scenario("speedup", 1.05, model)]
        out += [Scenario("regression", 1.0, model), Scenario("regression", 1.05, model)]
    for machine in (0.985, 1.015, 1.03, 1.047):
        out += [Scenario("regression", 1.0, "iid 1%", machine), Scenario("regression", 1.05, "iid 1%", machine)]
        out += [Scenario("regression", 1.0, "iid 1%", machine, calibrate=False)]
    return out


def wants_fail(s: Scenario) -> bool:
    return s.truth > 1.0


def rates(s: Scenario, seeds: Sequence[int]) -> Counter[Verdict]:
    return Counter(s.run(seed) for seed in seeds)


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a binomial proportion k/n."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _row(args: tuple[Scenario, int, int]) -> tuple[Scenario, Counter[Verdict]]:
    s, start, n = args
    return s, rates(s, range(start, start + n))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=1000)
    parser.add_argument("--start", type=int, default=100_000, help="first seed (the tests use 0..)")
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args(argv)
    with ProcessPoolExecutor(args.workers) as pool:
        results = list(pool.map(_row, [(s, args.start, args.seeds) for s in scenarios()]))
    print("| scenario | noise | FAIL | PASS | INCONCLUSIVE | FAIL rate, 95% Wilson interval |")
    print("| --- | --- | --- | --- | --- | --- |")
    for s, counts in results:
        n = sum(counts.values())
        fails = counts[Verdict.FAIL]
        low, high = wilson(fails, n)
        what, model = s.label.split(" | ")
        print(
            f"| {what} | {model} | {fails} | {counts[Verdict.PASS] + counts[Verdict.IMPROVED]} | "
            f"{counts[Verdict.INCONCLUSIVE]} | {100 * fails / n:.2f}% [{100 * low:.2f}, {100 * high:.2f}] |"
        )


if __name__ == "__main__":
    main()
