"""How often the gates are wrong, measured on seeded synthetic noise at the default settings.

Each scenario runs 2,000 simulated comparisons through the real sampler and gates, with
log-normal per-sample noise (sigma 1% and 3%) and 2% outliers at 1.5x:

- regression gate, A/A: stored baseline and current run from the same distribution;
  a FAIL is a false alarm (must be <= 1%).
- regression gate, true 5% slowdown: current run 5% slower; FAIL must happen >= 95%.
- speedup gate, A/A at at_least=1.0: a FAIL is a false alarm (<= 1%).
- speedup gate, "fast" truly 5% slower than its baseline, claim at_least=1.0: FAIL >= 95%.

The measured rates are printed (run with -s) and recorded in docs/statistics.md.
"""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from pytest_gpuperf import Variant, Verdict
from pytest_gpuperf.gates import regression_verdict
from pytest_gpuperf.options import BY_NAME
from pytest_gpuperf.stats import ratio_of_medians_ci
from pytest_gpuperf.testing import FakeBackend
from pytest_gpuperf.timing import SamplingPolicy, compare, measure

SIMULATIONS = 2000
OUTLIER_RATE = 0.02
T0 = 10e-6
POLICY = SamplingPolicy()  # the defaults a user gets
TOLERANCE = 0.05  # the default --gpu-perf-tolerance
MACHINE_NOISE = BY_NAME["machine-noise"].default  # the default --gpu-perf-machine-noise


@dataclass(frozen=True)
class Scenario:
    gate: str  # "regression" or "speedup"
    slowdown: float  # true ratio t_now / t_before (regression) or t_fast / t_baseline (speedup)
    spread: float

    @property
    def wants_fail(self) -> bool:
        return self.slowdown > 1.0


def _noop() -> None:
    pass


def simulate(s: Scenario, seed: int) -> Verdict:
    times = {"before": T0, "now": T0 * s.slowdown, "fast": T0 * s.slowdown, "baseline": T0}
    backend = FakeBackend(times, spread=s.spread, outlier_rate=OUTLIER_RATE, seed=seed, call_launch=False)
    if s.gate == "regression":
        before = measure(backend, Variant("before", _noop), POLICY, "cold")
        now = measure(backend, Variant("now", _noop), POLICY, "cold")
        slowdown = ratio_of_medians_ci(now.interval, before.interval, POLICY.confidence, MACHINE_NOISE)
        return regression_verdict(slowdown, TOLERANCE)
    return compare(backend, Variant("fast", _noop), Variant("baseline", _noop), POLICY, 1.0, "cold").verdict


SCENARIOS = [Scenario(g, r, sp) for g in ("regression", "speedup") for r in (1.0, 1.05) for sp in (0.01, 0.03)]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: f"{s.gate}-x{s.slowdown}-noise{s.spread:.0%}")
def test_gate_error_rates(scenario: Scenario, capsys: pytest.CaptureFixture[str]) -> None:
    verdicts = [simulate(scenario, seed) for seed in range(SIMULATIONS)]
    fail_rate = sum(v is Verdict.FAIL for v in verdicts) / SIMULATIONS
    undecided = sum(v is Verdict.INCONCLUSIVE for v in verdicts) / SIMULATIONS
    with capsys.disabled():
        print(
            f"\n{scenario.gate:10s} true ratio {scenario.slowdown:.2f} noise {scenario.spread:.0%}: "
            f"FAIL {fail_rate:.1%}, inconclusive {undecided:.1%} over {SIMULATIONS} comparisons"
        )
    if scenario.wants_fail:
        assert fail_rate >= 0.95, f"a true 5% slowdown was caught only {fail_rate:.1%} of the time"
    else:
        assert fail_rate <= 0.01, f"A/A false-alarm rate {fail_rate:.1%} exceeds 1%"
