"""Seeded random model weights and a float32 NumPy reference decode step.

The reference follows megakernel.cu's precision contract: bf16 weights and KV cache, float32
everything else, K and V rounded to bf16 on their way into the cache. Kernel and reference then
differ only by the order of float32 sums (about 1e-7 relative) and by the rare K or V element
whose bf16 rounding those differences tip over (one bf16 ulp, 2^-8 relative, in that element).

Weights use the Hugging Face Qwen3 names and layouts (``[out_features, in_features]``), stored as
``uint16`` arrays holding bf16 bit patterns. Nothing is ever zero: zeros hide unwritten outputs.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from kernels.megakernel.config import HEAD_DIM, ModelConfig

WEIGHT_STD = 0.02  # Qwen3's initializer range; keeps activations at realistic magnitudes
ATTENTION_SCALE = np.float32(1.0 / np.sqrt(HEAD_DIM))


# ---- bf16 ------------------------------------------------------------------------------------
def to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bit patterns (uint16), round to nearest even (the kernel's float_to_bf16)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = u + (np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1)))
    return (rounded >> np.uint32(16)).astype(np.uint16)


def bf16_bits_to_float(bits: np.ndarray) -> np.ndarray:
    """bf16 bit patterns (uint16) -> float32, exactly."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def round_bf16(x: np.ndarray) -> np.ndarray:
    """x rounded to the nearest bf16 value, as float32."""
    return bf16_bits_to_float(to_bf16_bits(x))


# ---- weights and caches ----------------------------------------------------------------------
def layer_prefix(layer: int) -> str:
    return f"model.layers.{layer}."


