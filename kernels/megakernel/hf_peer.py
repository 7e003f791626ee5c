"""The peer the issue compares against: Hugging Face transformers' Qwen3 with a static KV cache,
one decode step captured in a CUDA graph, with the same random weights as the megakernel.

transformers' cache API has changed across versions (``StaticCache(config=, max_cache_len=)`` with
lazily allocated layers in 5.x; ``max_batch_size``/``device``/``dtype`` arguments and
``key_cache`` lists before), so each step tries the known forms and says which one failed.
"""
from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping

import numpy as np

from kernels.megakernel.config import HEAD_DIM, ModelConfig


def unavailable_reason() -> str | None:
    """Why the peer cannot run here (torch, CUDA or transformers missing), or None."""
    try:
        import torch

        importlib.import_module("transformers")
    except ImportError as exc:
        return f"torch/transformers not importable: {exc}"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return None


def _qwen3_config(config: ModelConfig, max_positions: int) -> Any:
    import transformers

    common = dict(vocab_size=config.vocab, hidden_size=config.hidden, intermediate_size=config.intermediate,
                  num_hidden_layers=config.layers, num_attention_heads=config.q_heads,
                  num_key_value_heads=config.kv_heads, head_dim=HEAD_DIM, rms_norm_eps=config.rms_eps,
                  tie_word_embeddings=True, attention_bias=False, max_position_embeddings=max_positions,
                  hidden_act="silu")
    try:  # transformers 5.x
        return transformers.Qwen3Config(**common, rope_parameters={"rope_type": "default", "rope_theta": config.rope_theta})
    except TypeError:
        return transformers.Qwen3Config(**common, rope_theta=config.rope_theta)


def _static_cache(hf_config: Any, max_cache_len: int, device: Any, dtype: Any) -> Any:
    from transformers import StaticCache

    try:  # transformers >= 4.56 / 5.x: layers allocated on first update
        return StaticCache(config=hf_config, max_cache_len=max_cache_len)
    except TypeError:
        return StaticCache(config=hf_config, max_batch_size=1, max_cache_len=max_cache_len, device=device, dtype=dtype)


def _cache_tensors(cache: Any, layer: int) -> tuple[Any, Any]:
    """The (keys, values) tensors ``[1, kv_heads, max_cache_len, 128]`` of one layer."""
    if hasattr(cache, "layers"):
        entry = cache.layers[layer]
        return entry.keys, entry.values
    return cache.key_cache[layer], cache.value_cache[layer]


class HFStaticCachePeer:
    """Qwen3ForCausalLM in bf16 on the GPU, the megakernel's weights copied in, one decode step
    (input_ids [1, 1], cache_position [1]) captured in a CUDA graph."""

    def __init__(self, config: ModelConfig, weights: Mapping[str, np.ndarray], max_cache_len: int):
        import torch
        import transformers

        self.config = config
        self.max_cache_len = max_cache_len
        self.device = torch.device("cuda")
        hf_config = _qwen3_config(config, max_cache_len)
        with self.device:
            model = transformers.Qwen3ForCausalLM(hf_config)
        model = model.to(dtype=torch.bfloat16).eval()
        state = {name: torch.from_numpy(np.ascontiguousarray(value).view(np.int16)).view(torch.bfloat16)
                 for name, value in weights.items()}
        missing, unexpected = model.load_state_dict(state, strict=False)
        if unexpected or set(missing) - {"lm_head.weight"}:
            raise RuntimeError(f"weights did not map onto Qwen3ForCausalLM: missing {missing}, unexpected {unexpected}")
        if model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr():
            model.lm_head.weight = model.model.embed_tokens.weight  # tie, as the checkpoint layout says
        self.model = model
        self.cache = _static_cache(hf_config, max_cache_len, self.device, torch.bfloat16)
        self.input_ids = torch.zeros((1, 1), dtype=torch.long, device=self.device)
        self.cache_position = torch.zeros((1,), dtype=torch.long, device=self.device)
        self.graph: Any = None
        self.logits: Any = None
        self._forward()  # allocates lazily initialised cache layers before any capture

    def _forward(self) -> Any:
        import torch

        with torch.no_grad():
            out = self.model(input_ids=self.input_ids, past_key_values=self.cache, cache_position=self.cache_position,
                             use_cache=True)
        return out.logits

    def set_kv_cache(self, k_cache: np.ndarray, v_cache: np.ndarray, positions: int) -> None:
        """Copy keys/values 0..positions-1 (bf16 bits ``[layers, kv_heads, S, 128]``) into the cache."""
        import torch

        for layer in range(self.config.layers):
            keys, values = _cache_tensors(self.cache, layer)
            for source, target in ((k_cache, keys), (v_cache, values)):
                block = np.ascontiguousarray(source[layer, :, :positions]).view(np.int16)
                target[0, :, :positions].copy_(torch.from_numpy(block).view(torch.bfloat16).to(self.device))

    def set_step(self, token: int, position: int) -> None:
        """Point the (captured) step at ``token`` decoded at ``position``."""
        if not 0 <= position < self.max_cache_len:
            raise ValueError(f"position must be in [0, {self.max_cache_len}), got {position}")
        self.input_ids.fill_(token)
        self.cache_position.fill_(position)

    def capture(self) -> None:
        """Warm up on a side stream, then capture one decode step into a CUDA graph."""
        import torch

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._forward()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.logits = self._forward()
        self.graph = graph

    def step(self) -> Any:
        """One decode step now (graph replay if captured, else eager); returns the logits tensor."""
        if self.graph is not None:
            self.graph.replay()
            return self.logits
        return self._forward()

    def launcher_on_cupy_stream(self) -> Callable[[], None]:
        """A closure replaying the graph on CuPy's current stream (for the plugin's timer)."""
        import cupy
        import torch

        if self.graph is None:
            raise RuntimeError("capture() first")
        graph = self.graph

        def launch() -> None:
            with torch.cuda.stream(torch.cuda.ExternalStream(cupy.cuda.get_current_stream().ptr)):
                graph.replay()

        return launch

    def time_step(self, iterations: int = 50) -> float:
        """Median seconds per step over ``iterations`` replays (or eager calls), by CUDA events."""
        import torch

        times = []
        for _ in range(iterations):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            self.step()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        return float(np.median(times))
