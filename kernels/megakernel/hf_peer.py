"""The peer the issue compares against: Hugging Face transformers' Qwen3 with a static KV cache,
one decode step captured in a CUDA graph, with the same random weights as the megakernel.

The peer must compute the same function as the megakernel before its time means anything, so
``check_logits`` compares its logits with ours (bf16 tolerance, same argmax) and the tests and the
sweep refuse to time a peer that fails it. An early version of this peer, timed on an H200, did not
(relative L2 1.17 against the megakernel): transformers 5.x's ``StaticLayer`` ignores
``cache_position`` and writes each step at its own ``cumulative_length`` counter, which every
forward, and so every graph replay, advances by one. The captured step therefore wrote its keys
at a drifting row, attended to the wrong number of keys (the mask reads the same counter), and
after ``max_cache_len`` replays indexed past the cache: the ``index_copy_`` device-side assert
that stopped a perf run. Here every step first sets each layer's counter to the step's position (an
op on the device, so the captured graph does it too), which makes the write row and the mask
follow ``cache_position`` as on transformers versions that honour it.

Two more differences from the megakernel's model are removed: ``model.to(bfloat16)`` also casts
the rotary ``inv_freq`` buffer to bf16 (a checkpoint loaded in bf16 keeps it in float32), so it is
restored; and rows past the step's position are zeroed in the cache, for versions that derive the
sequence length from non-zero rows.

A "relative L2 0.88 at position 7" once seen on an H200 was not the peer: test_correctness.py's check of the
peer against the float32 reference passed in that run; the perf fixture compared the peer (fresh
prefill) with our step on a KV cache whose rows 1, 10, 50, ... earlier timed steps had written.
The reference on such a cache gives exactly that (0.889 at 7, 0.825 at 600). Expected logits
must come from the same prefill the peer gets. On the CPU (``device="cpu"``, torch 2.13,
transformers 5.17 and 5.23) the peer is within 0.023 / 0.041 of the reference at positions 7 /
600, its residual stream within bf16 drift at every layer; tests/megakernel/test_hf_peer_cpu.py.

transformers' cache API has changed across versions (``StaticCache(config=, max_cache_len=)`` with
lazily allocated layers in 5.x; ``max_batch_size``/``device``/``dtype`` arguments and
``key_cache`` lists before), so construction tries the known forms.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from kernels.megakernel.config import HEAD_DIM, ModelConfig

# The peer runs bf16 end to end (activations, residual stream, K/V, softmax weights, logits); the
# megakernel keeps activations in float32. A NumPy emulation of transformers' bf16 rounding points
# against the float32 reference (full model, seed 0, KV prefill seed 1, token 1234) gave relative
# L2 0.023 / 0.045 / 0.052 at positions 7 / 200 / 600, max |logit difference| 0.06 / 0.15 / 0.16
# (logits have std 0.65, top logit about 3.1). A different function (the early peer above) gives
# about 1.2. So: relative L2 at most 0.15, and the same argmax unless our top two logits are
# within ARGMAX_TIE of each other, in which case the peer's argmax must be one of our tokens within
# ARGMAX_TIE of the top.
PEER_MAX_REL_L2 = 0.15
ARGMAX_TIE = 0.25


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


def cpu_unavailable_reason() -> str | None:
    """Why the peer cannot run eagerly on the CPU here (torch or transformers missing), or None."""
    try:
        importlib.import_module("torch")
        importlib.import_module("transformers")
    except ImportError as exc:
        return f"torch/transformers not importable: {exc}"
    return None


@dataclass(frozen=True)
class LogitCheck:
    """The peer's logits against ours (or the reference's) at one step."""

    rel_l2: float
    max_abs: float
    argmax: int
    expected_argmax: int
    expected_gap: float  # our top-1 minus top-2 logit
    ok: bool
    why: str

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def check_logits(actual: np.ndarray, expected: np.ndarray, *, max_rel_l2: float = PEER_MAX_REL_L2,
                 argmax_tie: float = ARGMAX_TIE) -> LogitCheck:
    """Whether ``actual`` (the peer's logits) computes the same function as ``expected``: relative
    L2 within ``max_rel_l2``, and the same argmax unless ``expected``'s top two are within
    ``argmax_tie`` (then ``actual``'s argmax must be within ``argmax_tie`` of ``expected``'s top)."""
    a = np.asarray(actual, dtype=np.float64).reshape(-1)
    e = np.asarray(expected, dtype=np.float64).reshape(-1)
    if a.shape != e.shape:
        raise ValueError(f"logits of shape {a.shape} against {e.shape}")
    rel = float(np.linalg.norm(a - e) / np.linalg.norm(e)) if np.all(np.isfinite(a)) else float("inf")
    top2 = np.partition(e, -2)[-2:]
    gap = float(top2[1] - top2[0])
    arg, earg = int(np.argmax(a)), int(np.argmax(e))
    problems = []
    if not rel <= max_rel_l2:
        problems.append(f"relative L2 {rel:.4g} > {max_rel_l2}")
    if arg != earg:
        if gap > argmax_tie:
            problems.append(f"argmax {arg} != {earg} (top-2 gap {gap:.3g} > tie {argmax_tie})")
        elif e[arg] < e[earg] - argmax_tie:
            problems.append(f"argmax {arg} is {e[earg] - e[arg]:.3g} below the top logit (tie {argmax_tie})")
    max_abs = float(np.max(np.abs(a - e))) if np.all(np.isfinite(a)) else float("inf")
    return LogitCheck(rel, max_abs, arg, earg, gap, not problems, "; ".join(problems) or "ok")


def _qwen3_config(config: ModelConfig, max_positions: int) -> Any:
    import transformers

    common = dict(vocab_size=config.vocab, hidden_size=config.hidden, intermediate_size=config.intermediate,
                  num_hidden_layers=config.layers, num_attention_heads=config.q_heads,
                  num_key_value_heads=config.kv_heads, head_dim=HEAD_DIM, rms_norm_eps=config.rms_eps,
                  tie_word_embeddings=True, attention_bias=False, max_position_embeddings=max_positions,
                  hidden_act="silu", use_sliding_window=False)
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


def _position_counters(cache: Any) -> list[Any]:
    """Per-layer write-position tensors of transformers 5.x's StaticLayer (empty before it)."""
    import torch

    counters = []
    for entry in getattr(cache, "layers", ()):
        counter = getattr(entry, "cumulative_length", None)
        if isinstance(counter, torch.Tensor):
            counters.append(counter)
    return counters


def expected_inv_freq(config: ModelConfig) -> np.ndarray:
    """transformers' default RoPE inverse frequencies, float32 as it computes them."""
    exponents = np.arange(0, HEAD_DIM, 2, dtype=np.int64).astype(np.float32) / np.float32(HEAD_DIM)
    return (np.float32(1.0) / (np.float32(config.rope_theta) ** exponents)).astype(np.float32)


class HFStaticCachePeer:
    """Qwen3ForCausalLM in bf16 on the GPU, the megakernel's weights copied in, one decode step
    (input_ids [1, 1], cache_position [1]) that can be captured in a CUDA graph.

    ``device="cpu"`` builds the same peer on the CPU for eager checks (no graph, no timing by
    events): slow, but it needs no GPU, which is what tests/megakernel/test_hf_peer_cpu.py uses."""

    def __init__(self, config: ModelConfig, weights: Mapping[str, np.ndarray], max_cache_len: int,
                 device: str = "cuda"):
        import torch
        import transformers

        self.config = config
        self.max_cache_len = max_cache_len
        self.device = torch.device(device)
        if self.device.type not in ("cuda", "cpu"):
            raise ValueError(f"device must be cuda or cpu, got {device!r}")
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
        self._restore_float32_inv_freq(model)
        self.model = model
        self.attn_implementation = str(getattr(model.config, "_attn_implementation", "?"))
        self._check_model()
        self.cache = _static_cache(hf_config, max_cache_len, self.device, torch.bfloat16)
        self.input_ids = torch.zeros((1, 1), dtype=torch.long, device=self.device)
        self.cache_position = torch.zeros((1,), dtype=torch.long, device=self.device)
        self._counters: list[Any] = []
        self.graph: Any = None
        self.logits: Any = None
        self._forward()  # allocates lazily initialised cache layers before any capture
        self._counters = _position_counters(self.cache)
        keys, _ = _cache_tensors(self.cache, 0)
        if tuple(keys.shape) != (1, config.kv_heads, max_cache_len, HEAD_DIM):
            raise RuntimeError(f"static cache layer of shape {tuple(keys.shape)}, expected "
                               f"{(1, config.kv_heads, max_cache_len, HEAD_DIM)}")
        self._prefill_k: Any = None
        self._prefill_v: Any = None

    @property
    def on_cuda(self) -> bool:
        return self.device.type == "cuda"

    def _synchronize(self) -> None:
        """Wait for the device (a no-op on the CPU, where every op has finished on return)."""
        if self.on_cuda:
            import torch

            torch.cuda.synchronize()

    # ---- the model ----------------------------------------------------------------------
    def _restore_float32_inv_freq(self, model: Any) -> None:
        import torch

        # Recomputed, not copied from `original_inv_freq`: transformers 5.17 keeps that as a
        # buffer too, so model.to(bfloat16) had already rounded it (seen on the H200: 0.8046875
        # where theta=1e6 gives 0.80584).
        exact = torch.from_numpy(expected_inv_freq(self.config)).to(device=self.device, dtype=torch.float32)
        for module in model.modules():
            if isinstance(getattr(module, "inv_freq", None), torch.Tensor):
                module.inv_freq = exact.clone()
                if isinstance(getattr(module, "original_inv_freq", None), torch.Tensor):
                    module.original_inv_freq = exact.clone()

    def _check_model(self) -> None:
        """Fail fast on a configuration that is not the megakernel's model."""
        import torch

        found = [m.inv_freq for m in self.model.modules() if isinstance(getattr(m, "inv_freq", None), torch.Tensor)]
        if not found:
            raise RuntimeError("no rotary inv_freq buffer found in the model")
        got = found[0].float().cpu().numpy()
        if not np.allclose(got, expected_inv_freq(self.config), rtol=1e-6, atol=0):
            raise RuntimeError(f"rotary frequencies differ from theta={self.config.rope_theta}: {got[:4]}...")
        for layer in self.model.model.layers:
            attn = layer.self_attn
            if getattr(attn, "head_dim", HEAD_DIM) != HEAD_DIM or abs(attn.scaling - HEAD_DIM ** -0.5) > 1e-9:
                raise RuntimeError(f"attention head_dim/scaling {attn.head_dim}/{attn.scaling}, expected 128/128^-0.5")
            if getattr(attn, "sliding_window", None) is not None:
                raise RuntimeError(f"layer {attn.layer_idx} uses a sliding window ({attn.sliding_window})")

    def _forward(self) -> Any:
        import torch

        with torch.no_grad():
            for counter in self._counters:  # the write row and the mask follow cache_position
                counter.copy_(self.cache_position[0])
            out = self.model(input_ids=self.input_ids, past_key_values=self.cache, cache_position=self.cache_position,
                             use_cache=True)
        return out.logits

    # ---- state ---------------------------------------------------------------------------
    def prefill(self, k_cache: np.ndarray, v_cache: np.ndarray, positions: int) -> None:
        """Keys/values 0..positions-1 from ``k_cache``/``v_cache`` (bf16 bits ``[layers, kv_heads,
        max_cache_len, 128]``, kept on the device after the first call) into every layer; the rows
        from ``positions`` on are zeroed."""
        import torch

        c = self.config
        expected = (c.layers, c.kv_heads, self.max_cache_len, HEAD_DIM)
        for name, value in (("k_cache", k_cache), ("v_cache", v_cache)):
            if value.shape != expected or value.dtype != np.uint16:
                raise ValueError(f"{name} must be uint16 of shape {expected}, got {value.dtype} {value.shape}")
        if not 0 <= positions <= self.max_cache_len:
            raise ValueError(f"positions must be in [0, {self.max_cache_len}], got {positions}")
        if self._prefill_k is None or self._prefill_k[1] is not k_cache or self._prefill_v[1] is not v_cache:
            def upload(a: np.ndarray) -> Any:
                return torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(torch.bfloat16).to(self.device)
            self._prefill_k, self._prefill_v = (upload(k_cache), k_cache), (upload(v_cache), v_cache)
        for layer in range(c.layers):
            keys, values = _cache_tensors(self.cache, layer)
            for source, target in ((self._prefill_k[0], keys), (self._prefill_v[0], values)):
                target[0, :, :positions].copy_(source[layer, :, :positions])
                target[0, :, positions:].zero_()
        self._synchronize()

    def untouched_rows_equal(self, positions: int) -> bool:
        """Whether rows 0..positions-1 of every layer still hold the last prefill (a step at
        ``positions`` writes only its own row)."""
        import torch

        if self._prefill_k is None:
            raise RuntimeError("prefill() first")
        for layer in range(self.config.layers):
            keys, values = _cache_tensors(self.cache, layer)
            for source, target in ((self._prefill_k[0], keys), (self._prefill_v[0], values)):
                if not torch.equal(target[0, :, :positions], source[layer, :, :positions]):
                    return False
        return True

    def set_step(self, token: int, position: int) -> None:
        """Point the (captured) step at ``token`` decoded at ``position``. Out-of-range values would
        trip a device-side assert in the embedding or the cache's index_copy_, so they are refused."""
        if not 0 <= token < self.config.vocab:
            raise ValueError(f"token must be in [0, {self.config.vocab}), got {token}")
        if not 0 <= position < self.max_cache_len:
            raise ValueError(f"position must be in [0, {self.max_cache_len}), got {position}")
        self.input_ids.fill_(token)
        self.cache_position.fill_(position)
        self._synchronize()  # replays may run on another stream (CuPy's)

    def write_positions(self) -> list[int]:
        """Each layer's write counter (transformers 5.x), for checks: position + 1 after a step."""
        return [int(c.item()) for c in self._counters]

    # ---- running -------------------------------------------------------------------------
    def capture(self) -> None:
        """Warm up on a side stream, then capture one decode step into a CUDA graph (CUDA only)."""
        import torch

        if not self.on_cuda:
            raise RuntimeError(f"capture() needs a CUDA device; this peer runs on {self.device} (use step())")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self._forward()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.logits = self._forward()
        torch.cuda.synchronize()
        self.graph = graph

    def step(self) -> Any:
        """One decode step now (graph replay if captured, else eager); returns the logits tensor."""
        if self.graph is not None:
            self.graph.replay()
            return self.logits
        return self._forward()

    def step_logits(self) -> np.ndarray:
        """One step, its logits as float32 ``[vocab]`` on the host."""
        return self.step().float().cpu().numpy().reshape(-1)

    def launcher_on_cupy_stream(self) -> Callable[[], None]:
        """A closure replaying the graph on CuPy's current stream (for the plugin's timer). A torch
        graph cannot be replayed inside another capture: the closure then raises, and the plugin
        times it with events (a 4.8 ms step dwarfs the launch overhead)."""
        import cupy
        import torch

        if self.graph is None:
            raise RuntimeError("capture() first (CUDA only)")
        graph = self.graph

        def launch() -> None:
            with torch.cuda.stream(torch.cuda.ExternalStream(cupy.cuda.get_current_stream().ptr)):
                if torch.cuda.is_current_stream_capturing():
                    raise RuntimeError("a torch CUDA graph cannot be replayed inside a CuPy graph capture")
                graph.replay()

        return launch

    def time_step(self, iterations: int = 50) -> float:
        """Median seconds per step over ``iterations`` replays (or eager calls), by CUDA events
        (by the host clock on the CPU)."""
        import time

        import torch

        times = []
        if not self.on_cuda:
            for _ in range(iterations):
                start_s = time.perf_counter()
                self.step()
                times.append(time.perf_counter() - start_s)
            return float(np.median(times))
        for _ in range(iterations):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            self.step()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        return float(np.median(times))

    def close(self) -> None:
        """Release the model, cache and graph (finishing outstanding work first)."""
        import torch

        if self.model is None:
            return
        self._synchronize()
        self.graph = self.logits = self.model = self.cache = None
        self._counters = []
        self._prefill_k = self._prefill_v = None
        if self.on_cuda:
            torch.cuda.empty_cache()


def cross_check(peer: HFStaticCachePeer, expected_logits: np.ndarray, k_cache: np.ndarray, v_cache: np.ndarray,
                token: int, position: int) -> dict[str, Any]:
    """One peer step at ``position`` from the prefill 0..position-1, against ``expected_logits``
    (ours or the reference's, from the same prefill: a cache that other steps have written into
    computes other logits, relative L2 about 0.9 on the full model). Also checks that the step
    wrote only its own cache row and, on transformers 5.x, left every layer's write counter at
    position + 1."""
    peer.prefill(k_cache, v_cache, position)
    peer.set_step(token, position)
    logits = peer.step_logits()
    check = check_logits(logits, expected_logits)
    record: dict[str, Any] = {"position": position, "token": token, **check.as_dict()}
    problems = [] if check.ok else [check.why]
    if not peer.untouched_rows_equal(position):
        problems.append(f"the step changed cache rows before {position}")
    counters = peer.write_positions()
    if counters and set(counters) != {position + 1}:
        problems.append(f"write counters {sorted(set(counters))} after a step at {position}, expected {position + 1}")
    record["ok"] = not problems
    record["why"] = "; ".join(problems) or "ok"
    return record
