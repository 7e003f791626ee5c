"""Compile and launch the decode megakernel (CuPy, cooperative launch), with input checks.

``Megakernel`` owns one model on the GPU: packed weights, KV cache, scratch, the compiled
variants and the grid. ``launcher()`` checks its arguments once and returns a closure that only
enqueues one decode step on the current CuPy stream (no allocation, no synchronization), as the
timing engine needs.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from kernels.megakernel.config import ModelConfig
from kernels.megakernel.family import (COMPILE_OPTIONS, DATAFLOW_VARIANTS, GRID_SYNC_NAME_EXPRESSIONS, RING_VARIANTS, SOURCES,
                                      VARIANTS)
from kernels.megakernel.layout import THREADS, DecodeBuffers, shared_bytes, trace_stride

GRID_SYNC_MODES = ("cooperative_groups", "subset_barrier")  # grid_sync_loop<0>, <1>
DATAFLOW_MAX_BLOCKS = 160  # 32 x kMaxProbesPerLane in mk_exchange.cuh


def kernel_name(variant: str) -> str:
    """The template instantiation (NVRTC name expression) of ``variant``."""
    return f"megakernel_decode<{VARIANTS.index(variant)}>"


def decode_module(config: ModelConfig, own_grid_barrier: bool = False, trace: bool = False,
                  defines: tuple[str, ...] = (), options: tuple[str, ...] = ()) -> Any:
    """The compiled ``cupy.RawModule`` holding every variant for this model shape. With
    ``own_grid_barrier`` the phases synchronise with mk::subset_barrier over the whole grid instead
    of cooperative_groups' grid.sync() (same scheme, no cooperative_groups headers needed). With
    ``trace`` the stream and ring variants record phase timestamps in ``mk_trace`` (trace.py).
    ``defines`` (``"NAME=VALUE"``) override the source's tuning macros, e.g. MK_RING_PACED_IN_FLIGHT;
    ``options`` are extra NVRTC options (``-lineinfo`` for a source-level profile)."""
    from pytest_gpuperf import load_module

    options = (COMPILE_OPTIONS + config.compile_defines() + (("-DMK_OWN_GRID_BARRIER",) if own_grid_barrier else ())
               + (("-DMK_TRACE",) if trace else ()) + tuple(f"-D{d}" for d in defines) + tuple(options))
    return load_module(SOURCES[0], options=options, name_expressions=tuple(kernel_name(v) for v in VARIANTS))


def _check_variant(variant: str) -> None:
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")


def _resident_blocks_per_sm(function: Any, smem: int) -> int:
    import cupy

    return int(cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(function.ptr, THREADS, smem))


def _allow_dynamic_shared(function: Any, smem: int) -> None:
    """Lift the 48 KB default cap on dynamic shared memory for ``function`` (ring variants)."""
    import cupy

    attribute = getattr(cupy.cuda.driver, "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES", 8)
    cupy.cuda.driver.funcSetAttribute(function.ptr, attribute, smem)


class Megakernel:
    """One model on the GPU and its decode step, in any of the family's variants.

    ``grid_blocks`` defaults to one block per multiprocessor (the kernel's register budget allows
    one 512-thread block per SM); any count from ``kv_heads`` up to the co-resident maximum works.
    ``own_grid_barrier`` swaps cooperative_groups' grid.sync() for the kernel's own barrier;
    ``trace`` builds the phase-timing diagnostics in (``trace_cycles``); ``defines`` are passed to
    ``decode_module``. The dataflow variant gathers one probe per block in one warp (at most
    DATAFLOW_MAX_BLOCKS) and needs every block to own a residual row (at most ``hidden`` blocks).
    """

    def __init__(self, config: ModelConfig, weights: Mapping[str, np.ndarray], *, max_seq: int,
                 grid_blocks: int | None = None, own_grid_barrier: bool = False, trace: bool = False,
                 defines: tuple[str, ...] = (), options: tuple[str, ...] = ()):
        import cupy

        if max_seq < 1:
            raise ValueError(f"max_seq must be at least 1, got {max_seq}")
        self.config = config
        self.max_seq = max_seq
        self.shared_bytes = shared_bytes(config)
        self.variant_shared_bytes = {v: shared_bytes(config, ring=v in RING_VARIANTS) for v in VARIANTS}
        module = decode_module(config, own_grid_barrier, trace, defines, options)
        self._module = module
        self._functions = {v: module.get_function(kernel_name(v)).kernel for v in VARIANTS}
        optin = cupy.cuda.Device().attributes["MaxSharedMemoryPerBlockOptin"]
        for v, function in self._functions.items():
            smem = self.variant_shared_bytes[v]
            if smem > optin:
                raise RuntimeError(f"{v} needs {smem} B of shared memory per block; this GPU allows {optin}")
            if smem > 48 * 1024:
                _allow_dynamic_shared(function, smem)
        sm_count = cupy.cuda.Device().attributes["MultiProcessorCount"]
        per_sm = min(_resident_blocks_per_sm(f, self.variant_shared_bytes[v]) for v, f in self._functions.items())
        if per_sm < 1:
            raise RuntimeError(f"a {THREADS}-thread block with {max(self.variant_shared_bytes.values())} B of shared "
                               "memory does not fit on an SM")
        self.max_grid_blocks = per_sm * sm_count
        self.grid_blocks = sm_count if grid_blocks is None else grid_blocks
        if not config.kv_heads <= self.grid_blocks <= self.max_grid_blocks:
            raise ValueError(f"grid_blocks must be in [{config.kv_heads}, {self.max_grid_blocks}] "
                             f"(kv heads .. co-resident blocks), got {self.grid_blocks}")
        self.buffers = DecodeBuffers.build(config, weights, max_seq, self.grid_blocks, xp=cupy)
        self._params = self.buffers.params()

    # ---- state ----------------------------------------------------------------------------
    def set_kv_cache(self, k_cache: np.ndarray, v_cache: np.ndarray) -> None:
        """Copy host K and V caches (bf16 bits, ``[layers, kv_heads, max_seq, 128]``) to the GPU."""
        for name, value in (("k_cache", k_cache), ("v_cache", v_cache)):
            target = self.buffers[name]
            if value.shape != target.shape or value.dtype != np.uint16:
                raise ValueError(f"{name} must be uint16 of shape {target.shape}, got {value.dtype} {value.shape}")
            target.set(value)

    @property
    def logits(self) -> Any:
        """The last step's logits, a CuPy float32 ``[vocab]`` array."""
        return self.buffers["logits"]

    def shared_bytes_in_module(self, ring: bool = False) -> int:
        """``mk_shared_bytes`` (or ``mk_shared_bytes_ring``) as compiled into the module (should equal
        ``layout.shared_bytes(config, ring)``)."""
        import cupy

        pointer = self._module.get_global("mk_shared_bytes_ring" if ring else "mk_shared_bytes")
        return int(cupy.ndarray((1,), cupy.int32, pointer).get()[0])

    def trace_cycles(self) -> np.ndarray:
        """The last step's phase timestamps (SM cycles), ``[grid_blocks, events]`` (trace builds)."""
        import cupy

        from kernels.megakernel.layout import trace_events

        events = trace_events(self.config)
        stride = trace_stride()
        pointer = self._module.get_global("mk_trace")
        flat = cupy.ndarray((self.grid_blocks * stride,), cupy.int64, pointer).get()
        return flat.reshape(self.grid_blocks, stride)[:, :events]

    # ---- launching ------------------------------------------------------------------------
    def _check(self, variant: str, token: int, position: int) -> None:
        _check_variant(variant)
        if variant in DATAFLOW_VARIANTS and self.grid_blocks > min(DATAFLOW_MAX_BLOCKS, self.config.hidden):
            raise ValueError(f"{variant} runs on at most {min(DATAFLOW_MAX_BLOCKS, self.config.hidden)} blocks "
                             f"(kMaxProbesPerLane x 32, and one residual row per block); grid_blocks={self.grid_blocks}")
        if not 0 <= token < self.config.vocab:
            raise ValueError(f"token must be in [0, {self.config.vocab}), got {token}")
        if not 0 <= position < self.max_seq:
            raise ValueError(f"position must be in [0, {self.max_seq}) (the KV-cache length), got {position}")

    def launcher(self, variant: str, token: int, position: int) -> Callable[[], None]:
        """A closure enqueueing one decode step of ``variant`` on the current CuPy stream."""
        self._check(variant, token, position)
        function = self._functions[variant]
        grid, block = (self.grid_blocks,), (THREADS,)
        args = (self._params, np.int32(token), np.int32(position))
        smem = self.variant_shared_bytes[variant]

        def launch() -> None:
            function(grid, block, args, shared_mem=smem, enable_cooperative_groups=True)

        return launch

    def step(self, variant: str, token: int, position: int) -> Any:
        """Run one decode step now; returns the logits array (CuPy, on the GPU)."""
        self.launcher(variant, token, position)()
        return self.logits

    def greedy(self, variant: str, first_token: int, steps: int) -> list[int]:
        """Greedy decode from position 0: the token chosen after each of ``steps`` steps (argmax on
        the host side of the launch, so every step synchronizes)."""
        import cupy

        if not 1 <= steps <= self.max_seq:
            raise ValueError(f"steps must be in [1, {self.max_seq}], got {steps}")
        tokens = []
        token = first_token
        for position in range(steps):
            token = int(cupy.argmax(self.step(variant, token, position)))
            tokens.append(token)
        return tokens


class GridSyncCost:
    """Launchers of ``grid_sync_loop``: a cooperative grid that only synchronises ``iterations`` times."""

    def __init__(self, grid_blocks: int):
        import cupy

        from pytest_gpuperf import load_module

        names = GRID_SYNC_NAME_EXPRESSIONS
        module = load_module(SOURCES[1], options=COMPILE_OPTIONS, name_expressions=names)
        self._functions = {mode: module.get_function(name).kernel for mode, name in zip(GRID_SYNC_MODES, names)}
        self.grid_blocks = grid_blocks
        self.word = cupy.zeros(1, dtype=cupy.uint32)  # subset_barrier's word

    def launcher(self, mode: str, iterations: int) -> Callable[[], None]:
        if mode not in GRID_SYNC_MODES:
            raise ValueError(f"mode must be one of {GRID_SYNC_MODES}, got {mode!r}")
        if iterations < 0:
            raise ValueError(f"iterations must be non-negative, got {iterations}")
        function = self._functions[mode]
        grid, block, args = (self.grid_blocks,), (THREADS,), (self.word, np.int32(iterations))

        def launch() -> None:
            function(grid, block, args, enable_cooperative_groups=True)

        return launch
