"""The Hugging Face checkpoint loader, on small files this test writes."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kernels.megakernel.checkpoint import config_from_hf, load_checkpoint, read_safetensors, write_safetensors
from kernels.megakernel.config import TINY
from kernels.megakernel.reference import make_weights, to_bf16_bits

HF_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": TINY.vocab,
    "hidden_size": TINY.hidden, "intermediate_size": TINY.intermediate, "num_hidden_layers": TINY.layers,
    "num_attention_heads": TINY.q_heads, "num_key_value_heads": TINY.kv_heads, "head_dim": 128,
    "rms_norm_eps": 1e-6, "rope_theta": 1000000, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
}


def write_checkpoint(directory: Path, weights: dict[str, np.ndarray], shards: int = 1) -> None:
    (directory / "config.json").write_text(json.dumps(HF_CONFIG))
    if shards == 1:
        write_safetensors(directory / "model.safetensors", weights)
        return
    names = list(weights)
    weight_map = {}
    for i in range(shards):
        file = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = names[i::shards]
        write_safetensors(directory / file, {n: weights[n] for n in part})
        weight_map.update({n: file for n in part})
    (directory / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))


@pytest.mark.parametrize("shards", [1, 3])
def test_checkpoint_round_trip(tmp_path: Path, shards: int) -> None:
    weights = make_weights(TINY, 4)
    write_checkpoint(tmp_path, weights, shards)
    config = config_from_hf(tmp_path / "config.json", name=TINY.name)
    assert config == TINY
    loaded = load_checkpoint(tmp_path, config)
    assert loaded.keys() == weights.keys()
    assert all(np.array_equal(loaded[n], weights[n]) for n in weights)


def test_tied_lm_head_is_accepted_and_untied_rejected(tmp_path: Path) -> None:
    weights = make_weights(TINY, 4)
    write_checkpoint(tmp_path, {**weights, "lm_head.weight": weights["model.embed_tokens.weight"]})
    load_checkpoint(tmp_path, TINY)
    write_checkpoint(tmp_path, {**weights, "lm_head.weight": weights["model.embed_tokens.weight"] ^ np.uint16(1)})
    with pytest.raises(ValueError, match="tied"):
        load_checkpoint(tmp_path, TINY)


def test_missing_or_misshapen_tensors_are_named(tmp_path: Path) -> None:
    weights = make_weights(TINY, 4)
    del weights["model.layers.1.mlp.up_proj.weight"]
    write_checkpoint(tmp_path, weights)
    with pytest.raises(ValueError, match="up_proj"):
        load_checkpoint(tmp_path, TINY)
    weights = make_weights(TINY, 4)
    weights["model.norm.weight"] = weights["model.norm.weight"][:-8]
    write_checkpoint(tmp_path, weights)
    with pytest.raises(ValueError, match="model.norm.weight"):
        load_checkpoint(tmp_path, TINY)


def test_float32_tensors_are_rounded_to_bf16(tmp_path: Path) -> None:
    values = np.linspace(-2, 2, 24, dtype=np.float32).reshape(4, 6)
    header = {"x": {"dtype": "F32", "shape": [4, 6], "data_offsets": [0, values.nbytes]}}
    text = json.dumps(header).encode()
    path = tmp_path / "f32.safetensors"
    path.write_bytes(len(text).to_bytes(8, "little") + text + values.tobytes())
    assert np.array_equal(read_safetensors(path)["x"], to_bf16_bits(values))
