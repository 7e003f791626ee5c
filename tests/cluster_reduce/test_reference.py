"""CPU checks of the cluster_reduce reference, the argument checks and the family tables (no GPU)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from kernels.cluster_reduce.family import (
    COMPARISONS,
    PERF_CASES,
    PERF_GRIDS,
    PERF_THREADS,
    RACE_FREE_VARIANTS,
    SOURCE,
    SPEEDUP_MARGINS,
    STAGES,
    VARIANTS,
    margin_key,
)
from kernels.cluster_reduce.launch import all_kernel_names, check_arguments, kernel_name, shared_bytes
from kernels.cluster_reduce.reference import make_input, race_breakdown, racy_reference, reference


def test_input_is_seeded_fp16_without_zeros() -> None:
    a = make_input(3, 1000, seed=5, scale=2.0**-20)  # most values underflow to fp16 subnormals or zero
    assert a.dtype == np.float16 and a.shape == (3 * 2 * 1000,)
    assert np.all(a != 0) and np.all(np.isfinite(a))
    np.testing.assert_array_equal(a, make_input(3, 1000, seed=5, scale=2.0**-20))
    assert not np.array_equal(a, make_input(3, 1000, seed=6, scale=2.0**-20))


@pytest.mark.parametrize("scale", [2.0**-20, 1.0, 2.0**14])
def test_reference_is_the_correctly_rounded_fp16_sum(scale: float) -> None:
    # NumPy adds float16 in float32 and rounds once more; for one addition that double rounding is
    # harmless (24 >= 2 * 11 + 2 bits), so it is an independent correctly rounded fp16 add.
    size = 777
    x = make_input(4, size, seed=1, scale=scale)
    pairs = x.reshape(4, 2, size)
    with np.errstate(over="ignore"):
        expected = pairs[:, 0] + pairs[:, 1]
    out = reference(x, size, "linear").reshape(4, 2, size)
    np.testing.assert_array_equal(out[:, 0], expected)
    np.testing.assert_array_equal(out[:, 1], expected)
    relu = reference(x, size, "ffn").reshape(4, 2, size)
    np.testing.assert_array_equal(relu[:, 0], np.where(expected > 0, expected, np.float16(0)))
    if scale == 2.0**14:
        assert np.isinf(out).any(), "large scales should exercise overflow to infinity"


@pytest.mark.parametrize("late_rank", [0, 1])
def test_racy_model_differs_only_in_the_late_rank(late_rank: int) -> None:
    size = 512
    x = make_input(2, size, seed=2)
    for stage in STAGES:
        good = reference(x, size, stage).reshape(2, 2, size)
        racy = racy_reference(x, size, stage, late_rank=late_rank).reshape(2, 2, size)
        np.testing.assert_array_equal(racy[:, 1 - late_rank], good[:, 1 - late_rank])
        assert np.mean(racy[:, late_rank] != good[:, late_rank]) > 0.3
    np.testing.assert_array_equal(racy_reference(x, size, "ffn"), racy_reference(x, size, "ffn", late_rank=1))
    with pytest.raises(ValueError, match="late_rank"):
        racy_reference(x, size, "linear", late_rank=2)


@pytest.mark.parametrize("stage", STAGES)
def test_race_breakdown_explains_a_natural_race(stage: str) -> None:
    """A mix of slots where rank 0 read late, rank 1 read late, or neither: all explained."""
    size, clusters = 300, 3
    x = make_input(clusters, size, seed=9)
    good = reference(x, size, stage).reshape(clusters, 2, size)
    late0 = racy_reference(x, size, stage, late_rank=0).reshape(clusters, 2, size)
    late1 = racy_reference(x, size, stage, late_rank=1).reshape(clusters, 2, size)
    who = np.random.default_rng(1).integers(0, 3, size=(clusters, size))  # 0, 1: that rank late; 2: none
    out = good.copy()
    out[:, 0][who == 0] = late0[:, 0][who == 0]
    out[:, 1][who == 1] = late1[:, 1][who == 1]
    counts = race_breakdown(out.reshape(-1), x, size, stage)
    assert counts["unexplained"] == 0
    assert counts["rank0_late"] == int(((who == 0) & (late0[:, 0] != good[:, 0])).sum()) > 0
    assert counts["rank1_late"] == int(((who == 1) & (late1[:, 1] != good[:, 1])).sum()) > 0
    assert counts["wrong"] == counts["rank0_late"] + counts["rank1_late"]
    assert race_breakdown(good.reshape(-1), x, size, stage) == {"wrong": 0, "rank0_late": 0, "rank1_late": 0, "unexplained": 0}


def test_race_breakdown_flags_what_no_race_explains() -> None:
    size = 256
    x = make_input(2, size, seed=10)
    good = reference(x, size, "linear").reshape(2, 2, size)
    late0 = racy_reference(x, size, "linear", late_rank=0).reshape(2, 2, size)
    late1 = racy_reference(x, size, "linear", late_rank=1).reshape(2, 2, size)
    i = int(np.flatnonzero((late0[0, 0] != good[0, 0]) & (late1[0, 1] != good[0, 1]))[0])
    out = good.copy()
    out[1, 1, 5] = np.float16(1234.0)  # a value no interleaving produces
    out[0, 0, i], out[0, 1, i] = late0[0, 0, i], late1[0, 1, i]  # both ranks late on one slot: impossible
    counts = race_breakdown(out.reshape(-1), x, size, "linear")
    assert counts["wrong"] == 3 and counts["unexplained"] == 3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"variant": "fastest"}, "variant"),
        ({"stage": "gelu"}, "stage"),
        ({"size": 0}, "size"),
        ({"variant": "dsmem_v8", "size": 100, "n_elements": 400}, "size: variant 'dsmem_v8' needs a multiple of 8"),
        ({"n_elements": 3 * 128}, "x: expected a length"),
        ({"n_elements": 0}, "x: expected a length"),
        ({"threads": 48}, "threads"),
        ({"threads": 2048}, "threads"),
    ],
)
def test_check_arguments_names_the_bad_argument(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"variant": "dsmem", "stage": "linear", "n_elements": 4 * 128, "size": 128, "threads": 256}
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        check_arguments(**args)  # type: ignore[arg-type]


def test_kernel_names_match_the_template() -> None:
    names = all_kernel_names()
    assert len(set(names)) == len(VARIANTS) * len(STAGES) * 2
    assert kernel_name("dsmem_v8", "ffn", skew=True) == "cluster_reduce<2, 1, 8, 4, true>"
    text = SOURCE.read_text()
    assert re.search(r"template <int kAlgo, int kStage, int kVec, int kBatch, bool kSkew>", text)
    assert "__cluster_dims__(kClusterSize, 1, 1)" in text


def test_shared_memory_per_variant() -> None:
    assert shared_bytes("baseline", 16384) == 32 * 1024  # the note's 32 KB
    assert shared_bytes("dsmem", 16384) == 64 * 1024  # the fix's second buffer
    assert shared_bytes("dsmem_split_v8", 16384) == 32 * 1024


def test_tables_are_consistent() -> None:
    for fast, base in COMPARISONS.values():
        assert VARIANTS[fast].race_free and VARIANTS[base].race_free
    ids = [case.id for case in PERF_CASES]
    assert len(ids) == len(set(ids)) <= 25
    for case in PERF_CASES:
        assert case.comparison in COMPARISONS and case.stage in STAGES and case.grid in PERF_GRIDS
        assert case.id == margin_key(case.comparison, case.stage, case.grid)
    for arch, margins in SPEEDUP_MARGINS.items():
        assert set(margins) == set(ids), arch
    # The gates: the DSMEM speedup at one cluster and on a grid that fills the GPU.
    for stage in STAGES:
        for grid in ("one_cluster", "fill"):
            assert margin_key("dsmem_vs_baseline", stage, grid) in ids
    assert set(PERF_THREADS) == set(PERF_GRIDS)
    for grid, threads in PERF_THREADS.items():
        assert set(threads) == set(RACE_FREE_VARIANTS), grid
        for variant, count in threads.items():
            check_arguments(variant, "linear", n_elements=2 * 16384, size=16384, threads=count)
    assert PERF_GRIDS["one_cluster"](132) == 1 and PERF_GRIDS["fill"](132) == 66


def test_sm90_margins_are_plausible() -> None:
    """Each measured margin is within reason (ungated comparisons: tests/families/test_contract.py)."""
    for key, margin in SPEEDUP_MARGINS["sm_90"].items():
        assert margin is None or 0.5 < margin < 5.0, f"{key}: implausible margin {margin}"

