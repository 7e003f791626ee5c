"""qkv checks that need no GPU: input validation, launch configurations, the reference."""
from __future__ import annotations

import numpy as np
import pytest

from kernels.qkv.accuracy import assert_fp32_accumulation
from kernels.qkv.family import BEST_CONFIGS, GATES, LAYERS, SPEEDUP_MARGINS, best_config, gate_key, margin
from kernels.qkv.launch import (
    NAME_EXPRESSIONS,
    STRIP_VARIANTS,
    VARIANTS,
    LaunchConfig,
    check_problem,
    max_warps_per_block,
    padded_qkv,
    strip_kernel_name,
)
from kernels.qkv.sweep import sweep_configs
from kernels.qkv.reference import QkvShape, make_inputs, reference


def matrices(d_model: int = 8, d_qkv: int = 12, d_ws: int = 5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    w_qkv, h_in = make_inputs(QkvShape(d_model=d_model, d_qkv=d_qkv, d_ws=d_ws), seed=1)
    return w_qkv, h_in, np.empty((d_ws, d_qkv), np.float32)


def test_check_problem_returns_shape() -> None:
    assert check_problem(*matrices(8, 12, 5)) == QkvShape(d_model=8, d_qkv=12, d_ws=5)


@pytest.mark.parametrize(
    ("argument", "bad", "message"),
    [
        ("w_qkv", np.zeros((12, 8), np.float64), "w_qkv: expected dtype float32"),
        ("h_in", np.zeros((5, 9), np.float32), r"h_in: expected shape \(5, 8\)"),
        ("h_qkv", np.zeros((5, 11), np.float32), r"h_qkv: expected shape \(5, 12\)"),
        ("h_in", np.zeros((8, 5), np.float32).T, "h_in: expected a C-contiguous"),
        ("h_qkv", np.zeros(60, np.float32), "h_qkv: expected a 2-D matrix"),
        ("w_qkv", np.zeros((0, 8), np.float32), "expected non-empty matrices"),
    ],
)
def test_check_problem_names_the_bad_argument(argument: str, bad: np.ndarray, message: str) -> None:
    w_qkv, h_in, h_qkv = matrices()
    args = {"w_qkv": w_qkv, "h_in": h_in, "h_qkv": h_qkv, argument: bad}
    with pytest.raises(ValueError, match=message):
        check_problem(args["w_qkv"], args["h_in"], args["h_qkv"])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"warps_per_block": 0}, "warps_per_block"),
        ({"warps_per_block": 33}, "warps_per_block"),
        ({"blocks_per_sm": 0}, "blocks_per_sm"),
        ({"blocks": 0}, "blocks"),
        ({"words_per_thread": 5}, "words_per_thread"),
    ],
)
def test_launch_config_rejects_bad_values(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LaunchConfig(**kwargs)


def test_launch_config_grid() -> None:
    assert LaunchConfig().grid_blocks(132) == 132
    assert LaunchConfig(blocks_per_sm=2).grid_blocks(132) == 264
    assert LaunchConfig(blocks=7, blocks_per_sm=4).grid_blocks(132) == 7


def test_padded_qkv_is_a_multiple_of_four() -> None:
    assert [padded_qkv(n) for n in (1, 3, 4, 5, 96, 1536, 1537)] == [4, 4, 4, 8, 96, 1536, 1540]


def test_every_strip_instantiation_is_compiled() -> None:
    assert strip_kernel_name("qkv_strip_w2", 8, True) == "qkv_strip_w2<8, true>"
    assert len(NAME_EXPRESSIONS) == len(set(NAME_EXPRESSIONS)) == 12


def test_reference_matches_the_notes_loop() -> None:
    shape = QkvShape(d_model=5, d_qkv=3, d_ws=4)
    w_qkv, h_in = make_inputs(shape, seed=3)
    expected = np.zeros((shape.d_ws, shape.d_qkv))
    for i_ws in range(shape.d_ws):
        for i_qkv in range(shape.d_qkv):
            expected[i_ws, i_qkv] = sum(float(w_qkv[i_qkv, m]) * float(h_in[i_ws, m]) for m in range(shape.d_model))
    np.testing.assert_allclose(reference(w_qkv, h_in), expected, rtol=1e-12, atol=1e-12)


def test_inputs_are_seeded_and_nonzero() -> None:
    shape = QkvShape(d_model=7, d_qkv=9, d_ws=11)
    first, second = make_inputs(shape, seed=5), make_inputs(shape, seed=5)
    for a, b in zip(first, second):
        assert a.dtype == np.float32 and a.flags.c_contiguous
        np.testing.assert_array_equal(a, b)
        assert np.count_nonzero(a) == a.size


def test_roofline_counts_of_the_larger_layer() -> None:
    layer = LAYERS["layer1"]
    assert layer.flops == 2 * 2970 * 1536 * 512
    assert layer.min_bytes == 4 * (2970 * 512 + 1536 * 512 + 2970 * 1536)


def test_unmeasured_architectures_do_not_gate() -> None:
    assert margin("sm_00", "qkv_base_w2_vs_qkv_base/layer0") is None
    assert best_config("sm_00", "qkv_strip_w2", "layer1") == LaunchConfig()


def test_every_gate_has_a_margin_entry_and_nothing_else() -> None:
    for fast, baseline, layer in GATES:
        assert fast in VARIANTS and baseline in VARIANTS and layer in LAYERS
    for arch, margins in SPEEDUP_MARGINS.items():
        assert set(margins) == {gate_key(*g) for g in GATES}, arch
        assert all(m is None or m > 1.0 for m in margins.values()), arch


def test_best_configs_name_real_variants_and_launchable_blocks() -> None:
    for arch, configs in BEST_CONFIGS.items():
        for key, config in configs.items():
            variant, layer = key.split("/")
            assert variant in VARIANTS and layer in LAYERS, f"{arch}: {key}"
            assert config.warps_per_block <= max_warps_per_block(variant, config.words_per_thread), f"{arch}: {key}"
            assert best_config(arch, variant, layer) is config
    # The measured launches the perf tests use on the H200 (family.py cites the sweep figures).
    expected = LaunchConfig(warps_per_block=8, blocks_per_sm=4, words_per_thread=4)
    assert best_config("sm_90", "qkv_strip_w2", "layer1") == expected
    assert len(BEST_CONFIGS["sm_90"]) == len(VARIANTS) * len(LAYERS)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("quick", [False, True])
def test_sweep_leaves_out_blocks_the_kernels_are_not_built_for(variant: str, quick: bool) -> None:
    configs = sweep_configs(variant, quick)
    assert configs[0] == LaunchConfig() and len(configs) == len(set(configs))
    assert all(c.warps_per_block <= max_warps_per_block(variant, c.words_per_thread) for c in configs)
    if variant in STRIP_VARIANTS:
        assert {c.words_per_thread for c in configs} == {4, 8, 16}
    if not quick:  # reaches the 64 resident warps per SM the base kernels' registers allow
        assert max(c.warps_per_block * c.blocks_per_sm for c in configs) >= 64


def test_max_warps_per_block_follows_the_launch_bounds() -> None:
    assert max_warps_per_block("qkv_base") == max_warps_per_block("qkv_base_w2") == 32
    assert [max_warps_per_block("qkv_strip_w2", w) for w in (4, 8, 16)] == [16, 16, 8]
    with pytest.raises(ValueError, match="variant"):
        max_warps_per_block("qkv_nope")


def _fp32_sequential_sum(w_qkv: np.ndarray, h_in: np.ndarray) -> np.ndarray:
    out = np.zeros((h_in.shape[0], w_qkv.shape[0]), np.float32)
    for m in range(w_qkv.shape[1]):
        out = (out + h_in[:, m : m + 1] * w_qkv[:, m][None, :]).astype(np.float32)
    return out.astype(np.float64)


@pytest.mark.parametrize("shape", [QkvShape(171, 1, 1), QkvShape(255, 1, 1), QkvShape(600, 64, 8)], ids=str)
def test_the_accumulation_check_takes_fp32_rounding_and_rejects_a_missing_term(shape: QkvShape) -> None:
    """The GPU check judges the error against |h_in| @ |w_qkv|.T: an output that cancels to near
    zero keeps its partial sums' rounding (d_model=171: 1.5e-5 of the output, what an H100
    gave) and still passes, while one term left out fails."""
    w_qkv, h_in = make_inputs(shape, 0)
    exact = reference(w_qkv, h_in)
    assert_fp32_accumulation(_fp32_sequential_sum(w_qkv, h_in), exact, w_qkv, h_in, "fp32")
    missing = _fp32_sequential_sum(w_qkv[:, 1:], h_in[:, 1:])
    with pytest.raises(AssertionError, match="of the products' size exceeds"):
        assert_fp32_accumulation(missing, exact, w_qkv, h_in, "missing term")
