"""CPU checks of the transformers peer's acceptance rule (hf_peer.check_logits) and of the family
table the gates read; the peer itself needs torch, transformers and a GPU (test_correctness.py)."""
from __future__ import annotations

import numpy as np
import pytest

from kernels.megakernel import family
from kernels.megakernel.hf_peer import ARGMAX_TIE, PEER_MAX_REL_L2, check_logits, expected_inv_freq
from kernels.megakernel.config import QWEN3_0_6B


def logits(seed: int = 0, n: int = 151936) -> np.ndarray:
    """Logits shaped like the full model's: std 0.65, one clear winner."""
    x = np.random.default_rng(seed).normal(0.0, 0.65, n).astype(np.float32)
    x[123] = x.max() + 0.5
    return x


def test_same_logits_pass() -> None:
    check = check_logits(logits(), logits())
    assert check.ok and check.rel_l2 == 0.0 and check.argmax == 123


def test_bf16_sized_noise_passes() -> None:
    """Noise at the emulated bf16 level (relative L2 0.05) is the same function."""
    ours = logits()
    peer = ours + np.random.default_rng(1).normal(0.0, 0.05 * 0.65, ours.size).astype(np.float32)
    assert check_logits(peer, ours).ok


def test_a_different_function_fails() -> None:
    """An early peer's failure: another model's logits (relative L2 about 1.2)."""
    check = check_logits(logits(seed=5), logits(seed=6))
    assert not check.ok and check.rel_l2 > PEER_MAX_REL_L2 and "relative L2" in check.why


def test_argmax_must_agree_when_the_gap_is_clear() -> None:
    ours = logits()
    peer = ours.copy()
    peer[7] = ours[123] + 0.01  # a new winner, tiny in L2 terms
    check = check_logits(peer, ours)
    assert not check.ok and "argmax" in check.why


def test_near_tie_may_go_either_way() -> None:
    ours = logits()
    ours[77] = ours[123] - ARGMAX_TIE / 2
    peer = ours.copy()
    peer[77] = ours[123] + 1e-3
    assert check_logits(peer, ours).ok
    peer[55] = ours[123] + 1e-2  # token 55 is far below the top in our logits
    assert not check_logits(peer, ours).ok


def test_nan_fails() -> None:
    peer = logits()
    peer[3] = np.nan
    assert not check_logits(peer, logits()).ok


def test_shapes_must_match() -> None:
    with pytest.raises(ValueError, match="shape"):
        check_logits(np.zeros(3), np.zeros(4))


def test_rope_frequencies_match_the_reference_table() -> None:
    """The peer's inv_freq check uses the same frequencies as reference.rope_table (to float32)."""
    from kernels.megakernel.reference import rope_table

    table = rope_table(QWEN3_0_6B, 4)
    inv = expected_inv_freq(QWEN3_0_6B)
    np.testing.assert_allclose(np.cos(3 * inv.astype(np.float64)), table[3, :64], rtol=0, atol=1e-6)


def test_family_gates_name_known_variants() -> None:
    assert family.BEST_VARIANT in family.VARIANTS
    assert set(family.GATE_CANDIDATES) <= set(family.VARIANTS)
    assert family.GATE_CANDIDATES[0] == family.BEST_VARIANT
    for fast, base in family.COMPARISONS.values():
        assert {fast, base} <= set(family.VARIANTS)
    expected_keys = {f"{c}@{p}" for c in family.COMPARISONS for p in family.GATE_POSITIONS}
    assert set(family.SPEEDUP_MARGINS["sm_90"]) == expected_keys
    for name in family.UNMEASURED_VARIANTS:  # an unmeasured variant has no measured margin
        for key, margin in family.SPEEDUP_MARGINS["sm_90"].items():
            if key.startswith(f"{name}_vs_"):
                assert margin is None, key
    assert set(family.GRID_SYNCS_PER_LAYER) == set(family.VARIANTS) == set(family.GROUP_BARRIERS_PER_LAYER)
    assert all(p < family.MAX_SEQ for _, p in family.HF_CHECK_STEPS)


def test_target_shortfalls_are_per_gpu_model_and_position(monkeypatch: pytest.MonkeyPatch) -> None:
    """The H200 falls short of the roofline target from p=100 on (it gates normally at p = 1, 10
    and 50), the H100 nowhere; a model not listed gates normally; the peer speedup shortfall
    covers the H100 everywhere and every other sm90 model ("*") from p=200; an entry limited to
    some positions applies at those only."""
    h200, h100 = "NVIDIA H200", "NVIDIA H100 80GB HBM3"
    assert [p for p in family.ROOFLINE_POSITIONS if family.target_shortfall("sm_90", h200, "roofline", p)] == [
        100, 200]
    assert all(family.target_shortfall("sm_90", h100, "roofline", p) is None for p in family.ROOFLINE_POSITIONS)
    assert "8x" in family.target_shortfall("sm_90", h100, "hf_speedup", 1)
    assert family.target_shortfall("sm_90", "NVIDIA GH200 480GB", "roofline", 1) is None
    assert family.target_shortfall("sm_90", h200, "hf_speedup", 1) is None
    assert "8x" in family.target_shortfall("sm_90", "NVIDIA GH200 480GB", "hf_speedup", 1000)
    assert family.target_shortfall("sm_80", h200, "roofline", 1) is None
    monkeypatch.setitem(family.TARGET_SHORTFALLS["sm_90"]["roofline"], h100, ((50, 200), "short at 50 and 200"))
    assert family.target_shortfall("sm_90", h100, "roofline", 10) is None
    assert family.target_shortfall("sm_90", h100, "roofline", 200) == "short at 50 and 200"


def test_unsettled_shortfalls_are_not_strict_only_where_listed() -> None:
    """Within the pool's spread of a target (on one H200 the peer speedup at p=200, 8.08x, and the
    roofline at p = 100 / 200, 50.7 / 49.6%; on another the peer speedup at p=1000, 7.99-8.00x) the xfail is not strict; the other positions and the H100's entry (its own
    key, not "*") stay strict; every unsettled entry names a documented shortfall."""
    h200, h100 = "NVIDIA H200", "NVIDIA H100 80GB HBM3"
    assert not family.shortfall_is_strict("sm_90", h200, "hf_speedup", 200)
    assert not family.shortfall_is_strict("sm_90", h200, "hf_speedup", 1000)
    assert family.shortfall_is_strict("sm_90", h100, "hf_speedup", 200)
    assert family.shortfall_is_strict("sm_90", h100, "hf_speedup", 1000)
    for position in (100, 200):
        assert not family.shortfall_is_strict("sm_90", h200, "roofline", position)
    assert family.shortfall_is_strict("sm_90", h100, "hf_speedup", 1)
    assert family.shortfall_is_strict("sm_90", "NVIDIA GH200 480GB", "roofline", 100)
    for arch, by_target in family.UNSETTLED_SHORTFALLS.items():
        for target, by_model in by_target.items():
            for key, positions in by_model.items():
                assert key in family.TARGET_SHORTFALLS[arch][target], (target, key)
                documented = family.TARGET_SHORTFALLS[arch][target][key][0]
                assert documented is None or set(positions) <= set(documented), (target, key, positions)
