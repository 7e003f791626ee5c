"""CPU checks of the cluster_reduce reference, the argument checks and the family tables (no GPU)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from kernels.cluster_reduce.family import (
    COMPARISONS,
    PERF_GRIDS,
    PERF_THREADS,
    SOURCE,
    SPEEDUP_MARGINS,
    STAGES,
    VARIANTS,
    margin_key,
)
from kernels.cluster_reduce.launch import all_kernel_names, check_arguments, kernel_name, shared_bytes
from kernels.cluster_reduce.reference import make_input, racy_reference, reference


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


def test_racy_model_differs_only_in_rank_one() -> None:
    size = 512
    x = make_input(2, size, seed=2)
    for stage in STAGES:
        good = reference(x, size, stage).reshape(2, 2, size)
        racy = racy_reference(x, size, stage).reshape(2, 2, size)
        np.testing.assert_array_equal(racy[:, 0], good[:, 0])
        assert np.mean(racy[:, 1] != good[:, 1]) > 0.3


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
    expected_keys = {margin_key(c, s, g) for c in COMPARISONS for s in STAGES for g in PERF_GRIDS}
    for arch, margins in SPEEDUP_MARGINS.items():
        assert set(margins) == expected_keys, arch
    assert set(PERF_THREADS) == set(VARIANTS)
    assert PERF_GRIDS["one_cluster"](132) == 1 and PERF_GRIDS["fill"](132) == 66
