"""Shared models for the megakernel tests: built once per session, only when a test asks."""
from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pytest

from kernels.megakernel.config import QWEN3_0_6B
from kernels.megakernel.family import MAX_SEQ

FULL_SEED = 0


@pytest.fixture(scope="session")
def full_weights() -> dict[str, np.ndarray]:
    """Seeded random weights of the full Qwen3-0.6B shape (1.2 GB of bf16, about 15 s to draw)."""
    from kernels.megakernel.reference import make_weights

    return make_weights(QWEN3_0_6B, FULL_SEED)


@pytest.fixture(scope="session")
def full_model(gpu: Any, full_weights: dict[str, np.ndarray]) -> Iterator[Any]:
    """The full model on the GPU with a KV cache of MAX_SEQ positions."""
    from kernels.megakernel.launch import Megakernel

    yield Megakernel(QWEN3_0_6B, full_weights, max_seq=MAX_SEQ)


@pytest.fixture(scope="session")
def full_reference(full_weights: dict[str, np.ndarray]) -> Any:
    """The float32 NumPy reference of the full model (2.4 GB of float32 weights)."""
    from kernels.megakernel.reference import ReferenceModel

    return ReferenceModel(QWEN3_0_6B, full_weights, MAX_SEQ)
