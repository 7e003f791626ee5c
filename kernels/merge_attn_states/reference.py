"""Float64 reference for merge_attn_states and the seeded input generator.

Storage: fp16 tensors are ``numpy.float16``; bf16 tensors are ``numpy.uint16`` arrays holding
the bf16 bit patterns (NumPy and CuPy have no bfloat16 dtype). LSEs are float32.

LSE semantics (the kernels follow the same rules): an LSE of +inf or -inf marks an empty
partial, which gets weight 0. If both partials of a (token, head) are empty, the output row is 0
and the output LSE is -inf.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

DTYPES = ("fp16", "bf16")
STORAGE_DTYPES = {"fp16": np.dtype(np.float16), "bf16": np.dtype(np.uint16)}

# Output tolerances, against the float64 merge of the already-rounded 16-bit inputs. The kernels
# compute in float32 (weights from __expf and an IEEE divide, a few float32 ulps, ~1e-6 relative)
# and round once to the output type: at most half an ulp, 2^-11 relative for fp16 and 2^-8 for
# bf16. So each element must lie within rtol = twice that bound, plus an atol for the float32
# error and fp16's subnormal spacing (``output_atol``). Relative L2 limits: fp16 rounding alone
# gives ~3e-4 and bf16 ~2.3e-3; the limits leave about 5x headroom.
OUTPUT_TOLERANCE: dict[str, dict[str, float]] = {
    "fp16": {"max_rel_l2": 2e-3, "rtol": 2.0**-10},
    "bf16": {"max_rel_l2": 1e-2, "rtol": 2.0**-7},
}
# Output LSE (float32): __logf of a sum in [1, 2] is off by a few 1e-7 absolute, the weights'
# __expf errors shift it by less than 1e-7, and the final add of max_lse rounds to half a float32
# ulp (6e-8 relative). atol 1e-5 and rtol 1e-6 leave a 10x margin; a wrong formula is off by O(1).
LSE_TOLERANCE: dict[str, float] = {"max_rel_l2": 1e-5, "atol": 1e-5, "rtol": 1e-6}


def to_storage(values: Any, dtype: str) -> Any:
    """Round float values to ``dtype`` (round to nearest even) in its storage form.

    Works on NumPy and CuPy arrays alike (only array methods are used).
    """
    if dtype == "fp16":
        return values.astype(np.float16)
    if dtype == "bf16":
        bits = values.astype(np.float32).view(np.uint32)
        rounding = ((bits >> 16) & np.uint32(1)) + np.uint32(0x7FFF)
        return ((bits + rounding) >> 16).astype(np.uint16)
    raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")


def storage_to_float64(stored: np.ndarray, dtype: str) -> np.ndarray:
    """Decode a storage array (``float16``, or ``uint16`` bf16 bits) to float64."""
    if dtype == "fp16":
        return np.asarray(stored, dtype=np.float16).astype(np.float64)
    if dtype == "bf16":
        bits = np.asarray(stored, dtype=np.uint16).astype(np.uint32) << 16
        return bits.view(np.float32).astype(np.float64)
    raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")


def merge_reference(
    prefix_output: np.ndarray,
    prefix_lse: np.ndarray,
    suffix_output: np.ndarray,
    suffix_lse: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Merge two partial attention results in float64; returns ``(output, output_lse)``.

    ``*_output`` are ``[num_tokens, num_heads, head_size]``, ``*_lse`` are ``[num_heads, num_tokens]``.
    """
    p_lse = np.asarray(prefix_lse, dtype=np.float64)
    s_lse = np.asarray(suffix_lse, dtype=np.float64)
    p_lse = np.where(np.isinf(p_lse), -np.inf, p_lse)
    s_lse = np.where(np.isinf(s_lse), -np.inf, s_lse)
    max_lse = np.maximum(p_lse, s_lse)
    both_empty = max_lse == -np.inf
    shift = np.where(both_empty, 0.0, max_lse)
    p_se = np.exp(p_lse - shift)
    s_se = np.exp(s_lse - shift)
    out_se = p_se + s_se
    safe_se = np.where(both_empty, 1.0, out_se)
    p_scale = np.where(both_empty, 0.0, p_se / safe_se)
    s_scale = np.where(both_empty, 0.0, s_se / safe_se)
    out_lse = np.where(both_empty, -np.inf, np.log(safe_se) + shift)
    output = (
        np.asarray(prefix_output, dtype=np.float64) * p_scale.T[:, :, None]
        + np.asarray(suffix_output, dtype=np.float64) * s_scale.T[:, :, None]
    )
    return output, out_lse


