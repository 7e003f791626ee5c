"""megakernel: variants, grid syncs per layer, perf positions, the gates' margins, the sources."""
from __future__ import annotations

from pathlib import Path

from kernels.contract import KernelFamily
from pytest_gpuperf import MarginsFile

SOURCES = (Path(__file__).with_name("megakernel.cu"), Path(__file__).with_name("grid_sync_cost.cu"))
# The headers megakernel.cu is built from, in its include order (its opening comment says what each
# holds). Every build finds them beside it; the compile-time tier and the emulator's build cache
# track them through the compiler's depfile.
HEADERS = tuple(Path(__file__).with_name(name) for name in (
    "mk_device.cuh", "mk_config.cuh", "mk_variants.cuh", "mk_shared.cuh", "mk_gemv.cuh", "mk_stream.cuh",
    "mk_ring.cuh", "mk_exchange.cuh", "mk_attention.cuh", "mk_splitk.cuh"))

# Template argument of megakernel_decode<V> is the index in this tuple.
VARIANTS = ("baseline", "redundant_rmsnorm", "head_based", "fused", "fused_prefetch", "fused_stream", "fused_ring",
            "dataflow", "dataflow_splitk", "dataflow_splitk_o")

# Variants whose weights go through the shared-memory ring: their launch needs kSharedBytesRing
# (204 KiB for Qwen3-0.6B: 208,944 B) of dynamic shared memory instead of 43 KiB (44,128 B).
RING_VARIANTS = frozenset({"fused_ring", "dataflow", "dataflow_splitk", "dataflow_splitk_o"})
# Variants with no grid barrier (LL words): at most DATAFLOW_MAX_BLOCKS blocks, each owning a residual row.
DATAFLOW_VARIANTS = frozenset({"dataflow", "dataflow_splitk", "dataflow_splitk_o"})

# The fastest variant, chosen from measurements: dataflow_splitk_o is the fastest at every perf
# position on the H200 and the H100 (README.md, "Measured": every variant's ms/token, with the runs).
BEST_VARIANT = "dataflow_splitk_o"
# Variants not yet measured on any GPU. The absolute gates time these too and gate the fastest of
# BEST_VARIANT and these, so a faster new variant is judged without editing this file first;
# after a measured run, move the winner into BEST_VARIANT (with its numbers) and empty this.
UNMEASURED_VARIANTS: tuple[str, ...] = ()
GATE_CANDIDATES = (BEST_VARIANT, *UNMEASURED_VARIANTS)

# Grid-wide syncs per layer, and barriers over one kv head's group of blocks (head_based only).
# The final RMSNorm adds one grid sync in the baseline, none elsewhere.
GRID_SYNCS_PER_LAYER = {"baseline": 8, "redundant_rmsnorm": 6, "head_based": 4, "fused": 5, "fused_prefetch": 5,
                        "fused_stream": 5, "fused_ring": 5, "dataflow": 0, "dataflow_splitk": 0,
                        "dataflow_splitk_o": 0}
GROUP_BARRIERS_PER_LAYER = {"baseline": 0, "redundant_rmsnorm": 0, "head_based": 2, "fused": 0, "fused_prefetch": 0,
                            "fused_stream": 0, "fused_ring": 0, "dataflow": 0, "dataflow_splitk": 0,
                            "dataflow_splitk_o": 0}

PERF_POSITIONS = (1, 10, 50, 100, 200, 1000)
ROOFLINE_POSITIONS = tuple(p for p in PERF_POSITIONS if p <= 200)  # where the 50% target applies
MAX_SEQ = 1024  # KV-cache length allocated for the perf runs (covers position 1000)

# The gated comparisons: (fast variant, baseline variant).
COMPARISONS = {
    "redundant_rmsnorm_vs_baseline": ("redundant_rmsnorm", "baseline"),
    "fused_vs_redundant_rmsnorm": ("fused", "redundant_rmsnorm"),
    "head_based_vs_baseline": ("head_based", "baseline"),
    "fused_prefetch_vs_fused": ("fused_prefetch", "fused"),
    "fused_stream_vs_fused": ("fused_stream", "fused"),  # same phases and syncs; isolates the stream
    "fused_ring_vs_fused": ("fused_ring", "fused"),  # same phases and syncs; isolates the weight ring
    "dataflow_vs_fused_ring": ("dataflow", "fused_ring"),  # same phases; LL words instead of grid syncs
    "dataflow_splitk_vs_dataflow": ("dataflow_splitk", "dataflow"),  # no activation exchange
    # no attention-output exchange or combine: each block merges the units' records of its O rows
    "dataflow_splitk_o_vs_dataflow_splitk": ("dataflow_splitk_o", "dataflow_splitk"),
}
GATE_POSITIONS = (1, 200, 1000)

