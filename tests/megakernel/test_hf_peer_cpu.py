"""The transformers peer (hf_peer.HFStaticCachePeer) on the CPU against the float32 reference.

The GPU test (test_correctness.py::test_hf_peer_matches_reference) needs a GPU; this
one runs the same eager step on the CPU wherever torch and transformers are installed (CI has
neither, so it skips there). It checks what the peer's past failures broke: the write row and
the mask following the step's position (transformers 5.x's StaticLayer counter), the rotary
frequencies kept in float32, steps taken out of order, and that a step writes only its own cache
row. It also pins down what a "relative L2 0.88" once seen on an H200 was: not the peer, but "our" logits computed on a KV cache that earlier steps had written into.

Measured on the CPU (torch 2.13, transformers 5.17 and 5.23): relative L2 0.006-0.008 on TINY;
0.023 / 0.041 on the full model at positions 7 / 600 (HF_PEER_CPU_FULL=1 runs that, ~1 minute).
"""
from __future__ import annotations

import os
from typing import Any, Iterator

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from kernels.megakernel import hf_peer  # noqa: E402
from kernels.megakernel.config import QWEN3_0_6B, TINY  # noqa: E402
from kernels.megakernel.family import HF_CHECK_STEPS, MAX_SEQ  # noqa: E402
from kernels.megakernel.reference import ReferenceModel, make_weights, random_kv_cache  # noqa: E402

TINY_SEQ = 64
TINY_TOKEN = 1234 % TINY.vocab
# In an order that moves the position back and forth: each step must write, and attend up to,
# its own position whatever the step before it did.
TINY_POSITIONS = (7, 0, 40, 1, 63, 7)
TINY_MAX_REL_L2 = 0.03  # measured 0.006-0.008: bf16 alone, two layers


@pytest.fixture(scope="module")
def tiny() -> dict[str, Any]:
    weights = make_weights(TINY, 0)
    k, v = random_kv_cache(TINY, TINY_SEQ, seed=1)
    return {"weights": weights, "k": k, "v": v, "ref": ReferenceModel(TINY, weights, TINY_SEQ)}


@pytest.fixture(scope="module")
def tiny_peer(tiny: dict[str, Any]) -> Iterator[hf_peer.HFStaticCachePeer]:
    assert hf_peer.cpu_unavailable_reason() is None
    peer = hf_peer.HFStaticCachePeer(TINY, tiny["weights"], TINY_SEQ, device="cpu")
    yield peer
    peer.close()


def reference_step(tiny: dict[str, Any], token: int, position: int) -> np.ndarray:
    return tiny["ref"].decode_step(token, position, tiny["k"].copy(), tiny["v"].copy())


def test_tiny_peer_matches_reference(tiny: dict[str, Any], tiny_peer: hf_peer.HFStaticCachePeer) -> None:
    records = [hf_peer.cross_check(tiny_peer, reference_step(tiny, TINY_TOKEN, p), tiny["k"], tiny["v"], TINY_TOKEN, p)
               for p in TINY_POSITIONS]
    failed = [r for r in records if not r["ok"] or r["rel_l2"] > TINY_MAX_REL_L2]
    assert not failed, f"CPU peer differs from the reference ({tiny_peer.attn_implementation}): {failed}"


def test_tiny_step_writes_the_reference_kv_row(tiny: dict[str, Any], tiny_peer: hf_peer.HFStaticCachePeer) -> None:
    """The row the step writes is the reference's K (after q/k-norm and RoPE) and V, within bf16."""
    import torch

    position = 7
    k_after, v_after = tiny["k"].copy(), tiny["v"].copy()
    tiny["ref"].decode_step(TINY_TOKEN, position, k_after, v_after)
    tiny_peer.prefill(tiny["k"], tiny["v"], position)
    tiny_peer.set_step(TINY_TOKEN, position)
    tiny_peer.step()
    for layer in range(TINY.layers):
        for got, want in zip(hf_peer._cache_tensors(tiny_peer.cache, layer), (k_after, v_after)):
            row = got[0, :, position].float().numpy()
            expected = (want[layer, :, position].astype(np.uint32) << 16).view(np.float32)
            rel = np.linalg.norm(row - expected) / np.linalg.norm(expected)
            assert rel < 0.02, f"layer {layer}: cache row {position} differs from the reference by {rel:.3g}"
            assert torch.count_nonzero(got[0, :, position + 1:]) == 0, "the step wrote past its own row"


def test_stale_cache_is_another_function(tiny: dict[str, Any], tiny_peer: hf_peer.HFStaticCachePeer) -> None:
    """The 0.88 of an H200 run: the perf fixture compared the peer (fresh prefill) with our step on a KV
    cache that earlier timed steps (TOKEN at positions 1, 10, ...) had written into. Logits from
    such a cache fail check_logits even though the peer is right, so 'ours' must be computed from
    the same prefill the peer gets."""
    position = 7
    k, v = tiny["k"].copy(), tiny["v"].copy()
    tiny["ref"].decode_step(TINY_TOKEN, 1, k, v)  # an earlier step at position 1 wrote row 1
    stale = tiny["ref"].decode_step(TINY_TOKEN, position, k, v)
    fresh = hf_peer.cross_check(tiny_peer, reference_step(tiny, TINY_TOKEN, position), tiny["k"], tiny["v"],
                                TINY_TOKEN, position)
    against_stale = hf_peer.cross_check(tiny_peer, stale, tiny["k"], tiny["v"], TINY_TOKEN, position)
    assert fresh["ok"] and not against_stale["ok"], (fresh, against_stale)


def test_rotary_frequencies_stay_float32(tiny_peer: hf_peer.HFStaticCachePeer) -> None:
    import torch

    buffers = [m.inv_freq for m in tiny_peer.model.modules() if isinstance(getattr(m, "inv_freq", None), torch.Tensor)]
    assert buffers and all(b.dtype == torch.float32 for b in buffers)
    np.testing.assert_array_equal(buffers[0].numpy(), hf_peer.expected_inv_freq(TINY))


def test_lm_head_is_the_embedding(tiny: dict[str, Any], tiny_peer: hf_peer.HFStaticCachePeer) -> None:
    import torch

    model = tiny_peer.model
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    embed = model.model.embed_tokens.weight.detach().view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(embed, tiny["weights"]["model.embed_tokens.weight"])


def test_capture_needs_cuda(tiny_peer: hf_peer.HFStaticCachePeer) -> None:
    with pytest.raises(RuntimeError, match="CUDA"):
        tiny_peer.capture()


@pytest.mark.skipif(os.environ.get("HF_PEER_CPU_FULL") != "1",
                    reason="full Qwen3-0.6B on the CPU takes about a minute and 8 GB: set HF_PEER_CPU_FULL=1")
def test_full_peer_matches_reference_on_cpu() -> None:
    """The GPU test's steps (family.HF_CHECK_STEPS from the seed-1 prefill) on the CPU."""
    weights = make_weights(QWEN3_0_6B, 0)
    k, v = random_kv_cache(QWEN3_0_6B, MAX_SEQ, seed=1)
    ref = ReferenceModel(QWEN3_0_6B, weights, MAX_SEQ)
    expected = {s: ref.decode_step(*s, k.copy(), v.copy()) for s in HF_CHECK_STEPS}
    peer = hf_peer.HFStaticCachePeer(QWEN3_0_6B, weights, MAX_SEQ, device="cpu")
    try:
        records = [hf_peer.cross_check(peer, expected[s], k, v, *s) for s in HF_CHECK_STEPS]
    finally:
        peer.close()
    assert all(r["ok"] for r in records), records
