"""Model shapes the megakernel is compiled for, and the bytes a decode step must read."""
from __future__ import annotations

from dataclasses import dataclass

HEAD_DIM = 128  # fixed by the kernel's attention and QK-norm layouts
BF16_BYTES = 2


@dataclass(frozen=True)
class ModelConfig:
    """A Qwen3-style decoder: GQA attention with RMSNorm on q and k, RoPE, SwiGLU MLP, tied LM head."""

    name: str
    layers: int
    hidden: int
    q_heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    rope_theta: float = 1e6
    rms_eps: float = 1e-6

    def __post_init__(self) -> None:
        for field in ("layers", "hidden", "q_heads", "kv_heads", "intermediate", "vocab"):
            if getattr(self, field) < 1:
                raise ValueError(f"{field} must be at least 1, got {getattr(self, field)}")
        if self.q_heads % self.kv_heads:
            raise ValueError(f"q_heads ({self.q_heads}) must be a multiple of kv_heads ({self.kv_heads})")
        for field, value in (("hidden", self.hidden), ("intermediate", self.intermediate),
                             ("q_heads * 128", self.q_dim)):
            if value % 256:
                raise ValueError(f"{field} must be a multiple of 256 (one warp's 16-byte loads), got {value}")
        if self.gqa not in (1, 2):
            # Larger groups would push the kernel's shared memory past the 48 KB default.
            raise ValueError(f"q_heads / kv_heads must be 1 or 2, got {self.gqa}")
        if self.vocab * self.hidden // 8 >= 2**31:
            raise ValueError(f"vocab * hidden / 8 must fit in 32 bits (chunk indices), got vocab={self.vocab}")

    @property
    def gqa(self) -> int:
        """Query heads per kv head."""
        return self.q_heads // self.kv_heads

    @property
    def q_dim(self) -> int:
        return self.q_heads * HEAD_DIM

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * HEAD_DIM

    @property
    def qkv_rows(self) -> int:
        return self.q_dim + 2 * self.kv_dim

    def compile_defines(self) -> tuple[str, ...]:
        """The -D options that compile megakernel.cu for this shape."""
        return (
            f"-DMK_LAYERS={self.layers}",
            f"-DMK_HIDDEN={self.hidden}",
            f"-DMK_Q_HEADS={self.q_heads}",
            f"-DMK_KV_HEADS={self.kv_heads}",
            f"-DMK_INTERMEDIATE={self.intermediate}",
            f"-DMK_RMS_EPS={self.rms_eps!r}f",
        )

    def weight_bytes(self) -> int:
        """Bytes of bf16 weights one decode step reads: every matrix once, the embedding as LM head,
        the norm vectors; the one embedding row read for the input token is counted too."""
        per_layer = (self.qkv_rows * self.hidden + self.hidden * self.q_dim + 3 * self.intermediate * self.hidden
                     + 2 * self.hidden + 2 * HEAD_DIM)
        total = self.layers * per_layer + self.vocab * self.hidden + self.hidden + self.hidden
        return total * BF16_BYTES

    def kv_bytes(self, position: int) -> int:
        """Bytes of K and V cache the step at `position` reads (keys 0..position, all layers)."""
        return 2 * self.layers * self.kv_dim * BF16_BYTES * (position + 1)

    def step_bytes(self, position: int) -> int:
        """The roofline numerator: weights plus KV cache read by one decode step."""
        return self.weight_bytes() + self.kv_bytes(position)

    def step_flops(self, position: int) -> int:
        """Multiply-adds x 2 of the GEMVs and attention of one step (tiny next to the bytes)."""
        gemv = self.weight_bytes() // BF16_BYTES
        attention = 2 * self.layers * self.q_heads * HEAD_DIM * (position + 1)
        return 2 * (gemv + attention)


QWEN3_0_6B = ModelConfig("qwen3-0.6b", layers=28, hidden=1024, q_heads=16, kv_heads=8, intermediate=3072, vocab=151936)

# A reduced model for fast randomized tests: same head layout and GQA ratio, two layers, a vocab
# that is not a multiple of anything the kernel tiles by.
TINY = ModelConfig("tiny", layers=2, hidden=256, q_heads=4, kv_heads=2, intermediate=512, vocab=1000)
