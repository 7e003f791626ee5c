"""Hugging Face Qwen3 checkpoints: safetensors read/write (no dependency) and config.json.

A checkpoint directory holds ``config.json`` and either ``model.safetensors`` or shards listed in
``model.safetensors.index.json``. Tensors come back as ``uint16`` bf16 bit patterns in the Hugging
Face layout, ready for ``layout.pack_weights``; float32/float16 tensors are rounded to bf16.
"""
from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Mapping

import numpy as np

from kernels.megakernel.config import HEAD_DIM, ModelConfig
from kernels.megakernel.reference import to_bf16_bits, weight_shapes

_HEADER_LIMIT = 100 * 1024 * 1024  # safetensors caps its JSON header at 100 MB
_DTYPES = {"BF16": np.uint16, "F16": np.float16, "F32": np.float32}


def write_safetensors(path: str | Path, tensors: Mapping[str, np.ndarray], metadata: Mapping[str, str] | None = None) -> None:
    """Write ``uint16`` bf16 bit-pattern arrays as a safetensors file (dtype BF16)."""
    header: dict[str, object] = {"__metadata__": dict(metadata or {"format": "pt"})}
    offset = 0
    blobs = []
    for name, array in tensors.items():
        if array.dtype != np.uint16:
            raise ValueError(f"{name}: expected uint16 bf16 bit patterns, got {array.dtype}")
        blob = np.ascontiguousarray(array).astype("<u2", copy=False).tobytes()
        header[name] = {"dtype": "BF16", "shape": list(array.shape), "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # keep the data 8-byte aligned, as the reference writer does
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def read_safetensors(path: str | Path) -> dict[str, np.ndarray]:
    """Every tensor of a safetensors file, as bf16 bit patterns (``uint16``)."""
    path = Path(path)
    with open(path, "rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        if size > _HEADER_LIMIT:
            raise ValueError(f"{path}: header of {size} bytes is larger than safetensors allows")
        header = json.loads(f.read(size))
        data = np.frombuffer(f.read(), dtype=np.uint8)
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(info["dtype"])
        if dtype is None:
            raise ValueError(f"{path}: tensor {name} has dtype {info['dtype']}; supported: {sorted(_DTYPES)}")
        begin, end = info["data_offsets"]
        shape = tuple(info["shape"])
        count = int(np.prod(shape, dtype=np.int64))
        if end - begin != count * np.dtype(dtype).itemsize or end > data.size:
            raise ValueError(f"{path}: tensor {name} has offsets {begin}..{end}, inconsistent with shape {shape}")
        values = data[begin:end].view(np.dtype(dtype).newbyteorder("<")).reshape(shape)
        tensors[name] = values.astype(np.uint16) if dtype is np.uint16 else to_bf16_bits(values.astype(np.float32))
    return tensors


def config_from_hf(path: str | Path, name: str = "checkpoint") -> ModelConfig:
    """ModelConfig from a Hugging Face Qwen3 ``config.json``."""
    cfg = json.loads(Path(path).read_text())
    head_dim = cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])
    if head_dim != HEAD_DIM:
        raise ValueError(f"{path}: head_dim must be {HEAD_DIM}, got {head_dim}")
    if not cfg.get("tie_word_embeddings", False):
        raise ValueError(f"{path}: the kernel reads the embedding as LM head; tie_word_embeddings must be true")
    rope = cfg.get("rope_parameters") or {}
    return ModelConfig(name, layers=cfg["num_hidden_layers"], hidden=cfg["hidden_size"],
                       q_heads=cfg["num_attention_heads"], kv_heads=cfg["num_key_value_heads"],
                       intermediate=cfg["intermediate_size"], vocab=cfg["vocab_size"],
                       rope_theta=float(rope.get("rope_theta", cfg.get("rope_theta", 1e6))),
                       rms_eps=float(cfg.get("rms_norm_eps", 1e-6)))


def load_checkpoint(directory: str | Path, config: ModelConfig) -> dict[str, np.ndarray]:
    """The weights of a Hugging Face Qwen3 checkpoint directory, checked against ``config``."""
    directory = Path(directory)
    index = directory / "model.safetensors.index.json"
    if index.exists():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    tensors: dict[str, np.ndarray] = {}
    for file in files:
        tensors.update(read_safetensors(directory / file))
    lm_head = tensors.pop("lm_head.weight", None)
    expected = weight_shapes(config)
    missing = sorted(set(expected) - set(tensors))
    if missing:
        raise ValueError(f"{directory}: missing tensors {missing[:5]}{' ...' if len(missing) > 5 else ''}")
    for name, shape in expected.items():
        if tensors[name].shape != shape:
            raise ValueError(f"{directory}: {name} has shape {tensors[name].shape}, expected {shape}")
    if lm_head is not None and not np.array_equal(lm_head, tensors["model.embed_tokens.weight"]):
        raise ValueError(f"{directory}: lm_head.weight differs from the embedding; the kernel needs them tied")
    return {name: tensors[name] for name in expected}
