"""The float64 reference and input helpers of merge_attn_states (CPU only, no GPU needed)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from kernels.merge_attn_states.family import (
    BANDWIDTH_CASES,
    BANDWIDTH_FRACTION_TARGET,
    COMPARISONS,
    DEFAULT_LAUNCH,
    MARGINS,
    PERF_CASES,
    SPEEDUP_MARGINS,
    VECTORIZED_SWEEP,
    bandwidth_floor,
    bytes_moved,
    speedup_margin,
)
from kernels.merge_attn_states.launch import kernel_name
from kernels.merge_attn_states.reference import (
    LsePattern,
    make_inputs,
    merge_reference,
    storage_to_float64,
    to_storage,
)

INF = math.inf


def merge_one(p_lse: float, s_lse: float) -> tuple[np.ndarray, float]:
    """Merge one (token, head) with prefix row [1, 2] and suffix row [3, 5]."""
    prefix = np.array([[[1.0, 2.0]]])
    suffix = np.array([[[3.0, 5.0]]])
    out, lse = merge_reference(prefix, np.array([[p_lse]]), suffix, np.array([[s_lse]]))
    return out[0, 0], float(lse[0, 0])


def test_weights_follow_the_lses() -> None:
    out, lse = merge_one(0.0, math.log(3.0))  # weights 1/4 and 3/4
    np.testing.assert_allclose(out, [2.5, 4.25])
    assert lse == pytest.approx(math.log(4.0))


@pytest.mark.parametrize("empty", [INF, -INF])
def test_an_infinite_lse_marks_an_empty_partial(empty: float) -> None:
    out, lse = merge_one(empty, 1.5)
    np.testing.assert_array_equal(out, [3.0, 5.0])
    assert lse == 1.5
    out, lse = merge_one(-7.0, empty)
    np.testing.assert_array_equal(out, [1.0, 2.0])
    assert lse == -7.0


@pytest.mark.parametrize("p_lse, s_lse", [(INF, INF), (-INF, -INF), (INF, -INF)])
def test_both_empty_gives_zero_and_minus_inf(p_lse: float, s_lse: float) -> None:
    out, lse = merge_one(p_lse, s_lse)
    np.testing.assert_array_equal(out, [0.0, 0.0])
    assert lse == -INF


def test_huge_lse_differences_do_not_overflow() -> None:
    out, lse = merge_one(3e38, -3e38)
    np.testing.assert_array_equal(out, [1.0, 2.0])
    assert lse == 3e38


def test_bf16_rounds_to_nearest_even() -> None:
    values = np.array([1.0, 1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, -2.5, 1e-3], dtype=np.float32)
    decoded = storage_to_float64(to_storage(values, "bf16"), "bf16")
    # 1 + 2^-8 is a tie between 1 and 1 + 2^-7 and goes to the even 1; 1 + 3*2^-8 to 1 + 2^-6.
    np.testing.assert_array_equal(decoded[:4], [1.0, 1.0, 1.0 + 2.0**-6, -2.5])
    assert abs(decoded[4] - 1e-3) <= 1e-3 * 2.0**-8


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_inputs_are_seeded_and_never_zero(dtype: str) -> None:
    pattern = LsePattern(pos_inf_fraction=0.2, neg_inf_fraction=0.1)
    a = make_inputs(33, 3, 64, dtype, seed=5, lse=pattern)
    b = make_inputs(33, 3, 64, dtype, seed=5, lse=pattern)
    np.testing.assert_array_equal(a.prefix_output, b.prefix_output)
    np.testing.assert_array_equal(a.suffix_lse, b.suffix_lse)
    assert np.count_nonzero(storage_to_float64(a.prefix_output, dtype)) == a.prefix_output.size
    assert a.prefix_lse.shape == (3, 33) and a.prefix_lse.dtype == np.float32
    assert np.isposinf(a.prefix_lse).any() and np.isneginf(a.suffix_lse).any()


def test_bytes_moved_counts_each_tensor_once() -> None:
    assert bytes_moved(2, 3, 64, output_lse=True) == 3 * 2 * 3 * 64 * 2 + 3 * 2 * 3 * 4
    assert bytes_moved(2, 3, 64, output_lse=False) == 3 * 2 * 3 * 64 * 2 + 2 * 2 * 3 * 4


def test_every_gate_has_a_margin_entry() -> None:
    keys = {f"{cmp}/{case.id}" for cmp, cases in COMPARISONS.items() for case in cases}
    for arch, margins in SPEEDUP_MARGINS.items():
        assert set(margins) == keys, arch
        assert all(m is None or m > 0 for m in margins.values()), arch


def test_sm90_margins_come_from_intervals_at_99_5_percent_or_more() -> None:
    """The margins file records each margin's lowest interval (tests/families/test_margins.py checks
    the rule); those intervals are the interleaved comparisons' at 99.5% or the default 99.75%."""
    for e in MARGINS.entries["sm_90"].values():
        if e.figure is None:
            assert e.evidence is not None and (e.evidence.confidence or 0) >= 0.995, e.key


def test_a_missing_margin_key_is_an_error_not_ungated() -> None:
    with pytest.raises(KeyError):
        speedup_margin("sm_90", "reordered_vs_baselin", PERF_CASES[0])
    assert speedup_margin("sm_75", "reordered_vs_baseline", PERF_CASES[0]) is None  # unlisted arch


def test_the_bandwidth_gate_is_active_on_every_dram_case() -> None:
    assert {case.size for case in BANDWIDTH_CASES} == {"dram"}
    assert {case.head_size for case in BANDWIDTH_CASES} == {64, 128, 256}
    assert BANDWIDTH_FRACTION_TARGET == 0.85
    for arch in ("sm_80", "sm_90", "sm_100"):
        for case in BANDWIDTH_CASES:
            floor = bandwidth_floor(arch, case)
            # Below the target only where a measurement showed it does not hold, and then
            # at the measured value less 5% (margins.json, documented in the README).
            documented = (arch, case.id) == ("sm_90", "dram-fp16-d64")
            assert floor >= BANDWIDTH_FRACTION_TARGET or (documented and floor == 0.79), (arch, case.id, floor)


def test_perf_grid_is_small_and_the_sweep_cases_exist() -> None:
    from kernels.merge_attn_states.sweep import SWEEP_CASE_IDS

    ids = [case.id for case in PERF_CASES]
    assert len(ids) == len(set(ids))
    assert set(SWEEP_CASE_IDS) <= set(ids)
    assert sum(len(cases) for cases in COMPARISONS.values()) + len(BANDWIDTH_CASES) <= 25
    assert DEFAULT_LAUNCH in VECTORIZED_SWEEP


def test_kernel_names_match_the_cuda_templates() -> None:
    assert kernel_name("baseline", "bf16", 64, True) == "merge_attn_states_baseline<bf16_t, 64, true>"
    assert kernel_name("vectorized", "fp16", 256, False) == "merge_attn_states_vectorized<fp16_t, 256, false, 256, 1>"
