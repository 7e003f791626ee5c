"""The sm90 margins against the perf reports they come from (no GPU needed)."""
from __future__ import annotations

from kernels.gemm_schedules.family import SPEEDUP_MARGINS
from tests.margin_rule import GEMM_SM90_REPORTS, lowest_comparisons, margin_rule


def test_sm90_margins_follow_the_interleaved_measurements() -> None:
    """Each Ping-pong/Cooperative margin is the rule on the lowest interval measured on the H200s
    (sessions 5 and 8) and the H100s (sessions 27 and 28)."""
    lowest = lowest_comparisons("tests/gemm_schedules/test_perf.py", GEMM_SM90_REPORTS)
    gated = {key: margin for key, margin in SPEEDUP_MARGINS["sm90"].items() if margin is not None}
    assert set(gated) == {name.removeprefix("test_") for name in lowest if name.startswith("test_pingpong")}
    for key, margin in gated.items():
        assert margin == margin_rule(lowest[f"test_{key}"]["ci_low"]), key