# Speedup margins per architecture, key "<comparison>@<position>", each with the interval it came
# from (GPU, date, commit): margins.json. Each was set by the margin rule from the runs that
# measured the kernel it gates when it was last changed; README.md says which and what later
# runs measured. An architecture without a table measures and records the ratios ungated.
MARGINS = MarginsFile.read(SOURCES[0].with_name("margins.json"))
SPEEDUP_MARGINS: dict[str, dict[str, float | None]] = MARGINS.table()

# Absolute gates, per architecture: the issue's targets on H100/H200. The best variant at >= 50%
# of the roofline (weights + KV read / the SM copy bandwidth, gpu_perf.copy_bandwidth()) at
# positions <= 200, and >= 8x faster than Hugging Face transformers with a static cache in a CUDA
# graph. README.md's targets table says where each GPU model stands; TARGET_SHORTFALLS says where
# one falls short, and keeps the tests honest there.
MIN_ROOFLINE_FRACTION: dict[str, float | None] = {"sm_90": 0.5}  # issue 5 target on H100/H200
MIN_SPEEDUP_VS_HF: dict[str, float | None] = {"sm_90": 8.0}  # issue 5 target on H100/H200

# Absolute targets this kernel does not reach yet: architecture -> target -> GPU model (the
# device name NVML reports; "*" for any other model of the architecture) -> (the positions where
# it falls short, None for all; what was measured). Those tests still run and record the figure,
# but are expected to fail (strict xfail): the day the kernel reaches a target there, its test
# XPASSes and fails, so the entry must be trimmed. A model or position not listed is an ordinary
# gate. The H100 has a third less bandwidth than the H200 at the same SM count and clocks, so the
# same kernel reaches a larger fraction of its roofline there.
Shortfall = tuple[tuple[int, ...] | None, str]
TARGET_SHORTFALLS: dict[str, dict[str, dict[str, Shortfall]]] = {
    "sm_90": {
        "roofline": {
            # The H200 meets it at p = 1, 10 and 50 (54.2 / 53.6 / 53.1%): ordinary gates there.
            "NVIDIA H200": ((100, 200), "H200 2026-11-25 (commit c04d749): best variant dataflow_splitk_o "
                                        "at 51.9 / 50.8% of the copy-bandwidth roofline at p = 100 / 200 "
                                        "(0.561 / 0.579 ms/token; 50.0% at p=200 at commit dce7c0d), target 50%"),
            # The H100 SXM meets it at every position <= 200 (63.7-67.0%): ordinary gates there.
        },
        "hf_speedup": {
            "NVIDIA H100 80GB HBM3": (None, "H100 SXM 2026-11-25 (commit c04d749): dataflow_splitk_o 7.86x (p=1), "
                                            "7.29x (p=200), 6.87x (p=1000) faster than transformers 5.17 with a "
                                            "static cache in a CUDA graph, target 8x"),
            # The H200 meets it at p=1 (8.88x [8.86, 8.91]): an ordinary gate there.
            "*": ((200, 1000), "H200 2026-11-25 (commit c04d749): dataflow_splitk_o 8.11x [8.09, 8.13] at "
                               "p=200 (8.13-8.14x at commit dce7c0d), 7.76x (p=1000) faster than transformers 5.17 with a "
                               "static cache in a CUDA graph (its logits checked against ours), target 8x"),
        },
    }
}


