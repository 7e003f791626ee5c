"""megakernel.cu run on the CPU by the fiber emulator (kernels/megakernel/emulate/), vs the reference.

No GPU needed: every GPU thread is a fiber and fibers meet at barriers and shuffles in a seeded
random order. This covers the work split, indexing, barrier placement and numerics of every
variant on machines without CUDA; the memory model and speed are the GPU tests' business.
Skipped without a C++17 compiler. About 1-5 s per emulated step, plus about 4 s on one core to
build the emulator library for each model shape, barrier choice and set of tuning macros.

The default run keeps one library (TINY, which the wide-vocab TINY shares) and one case per kind
of synchronisation: ``baseline`` (cooperative_groups grid barriers), ``fused_ring`` (the weight
ring behind grid barriers) and ``dataflow_splitk_o`` (no grid barrier: LL words, split-K
accumulators, the units' records), with that variant's LM head over several tiles, a unit computed
by warps, and the trap on accumulators left over. The rest are marked ``slow`` (``pytest -m slow``
and the nightly CI job run them, docs/ci.md): the other variants, more positions and grid sizes per
variant, the kernel's own grid barrier and each alternative tuning macro (a library of its own
each), the odd page shape.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kernels.megakernel.config import TINY, ModelConfig
from kernels.megakernel.emulator import compiler, emulate_decode, shared_bytes_of
from kernels.megakernel.family import DATAFLOW_VARIANTS, KV_TOLERANCE, LOGIT_TOLERANCE, VARIANTS
from kernels.megakernel.layout import DecodeBuffers, counter_slot, shared_bytes
from kernels.megakernel.reference import ReferenceModel, bf16_bits_to_float, make_weights, random_kv_cache
from pytest_gpuperf.numerics import assert_close

pytestmark = [pytest.mark.build, pytest.mark.skipif(compiler() is None, reason="no C++ compiler for the CPU emulator")]

MAX_SEQ = 1152
DEFAULT_VARIANTS = ("baseline", "fused_ring", "dataflow_splitk_o")  # one per kind of synchronisation


def slow(*values: object, id: str | None = None) -> object:  # noqa: A002 (pytest.param's name)
    """A parameter set of the slow tier (see the module's docstring)."""
    return pytest.param(*values, id=id, marks=pytest.mark.slow)


@pytest.mark.parametrize(
    ("variant", "blocks", "position", "own_grid_barrier"),
    [
        # 5 blocks: 2 attention units per kv head at position 70 (split + combine), head groups of 2.
        # The default run takes baseline, fused_ring and dataflow_splitk_o here; the slow tier every
        # variant and each situation below.
        *[(variant, 5, 70, False) if variant in DEFAULT_VARIANTS else slow(variant, 5, 70, False) for variant in VARIANTS],
        # The kernel's own grid barrier (MK_OWN_GRID_BARRIER) in place of cooperative_groups.
        slow("fused", 5, 70, True),
        # The fewest blocks (one per kv head) and the first position.
        slow("head_based", TINY.kv_heads, 0, False),
        slow("fused_prefetch", TINY.kv_heads, 0, False),
        # Past 1024 keys with 2 blocks: chunks capped at 1024, each block runs two units, one of
        # them the last of its head (combine, and in `fused` the current position's K/V write).
        slow("baseline", TINY.kv_heads, 1100, False),
        slow("fused", TINY.kv_heads, 1100, False),
        # fused_stream: one key (preloaded unit); long units (attention_unit's path, stream
        # combine); 5 units per head merged by thread pairs; the own grid barrier.
        slow("fused_stream", TINY.kv_heads, 0, False),
        slow("fused_stream", TINY.kv_heads, 1100, False),
        slow("fused_stream", 13, 300, False),
        slow("fused_stream", 5, 70, True),
        # fused_ring: one key; long units; 13 blocks (pages of every segment kind, the ring wrapping
        # many times); the own grid barrier.
        slow("fused_ring", TINY.kv_heads, 0, False),
        slow("fused_ring", TINY.kv_heads, 1100, False),
        slow("fused_ring", 13, 300, False),
        slow("fused_ring", 5, 70, True),
        # dataflow (no grid barrier): the same cases as fused_ring.
        slow("dataflow", TINY.kv_heads, 0, False),
        slow("dataflow", TINY.kv_heads, 1100, False),
        slow("dataflow", 13, 300, False),
        slow("dataflow", 7, 70, False),
        slow("dataflow_splitk", TINY.kv_heads, 0, False),
        slow("dataflow_splitk", TINY.kv_heads, 1100, False),
        slow("dataflow_splitk", 13, 300, False),
        slow("dataflow_splitk", 7, 70, False),
        # dataflow_splitk_o: each block merges the units' LL records of its attention outputs: one
        # unit per head (positions 0, 30, 63 on 7 blocks), two (64, and 300 on 13 blocks), several
        # (70 above; 6 at 700 on 24 blocks), chunks capped at 1024 keys (1100 on 2 blocks); groups of
        # 1, 2, 3, 6 and 12 blocks, the blocks past the groups without O rows. More units than merge
        # lanes: test_emulated_splitk_o_merge_lanes_take_several_units.
        slow("dataflow_splitk_o", TINY.kv_heads, 0, False),
        slow("dataflow_splitk_o", 13, 30, False),
        slow("dataflow_splitk_o", 7, 63, False),
        slow("dataflow_splitk_o", 7, 64, False),
        slow("dataflow_splitk_o", 13, 300, False),
        slow("dataflow_splitk_o", 24, 700, False),
        slow("dataflow_splitk_o", TINY.kv_heads, 1100, False),
    ],
)
def test_emulated_step_matches_reference(variant: str, blocks: int, position: int, own_grid_barrier: bool) -> None:
    check_emulated_step(TINY, variant, blocks, position, own_grid_barrier)


# TINY with a vocab large enough that the LM head of a 2-block grid spans two GEMV tiles (4080
# rows each for hidden 256), in the stream's tiling and in block_gemv's. Same compiled shape.
WIDE_VOCAB = dataclasses.replace(TINY, name="tiny", vocab=9001)

# The emulator libraries of the default run's cases, (config, own_grid_barrier, defines):
# tests/prebuild.py builds them in the background while other tests run (tests/conftest.py).
# (WIDE_VOCAB compiles to TINY's: the vocab is a run-time argument.)
EMULATOR_LIBRARIES = ((TINY, False, ()),)


# Default run: the stream's tiling (dataflow_splitk_o); block_gemv's (fused) in the slow tier.
@pytest.mark.parametrize("variant", [slow("fused"), slow("fused_stream"), slow("fused_ring"), slow("dataflow"),
                                     slow("dataflow_splitk"), "dataflow_splitk_o"])
def test_emulated_lm_head_over_several_tiles(variant: str) -> None:
    check_emulated_step(WIDE_VOCAB, variant, TINY.kv_heads, 5, False)


@pytest.mark.parametrize(
    ("blocks", "defines"),
    [
        # Chunks are one LM-head page group (MK_LM_GROUP): 2 pages of 64 rows here, 71 chunks for 9001 rows.
        # The claims on 2 blocks run in the default run's dataflow_splitk_o cases; these in the slow tier.
        slow(2, ("MK_LM_STATIC_CHUNKS=1",), id="two-blocks-claim"),  # 69 chunks claimed by 2 blocks; static rows shorter than the ring
        slow(13, (), id="thirteen-blocks-claim"),          # claims spread over 13 blocks, 2 static chunks each
        slow(36, (), id="no-chunk-left"),                  # more static rows than the vocab: the last blocks have none
        slow(24, ("MK_LM_GROUP=3",), id="groups-of-3"),    # groups (and chunks) of 3 pages: again none left for the last
        slow(2, ("MK_LM_GROUP=1",), id="groups-of-1"),     # a page at a time
        slow(2, ("MK_LM_DYNAMIC=0",), id="static-split"),  # the static split, each block its share of the rows
    ],
)
def test_emulated_lm_head_shared_at_run_time(blocks: int, defines: tuple[str, ...]) -> None:
    """The paced rings' LM head (MK_LM_DYNAMIC): every row exactly once, whoever claims it, and the
    claim counters back at zero (check_emulated_step); a claim skipped or taken twice leaves rows
    unwritten (NaN) or the counters non-zero."""
    check_emulated_step(WIDE_VOCAB, "dataflow_splitk_o", blocks, 5, False, defines=defines)


@pytest.mark.slow  # two libraries of its own
def test_emulated_lm_head_claims_match_static_split_bitwise() -> None:
    """Whichever block computes a row, it sums it in the same order: the logits with claimed chunks
    are bitwise those of the static split (5 blocks, 2 static chunks each, 37 claimed)."""
    weights = make_weights(WIDE_VOCAB, 3)
    k, v = random_kv_cache(WIDE_VOCAB, MAX_SEQ, 4)
    logits = {}
    for dynamic in (0, 1):
        buffers = DecodeBuffers.build(WIDE_VOCAB, weights, MAX_SEQ, max_blocks=5)
        buffers["k_cache"][...] = k
        buffers["v_cache"][...] = v
        emulate_decode(buffers, "dataflow_splitk_o", token=9, position=5, blocks=5, seed=7,
                       defines=(f"MK_LM_DYNAMIC={dynamic}",))
        logits[dynamic] = buffers["logits"].copy()
    assert not np.isnan(logits[1]).any()
    assert np.array_equal(logits[0].view(np.uint32), logits[1].view(np.uint32))


@pytest.mark.slow  # a library of its own, 24 blocks
def test_emulated_splitk_o_merge_lanes_take_several_units() -> None:
    """11 units per head on 24 blocks (one unit per 2 blocks of a group), merged by at most 4 lanes
    per output: lanes take up to three units each."""
    check_emulated_step(TINY, "dataflow_splitk_o", 24, 700, False,
                        defines=("MK_SPLITK_O_UNITS_DIVISOR=1", "MK_MERGE_LANES=4"))


@pytest.mark.slow  # a library of its own per case, 24 blocks
@pytest.mark.parametrize("defines", [("MK_PUMP_WARP=0", "MK_UNIT_PUMP=0"), ("MK_UNIT_PUMP=1",)],
                         ids=["issuing-warp-polls", "units-always-pump"])
def test_emulated_splitk_o_pumping_layouts(defines: tuple[str, ...]) -> None:
    """The waits without a pump warp (the issuing warp polls and pumps in turn, as the first version did),
    and the attention units' pumping layout at every unit count (the default takes it only once 25%
    of the grid runs units: 24 blocks at position 100 run 4 units, 2 per kv head, below that share;
    the default tests above cover both sides of it)."""
    check_emulated_step(TINY, "dataflow_splitk_o", 24, 100, False, defines=defines)


@pytest.mark.parametrize("position", [slow(1), slow(100)])
def test_emulated_splitk_o_lighter_unit_blocks(position: int) -> None:
    """The blocks that run the units (2 at position 1, 4 at 100, under a quarter of 24 blocks) hand
    their QKV and gate/up/down rows to the others (light_split: with the tiny model's 64-row pages
    they have none left), so they stream no QKV or MLP weights at all; each block's down rows are
    still its own SwiGLU outputs. The default tests cover the uniform split beside it."""
    check_emulated_step(TINY, "dataflow_splitk_o", 24, position, False)


@pytest.mark.parametrize(
    "position, defines",
    [  # default run: one case on the default build; each other one needs a library of its own
        pytest.param(5, (), id="6-keys"),
        slow(70, (), id="64+7-keys"),
        slow(10, ("MK_UNIT_WARP_KEYS=16",), id="11-keys"),
        slow(30, ("MK_UNIT_WARP_KEYS=32",), id="31-keys-tile-threshold"),
        slow(5, ("MK_UNIT_WARP_KEYS=0",), id="warps-off"),
        slow(70, ("MK_UNIT_KEYS_SHARED=0",), id="keys-from-l2"),
    ],
)
def test_emulated_splitk_o_units_by_warps(position: int, defines: tuple[str, ...]) -> None:
    """Units of at most MK_UNIT_WARP_KEYS keys, their keys and values copied into shared memory at the
    layer's start, computed by one warp per q head: one unit of 6 keys; 64 + 7 keys, the short last
    unit writing the row of `position`; 11 and 31 keys with the threshold at 16 and at a whole tile.
    Then the 16-warp unit on 6 keys (the warps' path off), and with the keys loaded from L2
    (MK_UNIT_KEYS_SHARED=0)."""
    check_emulated_step(TINY, "dataflow_splitk_o", 7, position, False, defines=defines)


def check_emulated_step(config: ModelConfig, variant: str, blocks: int, position: int, own_grid_barrier: bool,
                        defines: tuple[str, ...] = ()) -> None:
    weights = make_weights(config, 3)
    k, v = random_kv_cache(config, MAX_SEQ, 4)
    kr, vr = k.copy(), v.copy()
    expected = ReferenceModel(config, weights, MAX_SEQ).decode_step(9, position, kr, vr)

    buffers = DecodeBuffers.build(config, weights, MAX_SEQ, max_blocks=blocks)
    buffers["k_cache"][...] = k
    buffers["v_cache"][...] = v
    emulate_decode(buffers, variant, token=9, position=position, blocks=blocks, seed=7,
                   own_grid_barrier=own_grid_barrier, defines=defines)

    assert_close(buffers["logits"], expected, name=f"{variant} logits", **LOGIT_TOLERANCE[config.name])
    for name, ref_cache in (("k_cache", kr), ("v_cache", vr)):
        assert_close(bf16_bits_to_float(buffers[name]), bf16_bits_to_float(ref_cache), name=name, **KV_TOLERANCE)
    counters = buffers["counters"]
    launches = counters[counter_slot(config, "launches")]
    words = np.delete(counters, counter_slot(config, "launches"))
    assert np.all(words & 0x7FFFFFFF == 0), (
        f"arrival counters / barrier words / readers / LM-head claims not back to zero: {words}")
    assert launches == (1 if variant in DATAFLOW_VARIANTS else 0), f"launch count {launches} after one {variant} step"
    assert not buffers["down_acc"].any(), f"{variant} left its accumulators non-zero for the next launch"


@pytest.mark.parametrize("ring", [False, True])
def test_shared_bytes_formula_matches_source(ring: bool) -> None:
    assert shared_bytes_of(TINY, ring) == shared_bytes(TINY, ring)


def test_emulator_rejects_bad_arguments() -> None:
    buffers = DecodeBuffers.build(TINY, make_weights(TINY, 0), MAX_SEQ, max_blocks=4)
    with pytest.raises(ValueError, match="variant"):
        emulate_decode(buffers, "nope", 0, 0, 4)
    with pytest.raises(ValueError, match="position"):
        emulate_decode(buffers, "baseline", 0, MAX_SEQ, 4)
    with pytest.raises(ValueError, match="blocks"):
        emulate_decode(buffers, "baseline", 0, 0, 5)


@pytest.mark.slow  # a library of its own per case
@pytest.mark.parametrize("page_bytes", [16384, 8192])
def test_emulated_ring_with_smaller_pages(page_bytes: int) -> None:
    """MK_PAGE_BYTES (A/B builds with smaller pages; 32 KB by default): the tiny model's pages shrink to 32
    and 16 rows, so every GEMV takes more page groups, the O slice spans several pages, and the LM head's
    chunks shrink with them."""
    check_emulated_step(WIDE_VOCAB, "dataflow_splitk_o", 7, 100, False, defines=(f"MK_PAGE_BYTES={page_bytes}",))


# A shape whose QKV/LM-head pages hold an odd number of rows (32768 B / (2 x 768 B) = 21), one
# more than gate/up's (20, whole SwiGLU pairs), and O/down pages split over two warps per row.
# The ring's double-buffered row sums were once sized without the 21-row pages; the emulator's
# scheduling almost never interleaves the overlapping writes, so a static_assert in
# mk_ring.cuh now guards the sizing at compile time; this test covers the page cut itself.
ODD_PAGE_ROWS = ModelConfig("odd-pages", layers=1, hidden=768, q_heads=8, kv_heads=4, intermediate=2048, vocab=700)


@pytest.mark.slow  # a library of its own (another model shape), hidden 768
@pytest.mark.parametrize("variant", ["fused_ring", "dataflow", "dataflow_splitk", "dataflow_splitk_o"])
def test_emulated_ring_with_odd_page_rows(variant: str) -> None:
    check_emulated_step(ODD_PAGE_ROWS, variant, 5, 40, False)


@pytest.mark.parametrize(  # slow tier: four emulated steps each; the other layouts need a library of their own
    "defines",
    [slow((), id="default-two-copies-bulk"),
     slow(("MK_ACC_BULK=0", "MK_ACC_COPIES=3", "MK_ACC_STRIDE=2"), id="three-copies-strided-atomics"),
     slow(("MK_ACC_COPIES=1",), id="one-copy-bulk")],
)
def test_emulated_splitk_accumulators_carry_over_launches(defines: tuple[str, ...]) -> None:
    """The split-K variants' accumulators must be zero again after each launch, whatever ran
    between: four steps in a row on the same buffers (splitk, dataflow, splitk_o, splitk; the
    launch counter advances under all), each checked against the reference stepping the same cache."""
    weights = make_weights(TINY, 5)
    k, v = random_kv_cache(TINY, MAX_SEQ, 6)
    ref = ReferenceModel(TINY, weights, MAX_SEQ)
    buffers = DecodeBuffers.build(TINY, weights, MAX_SEQ, max_blocks=5)
    buffers["k_cache"][...] = k
    buffers["v_cache"][...] = v
    for step, variant in enumerate(("dataflow_splitk", "dataflow", "dataflow_splitk_o", "dataflow_splitk")):
        token, position = 11 + step, 30 + step
        expected = ref.decode_step(token, position, k, v)
        emulate_decode(buffers, variant, token=token, position=position, blocks=5, seed=step, defines=defines)
        assert_close(buffers["logits"], expected, name=f"step {step} ({variant}) logits", **LOGIT_TOLERANCE[TINY.name])
        assert not buffers["down_acc"].any(), f"accumulators not zero after step {step} ({variant})"
    assert buffers["counters"][counter_slot(TINY, "launches")] == 4, "launch counter"


@pytest.mark.parametrize("variant", ["dataflow_splitk", "dataflow_splitk_o"])
@pytest.mark.parametrize("word", [0, 7], ids=["a-word", "a-probe-word"])
def test_emulated_splitk_stops_on_accumulators_left_over(word: int, variant: str) -> None:
    """Accumulators an unfinished launch left non-zero would make the readers wait forever for a
    count they have passed: the kernel traps with that reason instead of hanging, whether the word
    is one the issuing warp polls first (TINY: every 8th, from 7) or not."""
    buffers = DecodeBuffers.build(TINY, make_weights(TINY, 0), MAX_SEQ, max_blocks=4)
    # Slot 0 (layer 0's down sums; dataflow_splitk_o: its O sums), copy 0: three blocks already added.
    buffers["down_acc"][word] = np.uint64(3 << 56)
    with pytest.raises(RuntimeError, match="trap: .*left over from an unfinished launch"):
        emulate_decode(buffers, variant, token=1, position=0, blocks=4)