def weight_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor of the model in the Hugging Face Qwen3 layout (lm_head tied to the embedding)."""
    h, i = config.hidden, config.intermediate
    shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (config.vocab, h)}
    for layer in range(config.layers):
        p = layer_prefix(layer)
        shapes.update({
            p + "input_layernorm.weight": (h,),
            p + "self_attn.q_proj.weight": (config.q_dim, h),
            p + "self_attn.k_proj.weight": (config.kv_dim, h),
            p + "self_attn.v_proj.weight": (config.kv_dim, h),
            p + "self_attn.o_proj.weight": (h, config.q_dim),
            p + "self_attn.q_norm.weight": (HEAD_DIM,),
            p + "self_attn.k_norm.weight": (HEAD_DIM,),
            p + "post_attention_layernorm.weight": (h,),
            p + "mlp.gate_proj.weight": (i, h),
            p + "mlp.up_proj.weight": (i, h),
            p + "mlp.down_proj.weight": (h, i),
        })
    shapes["model.norm.weight"] = (h,)
    return shapes


def make_weights(config: ModelConfig, seed: int) -> dict[str, np.ndarray]:
    """Random bf16 weights (uint16 bit patterns) for every tensor of ``weight_shapes(config)``.

    Matrices and the embedding are N(0, 0.02^2); norm weights are 1 + N(0, 0.1^2), never zero.
    """
    rng = np.random.default_rng(seed)
    weights: dict[str, np.ndarray] = {}
    for name, shape in weight_shapes(config).items():
        if len(shape) == 1:
            values = 1.0 + 0.1 * rng.standard_normal(shape, dtype=np.float32)
        else:
            values = rng.standard_normal(shape, dtype=np.float32)
            values *= np.float32(WEIGHT_STD)
        weights[name] = to_bf16_bits(values)
    return weights


def random_kv_cache(config: ModelConfig, max_seq: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """K and V caches ``[layers, kv_heads, max_seq, 128]`` (bf16 bits) filled with random values,
    standing in for the positions a decode at some later position attends to. K is N(0, 1) like
    a normalised, rotated key; V is N(0, 0.5^2) like a value projection."""
    rng = np.random.default_rng(seed)
    shape = (config.layers, config.kv_heads, max_seq, HEAD_DIM)
    k = to_bf16_bits(rng.standard_normal(shape, dtype=np.float32))
    v = to_bf16_bits(np.float32(0.5) * rng.standard_normal(shape, dtype=np.float32))
    return k, v


def rope_table(config: ModelConfig, max_seq: int) -> np.ndarray:
    """``[max_seq, 128]`` float32: cos(p f_i) at [p, i] and sin(p f_i) at [p, 64 + i], with
    f_i = theta^(-2i/128), computed in float64 and rounded once (Hugging Face computes the angle
    in float32 and casts cos/sin to the activation dtype; this table is the kernel's contract)."""
    half = HEAD_DIM // 2
    inv_freq = config.rope_theta ** (-np.arange(0, HEAD_DIM, 2, dtype=np.float64) / HEAD_DIM)
    angles = np.arange(max_seq, dtype=np.float64)[:, None] * inv_freq[None, :]
    table = np.empty((max_seq, HEAD_DIM), dtype=np.float32)
    table[:, :half] = np.cos(angles)
    table[:, half:] = np.sin(angles)
    return table


# ---- the reference decode step ---------------------------------------------------------------
def _rmsnorm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """float32 x / sqrt(mean(x^2) + eps) * weight over the last axis (sum of squares in float64)."""
    mean_sq = (np.sum(np.square(x, dtype=np.float64), axis=-1, keepdims=True) / x.shape[-1]).astype(np.float32)
    inv_rms = np.float32(1.0) / np.sqrt(mean_sq + np.float32(eps))
    return x * inv_rms * weight


def _rope(x: np.ndarray, rope_row: np.ndarray) -> np.ndarray:
    """rotate_half RoPE on [..., 128]: pairs (i, i + 64)."""
    half = HEAD_DIM // 2
    cos, sin = rope_row[:half], rope_row[half:]
    lo, hi = x[..., :half], x[..., half:]
    return np.concatenate([lo * cos - hi * sin, hi * cos + lo * sin], axis=-1)


class ReferenceModel:
    """Float32 weights of one model and its decode step under the kernel's precision contract."""

    def __init__(self, config: ModelConfig, weights: Mapping[str, np.ndarray], max_seq: int):
        self.config = config
        self.rope = rope_table(config, max_seq)

        def f32(name: str) -> np.ndarray:
            return bf16_bits_to_float(weights[name])

        self.embed = f32("model.embed_tokens.weight")
        self.final_norm = f32("model.norm.weight")
        self.layers = []
        for layer in range(config.layers):
            p = layer_prefix(layer)
            self.layers.append({key: f32(p + name) for key, name in (
                ("norm_in", "input_layernorm.weight"), ("wq", "self_attn.q_proj.weight"),
                ("wk", "self_attn.k_proj.weight"), ("wv", "self_attn.v_proj.weight"),
                ("wo", "self_attn.o_proj.weight"), ("q_norm", "self_attn.q_norm.weight"),
                ("k_norm", "self_attn.k_norm.weight"), ("norm_post", "post_attention_layernorm.weight"),
                ("wg", "mlp.gate_proj.weight"), ("wu", "mlp.up_proj.weight"), ("wd", "mlp.down_proj.weight"),
            )})

    def decode_step(self, token: int, position: int, k_cache: np.ndarray, v_cache: np.ndarray) -> np.ndarray:
        """Logits (float32 ``[vocab]``) of one step; writes K and V of ``position`` into the caches
        (bf16 bits ``[layers, kv_heads, max_seq, 128]``) as the kernel does."""
        c = self.config
        eps = c.rms_eps
        x = self.embed[token].copy()
        for layer, w in enumerate(self.layers):
            h = _rmsnorm(x, w["norm_in"], eps)
            q = (w["wq"] @ h).reshape(c.q_heads, HEAD_DIM)
            k = (w["wk"] @ h).reshape(c.kv_heads, HEAD_DIM)
            v = (w["wv"] @ h).reshape(c.kv_heads, HEAD_DIM)
            rope_row = self.rope[position]
            q = _rope(_rmsnorm(q, w["q_norm"], eps), rope_row)
            k = _rope(_rmsnorm(k, w["k_norm"], eps), rope_row)
            k_cache[layer, :, position] = to_bf16_bits(k)
            v_cache[layer, :, position] = to_bf16_bits(v)
            keys = bf16_bits_to_float(k_cache[layer, :, : position + 1])
            values = bf16_bits_to_float(v_cache[layer, :, : position + 1])
            attn = np.empty((c.q_heads, HEAD_DIM), dtype=np.float32)
            for head in range(c.q_heads):
                g = head // c.gqa
                scores = (keys[g] @ q[head]) * ATTENTION_SCALE
                e = np.exp(scores - scores.max())
                attn[head] = (e @ values[g]) / e.sum()
            x = x + w["wo"] @ attn.reshape(-1)
            h = _rmsnorm(x, w["norm_post"], eps)
            gate, up = w["wg"] @ h, w["wu"] @ h
            with np.errstate(over="ignore"):  # exp(-gate) may overflow to inf: silu -> -0, as on the GPU
                act = gate / (np.float32(1.0) + np.exp(-gate)) * up
            x = x + w["wd"] @ act
        return self.embed @ _rmsnorm(x, self.final_norm, eps)

    def greedy(self, first_token: int, steps: int, k_cache: np.ndarray, v_cache: np.ndarray) -> tuple[list[int], list[float]]:
        """Greedy decode from position 0: the tokens chosen after each step and each step's gap
        between the best and second-best logit."""
        tokens, gaps = [], []
        token = first_token
        for position in range(steps):
            logits = self.decode_step(token, position, k_cache, v_cache)
            top2 = np.partition(logits, -2)[-2:]
            token = int(np.argmax(logits))
            tokens.append(token)
            gaps.append(float(top2[1] - top2[0]))
        return tokens, gaps