# Documented shortfalls that lie within the pool's machine-to-machine spread of their target (the
# same code measured up to 2.5% apart on GPUs of one model, the transformers peer 3%): a GPU of
# that model may land on either side of the target, so neither a strict xfail (it would fail a run
# in which the kernel did better) nor an ordinary gate (it would fail on a slower machine of the
# pool) would be honest. There the xfail is not strict: an XPASS is reported, not failed. arch ->
# target -> the TARGET_SHORTFALLS key of the model -> positions.
UNSETTLED_SHORTFALLS: dict[str, dict[str, dict[str, tuple[int, ...]]]] = {
    "sm_90": {
        # Over the H200 perf runs of the current kernel, p=100 and p=200 land on both sides of 50%
        # (README.md's targets table), inside the pool's spread: A/B runs put the same code 1.6%
        # apart across H200s, perf runs 2.5%, and one run's peer test timed the same step 1.4%
        # faster than its roofline test.
        "roofline": {"NVIDIA H200": (100, 200)},
        # p=200 and p=1000 land on both sides of 8x over those runs, inside the peer's 3% spread.
        "hf_speedup": {"*": (200, 1000)},
    }
}


def shortfall_is_strict(arch: str, device_name: str, target: str, position: int) -> bool:
    """Whether the documented shortfall of ``target`` on this GPU model at ``position`` is a strict
    xfail (False where UNSETTLED_SHORTFALLS lists it)."""
    by_model = TARGET_SHORTFALLS.get(arch, {}).get(target, {})
    key = device_name if device_name in by_model else "*"
    return position not in UNSETTLED_SHORTFALLS.get(arch, {}).get(target, {}).get(key, ())


def target_shortfall(arch: str, device_name: str, target: str, position: int | None = None) -> str | None:
    """The documented shortfall of ``target`` on this GPU model (at ``position``), or None."""
    return FAMILY.target_shortfall(arch, device_name, target, position)


ISSUE_TARGETS = {"roofline_fraction": 0.5, "speedup_vs_hf": 8.0}


def speedup_margin(arch: str, comparison: str, position: int) -> float | None:
    """The measured margin for ``comparison`` at ``position`` on ``arch``, or None (record only)."""
    return SPEEDUP_MARGINS.get(arch, {}).get(f"{comparison}@{position}")


# Tolerances vs the float32 reference. Kernel and reference differ by float32 summation order
# (~1e-7 relative), but a K or V element whose bf16 rounding that tips (one ulp, 2^-8 relative)
# changes the next layers slightly, and with few keys (early positions) such flips multiply over
# the layers. Measured on the CPU: float32 vs float64 references (same rounding points) differ by
# up to 9.3e-4 relative L2 / 1.1e-3 max |logit| over 120 tiny-model cases, and by 2.2e-4 / 6.3e-4
# on the full model at position 7 (logits have std 0.65). On an H200 every variant was within
# 8.7e-4 max |logit| at position 7 and 1.1e-5 at 600 (DESIGN.md). The bounds below leave 5-10x
# headroom; an indexing or synchronisation bug moves logits by O(0.1-1).
LOGIT_TOLERANCE = {
    "tiny": {"max_rel_l2": 5e-3, "atol": 5e-3},
    "odd-pages": {"max_rel_l2": 5e-3, "atol": 5e-3},  # a one-layer emulator shape (test_emulated.py)
    "qwen3-0.6b": {"max_rel_l2": 5e-3, "atol": 1e-2},
}
# KV rows written at the step's position: bf16, so two ulps (2^-6 relative) plus a floor. A floor of
# 1e-3 is too tight at position 0: there the attention output IS the step's own V row, so a V element
# whose bf16 rounding tips (one ulp, from float32 summation order) passes whole into the residual,
# whose magnitude is small (0.02-scale embeddings), and the full model's K rows 20-26 layers on move
# by up to 4.8e-3 (272 of 28,672 elements over 1e-3 with the A/B harness's data, on every build of
# the dataflow variants measured; 4.2e-3 with the test's data for a build whose record rounded
# o / l differently). Their relative L2 stays within 5e-3; a wrong row, head or
# position moves K and V by O(0.1-1).
KV_TOLERANCE = {"max_rel_l2": 5e-3, "atol": 1e-2, "rtol": 2.0**-6}

# Steps at which the transformers peer is checked against our model before it is timed (token
# 1234, full model, KV prefill seed 1): the reference's top-2 logit gaps there are 0.51 and 0.34,
# clear of hf_peer.ARGMAX_TIE, so the argmax must agree exactly.
HF_CHECK_STEPS = ((1234, 7), (1234, 600))


