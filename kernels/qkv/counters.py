"""Launch targets for Nsight Compute profiles of the qkv kernels (the ``gpu_counters`` fixture,
``pytest_gpuperf.bench.profile_launches``).

``launch_cases`` runs in the process ncu starts::

    ncu ... --kernel-name regex:<KERNEL_REGEX> --launch-count <len(cases)> ... \\
        python -c <runner> kernels.qkv.counters:launch_cases '{"cases": [...]}'

Each case launches one variant once, on one of the note's layers, at one launch
configuration, then checks the output against the float64 reference. Building the buffers
(``qkv_w_rearrange``) and the checks launch no kernel that ``KERNEL_REGEX`` matches, so ncu
profiles exactly one launch per case, in the order of ``cases``.

Normalisation of the hw01 columns (``ideal``): N-Rd divides the bytes L2 served to the L1s
by one read of w_qkv and h_in, N-Wr the bytes written by one write of h_qkv, and /itr divides
thread instructions by the multiply-adds d_ws x d_qkv x d_model (one per inner-loop
iteration of the note's loop), as the note does.
"""
from __future__ import annotations

import re
from dataclasses import asdict
from typing import Any, Mapping, Sequence

from kernels.qkv.family import LAYERS
from kernels.qkv.launch import VARIANTS, LaunchConfig
from kernels.qkv.reference import FLOAT_BYTES

TARGET = "kernels.qkv.counters:launch_cases"
# ncu's "function" kernel names carry no parameters or template arguments (qkv_strip, not
# qkv_strip<4, true>); the optional parts also accept the demangled forms. qkv_w_rearrange
# (run while building the inputs) is left out.
KERNEL_REGEX = r"^(void )?qkv_(base|base_w2|strip|strip_w2)(<.*>)?(\(.*\))?$"
SEED = 2023
MAX_REL_L2 = 1e-5  # fp32 accumulation vs float64 (tests/qkv/test_correctness.py explains it)


def case(variant: str, layer: str, config: LaunchConfig = LaunchConfig()) -> dict[str, Any]:
    """One profiled launch, as JSON for the target process."""
    if variant not in VARIANTS:
        raise ValueError(f"variant: expected one of {VARIANTS}, got {variant!r}")
    if layer not in LAYERS:
        raise ValueError(f"layer: expected one of {sorted(LAYERS)}, got {layer!r}")
    return {"variant": variant, "layer": layer, "config": asdict(config)}


def ideal(layer: str) -> dict[str, float]:
    """``CounterResult.with_ideal`` keywords for ``layer``: read once, write once, one FMA per iteration."""
    shape = LAYERS[layer]
    return {
        "read_bytes": float(FLOAT_BYTES * (shape.d_ws * shape.d_model + shape.d_qkv * shape.d_model)),
        "write_bytes": float(FLOAT_BYTES * shape.d_ws * shape.d_qkv),
        "iterations": float(shape.d_ws * shape.d_qkv * shape.d_model),
    }


def kernel_is(kernel_name: str, variant: str) -> bool:
    """Whether ncu's kernel name ``kernel_name`` is ``variant`` (and not a longer name starting with it)."""
    return re.match(rf"^(void )?{re.escape(variant)}(<|\(|$)", kernel_name) is not None


def check_order(cases: Sequence[Mapping[str, Any]], kernels: Sequence[str]) -> None:
    """Raise when the profiled kernels are not the cases' variants in order (a mis-mapped profile)."""
    got = list(kernels)
    want = [c["variant"] for c in cases]
    if len(got) != len(want) or not all(kernel_is(k, v) for k, v in zip(got, want)):
        raise AssertionError(f"ncu profiled kernels {got}, expected {want} in this order")


def launch_cases(cases: Sequence[Mapping[str, Any]], check: bool = True) -> None:
    """Launch each case once (the profiled launch), then check its output against the reference."""
    import cupy

    from kernels.qkv.launch import make_launcher, upload
    from kernels.qkv.reference import make_inputs, reference
    from pytest_gpuperf.numerics import assert_close, poison

    layers: dict[str, Any] = {}
    expected: dict[str, Any] = {}
    for c in cases:
        layer = c["layer"]
        if layer not in layers:
            w_qkv, h_in = make_inputs(LAYERS[layer], SEED)
            layers[layer] = upload(w_qkv, h_in)
            if check:
                expected[layer] = reference(w_qkv, h_in)
        bufs = layers[layer]
        launcher = make_launcher(c["variant"], bufs, LaunchConfig(**c["config"]))
        poison(bufs.h_qkv)
        launcher()
        cupy.cuda.runtime.deviceSynchronize()
        if check:
            label = LaunchConfig(**c["config"]).label(c["variant"])
            assert_close(bufs.h_qkv, expected[layer], max_rel_l2=MAX_REL_L2, name=f"{c['variant']} on {layer} ({label})")