@dataclass(frozen=True)
class LsePattern:
    """How the LSEs are drawn: normal(0, spread), the suffix shifted by ``suffix_offset``, then a
    fraction of entries on each side independently replaced by +inf or -inf (empty partials), so
    both sides are empty at about the product of the fractions."""

    spread: float = 4.0
    suffix_offset: float = 0.0
    pos_inf_fraction: float = 0.0
    neg_inf_fraction: float = 0.0


@dataclass(frozen=True)
class MergeInputs:
    """Host inputs in storage form, plus their float64 decoding for the reference."""

    dtype: str
    prefix_output: np.ndarray
    prefix_lse: np.ndarray
    suffix_output: np.ndarray
    suffix_lse: np.ndarray

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(num_tokens, num_heads, head_size)``."""
        t, h, d = self.prefix_output.shape
        return int(t), int(h), int(d)

    @cached_property
    def expected(self) -> tuple[np.ndarray, np.ndarray]:
        """The float64 merge of exactly these (already rounded) inputs: ``(output, output_lse)``."""
        return merge_reference(
            storage_to_float64(self.prefix_output, self.dtype),
            self.prefix_lse,
            storage_to_float64(self.suffix_output, self.dtype),
            self.suffix_lse,
        )


def _lse(rng: np.random.Generator, shape: tuple[int, int], offset: float, pattern: LsePattern) -> np.ndarray:
    lse = rng.standard_normal(shape) * pattern.spread + offset
    draw = rng.random(shape)
    lse[draw < pattern.pos_inf_fraction] = np.inf
    lse[(draw >= pattern.pos_inf_fraction) & (draw < pattern.pos_inf_fraction + pattern.neg_inf_fraction)] = -np.inf
    return lse.astype(np.float32)


def make_inputs(
    num_tokens: int,
    num_heads: int,
    head_size: int,
    dtype: str,
    *,
    seed: int,
    value_scale: float = 1.0,
    lse: LsePattern = LsePattern(),
) -> MergeInputs:
    """Seeded random inputs: outputs ~ normal(0, value_scale) rounded to ``dtype``; LSEs per ``lse``."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    rng = np.random.default_rng(seed)
    shape = (num_tokens, num_heads, head_size)
    prefix = to_storage(rng.standard_normal(shape, dtype=np.float32) * np.float32(value_scale), dtype)
    suffix = to_storage(rng.standard_normal(shape, dtype=np.float32) * np.float32(value_scale), dtype)
    lse_shape = (num_heads, num_tokens)
    return MergeInputs(
        dtype=dtype,
        prefix_output=prefix,
        prefix_lse=_lse(rng, lse_shape, 0.0, lse),
        suffix_output=suffix,
        suffix_lse=_lse(rng, lse_shape, lse.suffix_offset, lse),
    )


def output_atol(inputs: MergeInputs) -> float:
    """Absolute tolerance of the merged output: float32 error relative to the largest input, plus
    fp16's subnormal spacing (bf16 shares float32's exponent range)."""
    magnitude = max(
        float(np.abs(storage_to_float64(inputs.prefix_output, inputs.dtype)).max()),
        float(np.abs(storage_to_float64(inputs.suffix_output, inputs.dtype)).max()),
    )
    return 1e-5 * magnitude + (2.0**-24 if inputs.dtype == "fp16" else 0.0)


def assert_merge_close(inputs: MergeInputs, output: np.ndarray, output_lse: np.ndarray | None,
                       name: str = "merge") -> tuple[float, float | None]:
    """Assert a kernel's host results (output in storage form) match the reference within the
    tolerances above; return the relative L2 errors of the output and of the LSE."""
    from pytest_gpuperf.numerics import assert_close

    expected, expected_lse = inputs.expected
    out_err = assert_close(storage_to_float64(output, inputs.dtype), expected, atol=output_atol(inputs),
                           name=f"{name} output", **OUTPUT_TOLERANCE[inputs.dtype])
    lse_err = None
    if output_lse is not None:
        lse_err = assert_close(output_lse, expected_lse, name=f"{name} output_lse", **LSE_TOLERANCE)
    return out_err, lse_err
