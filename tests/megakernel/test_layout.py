"""CPU checks of what the kernel and the Python side must agree on: the parameter struct, the
packed weight layout, the model-shape checks."""
from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from kernels.megakernel.config import HEAD_DIM, QWEN3_0_6B, TINY
from kernels.megakernel.family import GRID_SYNCS_PER_LAYER, HEADERS, SOURCES, SPEEDUP_MARGINS, VARIANTS
from kernels.megakernel.layout import PARAM_FIELDS, PARAMS_DTYPE, DecodeBuffers, pack_weights
from kernels.megakernel.reference import make_weights


def _header(name: str) -> str:
    return next(p for p in HEADERS if p.name == name).read_text()


def test_headers_are_the_ones_the_source_includes() -> None:
    included = re.findall(r'^#include "(\w+\.cuh)"', SOURCES[0].read_text(), re.M)
    assert tuple(included) == tuple(p.name for p in HEADERS)
    assert all(p.is_file() for p in HEADERS)


def test_param_fields_match_the_struct_in_the_source() -> None:
    source = _header("mk_config.cuh")
    body = re.search(r"struct MegakernelParams \{(.*?)\};", source, re.S)
    assert body, "struct MegakernelParams not found in mk_config.cuh"
    fields = re.findall(r"^\s*[\w\s\*]+?\b(\w+);", body.group(1), re.M)
    assert tuple(fields) == PARAM_FIELDS
    assert PARAMS_DTYPE.itemsize == 8 * len(PARAM_FIELDS)  # every field 8 bytes: no padding


def test_variants_match_the_template_specialisations() -> None:
    source = _header("mk_variants.cuh")
    specialised = sorted(int(i) for i in re.findall(r"template <> struct Variant<(\d+)>", source))
    assert specialised == list(range(len(VARIANTS)))
    assert set(GRID_SYNCS_PER_LAYER) == set(VARIANTS)


def test_margins_are_placeholders_or_positive() -> None:
    for arch, table in SPEEDUP_MARGINS.items():
        for key, margin in table.items():
            assert margin is None or margin > 0, f"{arch}/{key}: {margin}"


def test_packed_qkv_groups_rows_by_kv_head() -> None:
    c = TINY
    weights = make_weights(c, 1)
    packed = pack_weights(c, weights)
    qkv = packed["w_qkv"][1].reshape(c.kv_heads, c.gqa + 2, HEAD_DIM, c.hidden)
    q = weights["model.layers.1.self_attn.q_proj.weight"].reshape(c.q_heads, HEAD_DIM, c.hidden)
    k = weights["model.layers.1.self_attn.k_proj.weight"].reshape(c.kv_heads, HEAD_DIM, c.hidden)
    v = weights["model.layers.1.self_attn.v_proj.weight"].reshape(c.kv_heads, HEAD_DIM, c.hidden)
    for g in range(c.kv_heads):
        for r in range(c.gqa):
            assert np.array_equal(qkv[g, r], q[g * c.gqa + r])
        assert np.array_equal(qkv[g, c.gqa], k[g])
        assert np.array_equal(qkv[g, c.gqa + 1], v[g])


def test_packed_gate_up_interleaves_rows() -> None:
    weights = make_weights(TINY, 2)
    gate_up = pack_weights(TINY, weights)["w_gate_up"][0]
    assert np.array_equal(gate_up[0::2], weights["model.layers.0.mlp.gate_proj.weight"])
    assert np.array_equal(gate_up[1::2], weights["model.layers.0.mlp.up_proj.weight"])


def test_buffers_poison_scratch_and_zero_counters() -> None:
    buffers = DecodeBuffers.build(TINY, make_weights(TINY, 0), max_seq=40, max_blocks=3)
    assert np.isnan(buffers["logits"]).all() and np.isnan(buffers["attn_partial"]).all()
    assert not buffers["counters"].any()
    params = buffers.params()
    assert int(params["max_seq"][0]) == 40 and int(params["vocab"][0]) == TINY.vocab
    assert int(params["embed"][0]) == buffers["embed"].ctypes.data


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hidden": 1000}, "hidden"),
        ({"intermediate": 300}, "intermediate"),
        ({"q_heads": 6, "kv_heads": 4}, "multiple"),
        ({"q_heads": 8, "kv_heads": 2}, "1 or 2"),
        ({"layers": 0}, "layers"),
    ],
)
def test_config_rejects_shapes_the_kernel_cannot_run(change: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(TINY, **change)


def test_roofline_bytes_of_qwen3_0_6b() -> None:
    # 28 x (4096 + 2048 + 3 x 3072) x 1024 weights per layer + 151936 x 1024 embedding, in bf16.
    matrices = 28 * (4096 * 1024 + 1024 * 2048 + 3 * 3072 * 1024) + 151936 * 1024
    assert matrices * 2 < QWEN3_0_6B.weight_bytes() < matrices * 2 * 1.001
    assert QWEN3_0_6B.kv_bytes(0) == 2 * 28 * 8 * 128 * 2
