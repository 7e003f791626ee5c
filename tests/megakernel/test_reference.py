"""CPU checks of the float32 reference: bf16 rounding, RoPE, and attention against hand-made cases."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels.megakernel.config import TINY
from kernels.megakernel.reference import (
    ReferenceModel,
    bf16_bits_to_float,
    make_weights,
    random_kv_cache,
    rope_table,
    round_bf16,
    to_bf16_bits,
)


def test_bf16_rounding_is_nearest_even() -> None:
    one_ulp = np.float32(2.0**-7)  # bf16 spacing in [1, 2)
    x = np.array([1.0, 1.0 + one_ulp / 2, 1.0 + 1.5 * one_ulp, 1.0 + one_ulp / 4, -3.0], dtype=np.float32)
    assert round_bf16(x).tolist() == [1.0, 1.0, 1.0 + 2 * float(one_ulp), 1.0, -3.0]


@settings(max_examples=50, deadline=None)
@given(st.floats(-2.0**100, 2.0**100, width=32))
def test_bf16_round_trip_is_within_half_an_ulp(value: float) -> None:
    x = np.array([value], dtype=np.float32)
    back = bf16_bits_to_float(to_bf16_bits(x))
    assert abs(float(back[0]) - value) <= abs(value) * 2.0**-8 + 1e-38
    assert np.array_equal(to_bf16_bits(back), to_bf16_bits(x))


def test_rope_table_at_position_zero_is_identity() -> None:
    table = rope_table(TINY, 3)
    assert np.all(table[0, :64] == 1.0) and np.all(table[0, 64:] == 0.0)
    assert np.allclose(table[2, :64] ** 2 + table[2, 64:] ** 2, 1.0, atol=1e-6)


def test_weights_are_seeded_and_never_zero() -> None:
    a, b = make_weights(TINY, 5), make_weights(TINY, 5)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert all((bf16_bits_to_float(w) != 0).mean() > 0.99 for w in a.values())


def test_step_writes_only_its_kv_rows_and_attends_to_them() -> None:
    """At position 0 attention sees one key, so its output is that position's V row exactly:
    changing any other cache row must not change the logits."""
    weights = make_weights(TINY, 1)
    ref = ReferenceModel(TINY, weights, 8)
    k, v = random_kv_cache(TINY, 8, 2)
    k2, v2 = k.copy(), v.copy()
    logits = ref.decode_step(3, 0, k, v)
    k2[:, :, 1:] ^= 0x5555  # scribble over rows 1.. : position 0 never reads them
    v2[:, :, 1:] ^= 0x5555
    logits2 = ref.decode_step(3, 0, k2, v2)
    assert np.array_equal(logits, logits2)
    assert np.array_equal(k[:, :, 0], k2[:, :, 0]) and np.array_equal(v[:, :, 0], v2[:, :, 0])
    assert logits.shape == (TINY.vocab,) and np.isfinite(logits).all()