# ---- how the kernels are compiled: launch.py (NVRTC) and the compile-time tier (nvcc) ---------
# launch.py imports COMPILE_OPTIONS and the name expressions from here, so CUDA_MODULES below
# builds exactly what the tests load. The decode module adds the model shape's -D options
# (ModelConfig.compile_defines()).
from kernels.megakernel.config import QWEN3_0_6B  # noqa: E402
from pytest_gpuperf import CudaModule  # noqa: E402

COMPILE_OPTIONS = ("-std=c++17",)
DECODE_NAME_EXPRESSIONS = tuple(f"megakernel_decode<{i}>" for i in range(len(VARIANTS)))
GRID_SYNC_NAME_EXPRESSIONS = ("grid_sync_loop<0>", "grid_sync_loop<1>")  # cooperative_groups, subset_barrier

# tests/megakernel/test_static.py: the decode kernel as the perf tests build it (Qwen3-0.6B shape)
# and the grid-sync probe. __launch_bounds__(512, 1) leaves 128 registers per thread; the budgets
# in baselines/static/megakernel.json hold each variant to what it uses, with no spills. Facts:
# weights stream as 16-byte loads that bypass L1 (ld.global.nc.L1::no_allocate.v4 ->
# LDG.E.NA.128.CONSTANT) in variants 0-5, fused_prefetch issues the sm_90 bulk L2 prefetch
# (cp.async.bulk.prefetch.L2 -> UBLKPF.L2; compiled for sm_90 only), and fused_ring copies its
# weight pages with bulk copies and waits on mbarriers on sm_90 (UBLKCP.S.G, SYNCS.PHASECHK), with
# 16-byte cp.async (LDGSTS.E.BYPASS.128) before sm_90, as do dataflow and dataflow_splitk; the
# latter adds its partials with one bulk reduction on sm_90 (cp.reduce.async.bulk ... add.u64 ->
# UBLKRED.G.S.ADD.U64) and 64-bit reductions before (RED.E.ADD.64).
# Code size: a step executes about 101 KB of SASS, at the edge of an SM's instruction cache;
# 552 more instructions (4.7%) cost 0.4-2.7% of the step (DESIGN.md), so each variant's SASS instruction count may grow at most 2% over the recorded one before the
# tier fails.
CODE_GROWTH = 0.02
CUDA_MODULES: tuple[CudaModule, ...] = (
    CudaModule(
        "megakernel.decode",
        SOURCES[0],
        options=COMPILE_OPTIONS + QWEN3_0_6B.compile_defines(),
        name_expressions=DECODE_NAME_EXPRESSIONS,
        archs=("sm_80", "sm_90"),
        sass_facts={"megakernel_decode<[0-5]>": (r"\bLDG\.E\.NA\.128\.CONSTANT\b",)},
        sass_facts_by_arch={
            "sm_90": {
                f"megakernel_decode<{VARIANTS.index('fused_prefetch')}>": (r"\bUBLKPF\.L2\b",),
                # fused_ring, dataflow, dataflow_splitk: bulk copies into shared memory, mbarrier waits
                "megakernel_decode<[6-9]>": (r"\bUBLKCP\.S\.G\b", r"\bSYNCS\.PHASECHK\.TRANS64"),
                "megakernel_decode<[89]>": (r"\bUBLKRED\.G\.S\.ADD\.U64\b",),
            },
            "sm_80": {
                "megakernel_decode<[6-9]>": (r"\bLDGSTS\.E\.BYPASS\.128\b",),
                "megakernel_decode<[89]>": (r"\bRED\.E\.ADD\.64\b",),
            },
        },
        group="megakernel",
        max_code_growth=CODE_GROWTH,
    ),
    CudaModule(
        "megakernel.grid_sync_cost",
        SOURCES[1],
        options=COMPILE_OPTIONS,
        name_expressions=GRID_SYNC_NAME_EXPRESSIONS,
        archs=("sm_80", "sm_90"),
        group="megakernel",
    ),
)


FAMILY = KernelFamily(
    name="megakernel",
    directory=SOURCES[0].parent,
    sources=SOURCES,
    cuda_modules=CUDA_MODULES,
    margins=MARGINS,
    perf_grid={str(position): position for position in PERF_POSITIONS},
    margin_tests=("test_variant_speedup",),
    target_shortfalls=TARGET_SHORTFALLS,
)
