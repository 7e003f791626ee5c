"""merge_attn_states: every variant against the float64 reference, outputs poisoned before each run.

LSE semantics are defined in kernels/merge_attn_states/reference.py: +inf or -inf marks an empty
partial (weight 0); both empty gives a zero output row and an output LSE of -inf.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels.merge_attn_states.family import DTYPES, HEAD_SIZES, VARIANTS
from kernels.merge_attn_states.launch import make_launcher, run_poisoned, upload
from kernels.merge_attn_states.reference import (
    LsePattern,
    MergeInputs,
    assert_merge_close,
    make_inputs,
    storage_to_float64,
)
from pytest_gpuperf import strategies as gst

ELEMENT_BUDGET = 1_000_000  # per case, keeps the float64 reference well under a second


def check_against_reference(variant: str, inputs: MergeInputs, output_lse: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """Run ``variant`` and assert it matches the reference (tolerances justified in reference.py);
    return the decoded output and the LSE."""
    output, lse = run_poisoned(variant, inputs, output_lse)
    assert_merge_close(inputs, output, lse, name=variant)
    return storage_to_float64(output, inputs.dtype), lse


@dataclass(frozen=True)
class MergeCase:
    num_tokens: int
    num_heads: int
    head_size: int
    output_lse: bool
    value_scale: float
    lse: LsePattern
    seed: int


@st.composite
def merge_cases(draw: Any) -> MergeCase:
    head_size = draw(st.sampled_from(HEAD_SIZES))
    # 1 to several thousand tokens, favouring one off a warp or a power of two.
    num_tokens = draw(gst.sizes(1, 5000))
    max_heads = max(1, min(40, ELEMENT_BUDGET // (num_tokens * head_size)))
    num_heads = draw(st.integers(1, max_heads))
    lse = LsePattern(
        spread=draw(st.sampled_from([0.0, 0.5, 4.0, 50.0])),
        suffix_offset=draw(st.sampled_from([0.0, 3.0, -3.0, 40.0, -40.0, 1e4, -1e4])),
        pos_inf_fraction=draw(st.sampled_from([0.0, 0.1, 0.5, 1.0])),
        neg_inf_fraction=draw(st.sampled_from([0.0, 0.1, 0.5])),
    )
    return MergeCase(
        num_tokens=num_tokens,
        num_heads=num_heads,
        head_size=head_size,
        output_lse=draw(st.booleans()),
        value_scale=draw(st.sampled_from([1e-2, 1.0, 100.0])),
        lse=lse,
        seed=draw(gst.seeds()),
    )


@pytest.mark.sm80
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", VARIANTS)
@settings(max_examples=25, deadline=None)
@given(case=merge_cases())
def test_matches_reference(gpu: Any, variant: str, dtype: str, case: MergeCase) -> None:
    inputs = make_inputs(case.num_tokens, case.num_heads, case.head_size, dtype, seed=case.seed,
                         value_scale=case.value_scale, lse=case.lse)
    check_against_reference(variant, inputs, case.output_lse)


# One token per pattern, cycled over the tokens: (prefix LSE, suffix LSE).
_INF = float("inf")
_F32_MAX = float(np.finfo(np.float32).max)
EDGE_LSE_PAIRS = (
    (0.5, -1.0),
    (_INF, 2.0),      # prefix empty: output = suffix exactly
    (2.0, _INF),      # suffix empty: output = prefix exactly
    (-_INF, 2.0),
    (2.0, -_INF),
    (_INF, _INF),     # both empty: output 0, LSE -inf
    (-_INF, -_INF),
    (_INF, -_INF),
    (3.0, 3.0),       # equal weights
    (_F32_MAX, 0.0),  # the largest finite LSE is a real value, not "empty"
    (-1e30, 1e30),
    (80.0, -80.0),
)


def edge_inputs(dtype: str, head_size: int, seed: int) -> MergeInputs:
    num_tokens, num_heads = 3 * len(EDGE_LSE_PAIRS) + 1, 3
    inputs = make_inputs(num_tokens, num_heads, head_size, dtype, seed=seed)
    pairs = np.array([EDGE_LSE_PAIRS[t % len(EDGE_LSE_PAIRS)] for t in range(num_tokens)], dtype=np.float32)
    prefix_lse = np.ascontiguousarray(np.broadcast_to(pairs[:, 0], (num_heads, num_tokens)))
    suffix_lse = np.ascontiguousarray(np.broadcast_to(pairs[:, 1], (num_heads, num_tokens)))
    return MergeInputs(dtype, inputs.prefix_output, prefix_lse, inputs.suffix_output, suffix_lse)


@pytest.mark.sm80
@pytest.mark.parametrize("head_size", HEAD_SIZES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", VARIANTS)
def test_empty_partials(gpu: Any, variant: str, dtype: str, head_size: int) -> None:
    inputs = edge_inputs(dtype, head_size, seed=head_size)
    output, lse = check_against_reference(variant, inputs, output_lse=True)
    assert lse is not None
    prefix = storage_to_float64(inputs.prefix_output, dtype)
    suffix = storage_to_float64(inputs.suffix_output, dtype)
    p_empty = np.isinf(inputs.prefix_lse[0])
    s_empty = np.isinf(inputs.suffix_lse[0])
    only_suffix, only_prefix, neither = p_empty & ~s_empty, s_empty & ~p_empty, p_empty & s_empty
    # Weight exactly 1 for the non-empty side: the 16-bit output equals that side's input.
    np.testing.assert_array_equal(output[only_suffix], suffix[only_suffix])
    np.testing.assert_array_equal(output[only_prefix], prefix[only_prefix])
    np.testing.assert_array_equal(output[neither], 0.0)
    assert np.all(lse[:, neither] == -np.inf)
    assert np.all(np.isfinite(lse[:, ~neither]))


@pytest.mark.sm80
def test_rejects_bad_arguments(gpu: Any) -> None:
    import cupy

    b = upload(make_inputs(8, 2, 128, "fp16", seed=1), output_lse=True)
    args = (b.output, b.output_lse, b.prefix_output, b.prefix_lse, b.suffix_output, b.suffix_lse)
    with pytest.raises(ValueError, match="variant"):
        make_launcher("fastest", *args, dtype="fp16")
    with pytest.raises(ValueError, match="dtype"):
        make_launcher("baseline", *args, dtype="bf16")
    with pytest.raises(ValueError, match="head_size"):
        odd = cupy.ones((8, 2, 96), dtype=cupy.float16)
        make_launcher("baseline", odd, None, odd.copy(), b.prefix_lse, odd.copy(), b.suffix_lse, dtype="fp16")
    with pytest.raises(ValueError, match="suffix_lse"):
        make_launcher("baseline", *args[:5], b.suffix_lse.T.copy(), dtype="fp16")
    with pytest.raises(ValueError, match="aligned"):
        flat = cupy.ones(8 * 2 * 128 + 1, dtype=cupy.float16)
        shifted = flat[1:].reshape(8, 2, 128)
        make_launcher("vectorized", b.output, None, shifted, b.prefix_lse, b.suffix_output, b.suffix_lse,
                      dtype="fp16")
    with pytest.raises(ValueError, match="alias"):
        make_launcher("reordered", b.prefix_output, None, *args[2:], dtype="fp16")
