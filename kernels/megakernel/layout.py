"""The kernel's memory layout: packed weights, scratch buffers and the parameter struct.

Shared by the GPU launcher (CuPy arrays) and the CPU emulator (NumPy arrays): ``DecodeBuffers``
holds arrays of either kind and builds the ``MegakernelParams`` value from their addresses.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from kernels.megakernel.config import HEAD_DIM, ModelConfig
from kernels.megakernel.reference import layer_prefix, rope_table

# struct MegakernelParams in mk_config.cuh, field by field (tests/megakernel/test_layout.py
# checks the order against the source).
POINTER_FIELDS: tuple[str, ...] = (
    "embed", "w_qkv", "w_o", "w_gate_up", "w_down",
    "norm_in", "norm_post", "norm_q", "norm_k", "norm_final", "rope",
    "k_cache", "v_cache", "logits", "residual", "normed", "qkv", "q_rot",
    "attn_partial", "attn_out", "act", "sumsq_partial", "counters", "ll", "w_down_t", "down_acc", "w_o_t",
)
SCALAR_FIELDS: tuple[str, ...] = ("vocab", "max_seq")
PARAM_FIELDS = POINTER_FIELDS + SCALAR_FIELDS
PARAMS_DTYPE = np.dtype([(name, np.uint64) for name in POINTER_FIELDS] + [(name, np.int64) for name in SCALAR_FIELDS])

THREADS = 512          # kThreads
ATTN_TILE = 32         # kAttnTile: the smallest attention unit
ATTN_MAX_CHUNK = 1024  # kAttnMaxChunk
PARTIAL_STRIDE = HEAD_DIM + 2
ACC_WORDS_PER_OUTPUT = 16  # kAccWordsPerOutput: room for MK_ACC_COPIES x MK_ACC_STRIDE


# counters[]: 2 x kv_heads split-attention arrivals and head-group barrier words, then these slots
# (mk_config.cuh's kGridWordSlot, kLaunchSlot, kAccReadSlot, kLmClaimSlot, kLmDoneSlot).
COUNTER_SLOTS = ("grid_word", "launches", "acc_readers", "lm_claims", "lm_done")


def counter_slot(config: ModelConfig, name: str) -> int:
    """Index of the counter ``name`` (one of COUNTER_SLOTS) in the ``counters`` buffer."""
    return 2 * config.kv_heads + COUNTER_SLOTS.index(name)


TRACE_EVENTS_PER_LAYER = 30  # MK_TRACE_EVENTS_PER_LAYER (mk_device.cuh)
RING_SLOTS = 5         # kRingSlots
PAGE_BYTES = 32768    # kPageBytes


def shared_bytes(config: ModelConfig, ring: bool = False) -> int:
    """Dynamic shared memory per block: kSharedBytes in mk_shared.cuh, or with ``ring`` (the
    ring variants) kSharedBytesRing, which adds the weight ring and its barriers, and the keys of
    the block's attention unit (MK_UNIT_KEYS_SHARED)."""
    def round16(n: int) -> int:
        return (n + 15) // 16 * 16

    max_k = max(config.hidden, config.q_dim, config.intermediate)
    vec = round16(max_k * 4)
    partial = max(4096, (THREADS // 32) * config.gqa * HEAD_DIM) * 4
    scores = config.gqa * ATTN_MAX_CHUNK * 4
    q = config.gqa * HEAD_DIM * 4
    misc = 64 * 4
    # Used by the stream variant only: the K/V rows of the step, the block's residual rows, and the
    # weight stream's segment table (4 GEMV slices per layer and the LM head).
    kv_row = 2 * HEAD_DIM * 2
    own = round16(config.hidden * 4)
    segments = 4 * config.layers + 1
    segment_table = round16(segments * 8) + round16(segments * 4)
    base = vec + partial + scores + q + misc + kv_row + own + segment_table
    if not ring:
        return base
    table = round16((4 * config.layers + 1) * 8)
    ring_end = (base + 127) // 128 * 128 + RING_SLOTS * PAGE_BYTES + RING_SLOTS * 8 + table
    unit_keys = 2 * ATTN_TILE * HEAD_DIM * 2  # the keys of a block's attention unit, and their mbarrier
    return (ring_end + 127) // 128 * 128 + unit_keys + 16


def trace_stride() -> int:
    """Events per block row of ``mk_trace`` (MK_TRACE_STRIDE: room for 64 layers and the LM head)."""
    return TRACE_EVENTS_PER_LAYER * 64 + 8


def trace_events(config: ModelConfig) -> int:
    """Events a step records per block: 24 per layer, then 4 for the final norm and the LM head."""
    return TRACE_EVENTS_PER_LAYER * config.layers + 4


def pack_weights(config: ModelConfig, weights: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Hugging Face-layout bf16 tensors -> the kernel's packed layout (host arrays).

    ``w_qkv`` groups rows by kv head (its q heads, then k, then v) so that each kv head's rows
    are contiguous; ``w_gate_up`` interleaves gate and up rows so one block computes both halves
    of each SwiGLU product.
    """
    c = config
    layers = range(c.layers)

    def w(layer: int, name: str) -> np.ndarray:
        return np.asarray(weights[layer_prefix(layer) + name], dtype=np.uint16)

    qkv = np.empty((c.layers, c.kv_heads, c.gqa + 2, HEAD_DIM, c.hidden), dtype=np.uint16)
    gate_up = np.empty((c.layers, c.intermediate, 2, c.hidden), dtype=np.uint16)
    for layer in layers:
        qkv[layer, :, : c.gqa] = w(layer, "self_attn.q_proj.weight").reshape(c.kv_heads, c.gqa, HEAD_DIM, c.hidden)
        qkv[layer, :, c.gqa] = w(layer, "self_attn.k_proj.weight").reshape(c.kv_heads, HEAD_DIM, c.hidden)
        qkv[layer, :, c.gqa + 1] = w(layer, "self_attn.v_proj.weight").reshape(c.kv_heads, HEAD_DIM, c.hidden)
        gate_up[layer, :, 0] = w(layer, "mlp.gate_proj.weight")
        gate_up[layer, :, 1] = w(layer, "mlp.up_proj.weight")

    def stack(name: str) -> np.ndarray:
        return np.stack([w(layer, name) for layer in layers])

    return {
        "embed": np.asarray(weights["model.embed_tokens.weight"], dtype=np.uint16),
        "w_qkv": qkv.reshape(c.layers, c.qkv_rows, c.hidden),
        "w_o": stack("self_attn.o_proj.weight"),
        "w_gate_up": gate_up.reshape(c.layers, 2 * c.intermediate, c.hidden),
        "w_down": stack("mlp.down_proj.weight"),
        # dataflow_splitk reads a block's rows of W_down^T: the columns of its own SwiGLU outputs.
        "w_down_t": np.ascontiguousarray(stack("mlp.down_proj.weight").transpose(0, 2, 1)),
        # dataflow_splitk_o reads a block's rows of W_o^T: the columns of the attention outputs it computes.
        "w_o_t": np.ascontiguousarray(stack("self_attn.o_proj.weight").transpose(0, 2, 1)),
        "norm_in": stack("input_layernorm.weight"),
        "norm_post": stack("post_attention_layernorm.weight"),
        "norm_q": stack("self_attn.q_norm.weight"),
        "norm_k": stack("self_attn.k_norm.weight"),
        "norm_final": np.asarray(weights["model.norm.weight"], dtype=np.uint16),
    }


def max_attention_units(max_seq: int) -> int:
    """Most split-attention units one kv head can have (every unit holds at least one tile)."""
    return -(-max_seq // ATTN_TILE)


def scratch_arrays(config: ModelConfig, max_seq: int, max_blocks: int) -> dict[str, np.ndarray]:
    """Host scratch buffers, poisoned (NaN) so a read of anything unwritten shows; the arrival
    counters, barrier words, launch count and LL words start at zero, as the kernel requires."""
    c = config
    f32_nan = np.float32(np.nan)
    partial = c.kv_heads * max_attention_units(max_seq) * c.gqa * PARTIAL_STRIDE
    return {
        "logits": np.full(c.vocab, f32_nan, dtype=np.float32),
        "residual": np.full(c.hidden, f32_nan, dtype=np.float32),
        "normed": np.full(c.hidden, f32_nan, dtype=np.float32),
        "qkv": np.full(c.qkv_rows, f32_nan, dtype=np.float32),
        "q_rot": np.full(c.q_dim, f32_nan, dtype=np.float32),
        "attn_partial": np.full(partial, f32_nan, dtype=np.float32),
        "attn_out": np.full(c.q_dim, f32_nan, dtype=np.float32),
        "act": np.full(c.intermediate, f32_nan, dtype=np.float32),
        "sumsq_partial": np.full(max_blocks, f32_nan, dtype=np.float32),
        "counters": np.zeros(2 * c.kv_heads + len(COUNTER_SLOTS), dtype=np.uint32),
        # LL words of the dataflow variant (value, flag): flag 0 never matches a launch's flags.
        # Then dataflow_splitk_o's LL twin of attn_partial (the units' records).
        "ll": np.zeros(c.hidden + c.qkv_rows + c.q_dim + c.intermediate + max_blocks + partial, dtype=np.uint64),
        # The split-K variants' fixed-point accumulators, two slots per layer (dataflow_splitk uses
        # the first half for its down sums, dataflow_splitk_o all: O and down sums): zero between
        # launches (each launch zeroes what it used).
        "down_acc": np.zeros(2 * c.layers * c.hidden * ACC_WORDS_PER_OUTPUT, dtype=np.uint64),
    }


def _address(array: Any) -> int:
    if isinstance(array, np.ndarray):
        return int(array.ctypes.data)
    return int(array.data.ptr)  # cupy.ndarray


@dataclass
class DecodeBuffers:
    """Every array the kernel touches (NumPy or CuPy, all of one kind), by parameter name."""

    config: ModelConfig
    max_seq: int
    arrays: dict[str, Any]

    @classmethod
    def build(cls, config: ModelConfig, weights: Mapping[str, np.ndarray], max_seq: int, max_blocks: int,
              xp: Any = np) -> "DecodeBuffers":
        """Pack ``weights``, allocate caches (zeros until filled) and scratch, all as ``xp`` arrays."""
        host: dict[str, np.ndarray] = dict(pack_weights(config, weights))
        host["rope"] = rope_table(config, max_seq)
        host.update(scratch_arrays(config, max_seq, max_blocks))
        arrays = {name: xp.asarray(value) for name, value in host.items()}
        cache_shape = (config.layers, config.kv_heads, max_seq, HEAD_DIM)
        arrays["k_cache"] = xp.zeros(cache_shape, dtype=np.uint16)
        arrays["v_cache"] = xp.zeros(cache_shape, dtype=np.uint16)
        missing = set(POINTER_FIELDS) - set(arrays)
        if missing:
            raise AssertionError(f"buffers missing for {sorted(missing)}")
        return cls(config, max_seq, arrays)

    def params(self) -> np.ndarray:
        """The ``MegakernelParams`` value: a one-element structured array, passed by value."""
        value = np.zeros(1, dtype=PARAMS_DTYPE)
        for name in POINTER_FIELDS:
            value[name] = _address(self.arrays[name])
        value["vocab"] = self.config.vocab
        value["max_seq"] = self.max_seq
        return value

    def __getitem__(self, name: str) -> Any:
        return self.arrays[name]
