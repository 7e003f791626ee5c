"""The diagnostic tools' CPU side: the A/B tool's argument parsing and summary, the trace tool's checks."""
from __future__ import annotations

import argparse

import pytest

from kernels.megakernel.ab import parse_set, summarize


def test_parse_set_splits_name_and_defines() -> None:
    assert parse_set("base=") == ("base", ())
    assert parse_set("x=MK_A=1,MK_B=2") == ("x", ("MK_A=1", "MK_B=2"))


def test_grid_blocks_is_taken_out_of_the_compile_defines() -> None:
    from kernels.megakernel.ab import split_grid

    assert split_grid(("MK_A=1", "grid_blocks=128")) == (("MK_A=1",), 128)
    assert split_grid(("MK_A=1",)) == (("MK_A=1",), None)


@pytest.mark.parametrize("text", ["base", "=MK_A=1", "x=MK_A", "g=grid_blocks=many", "g=grid_blocks=1,grid_blocks=2"])
def test_parse_set_rejects_malformed_sets(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_set(text)


@pytest.mark.parametrize("probe", ["c", "a"])
def test_probe_must_name_a_set_other_than_the_reference(tmp_path, probe: str) -> None:
    """A probe (a build timed whatever its check says) must be one of the --sets, and not the
    reference every ratio is taken against; refused before anything is built."""
    from kernels.megakernel.ab import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--out", str(tmp_path / "ab.json"), "--set", "a=", "--set", "b=MK_X=1", "--probe", probe])
    assert exit_info.value.code == 2


def test_summary_ratios_are_per_round_against_the_first_build() -> None:
    rows = [{"set": s, "position": 1, "round": r, "median_s": t}
            for r, (a, b) in enumerate([(1.0, 0.5), (1.2, 0.4), (1.1, 0.55)]) for s, t in (("a", a), ("b", b))]
    summary = {row["set"]: row for row in summarize(rows, ["a", "b"], (1,))}
    assert summary["a"]["speedup_vs_first"] == 1.0
    assert summary["b"]["median_s"] == 0.5
    assert summary["b"]["speedup_vs_first"] == pytest.approx(2.0)
    assert summary["b"]["speedup_min"] == pytest.approx(2.0)
    assert summary["b"]["speedup_max"] == pytest.approx(3.0)


def test_trace_refuses_sub_phases_the_variant_does_not_record() -> None:
    """dataflow_splitk_o's O projection runs through ring_splitk, which has no sub-phase marks: the
    trace tool says so before building anything instead of printing differences of unset events."""
    from kernels.megakernel.trace import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--variants", "dataflow_splitk_o", "--subphases", "o"])
    assert exit_info.value.code == 2


def test_trace_unit_rows_count_only_blocks_that_ran_a_unit_in_the_layer() -> None:
    """Events 23-29 are written only by blocks that ran a unit (or merged records) in that layer;
    the rows skip the others' zeros and stale stamps instead of averaging them in."""
    import numpy as np

    from kernels.megakernel.layout import TRACE_EVENTS_PER_LAYER as E
    from kernels.megakernel.trace import phase_table

    layers, blocks = 3, 3
    cycles = np.zeros((blocks, layers * E + 4), dtype=np.int64)
    for layer in range(layers):
        base = layer * 10_000
        for b in range(blocks):
            cycles[b, layer * E:layer * E + 15] = base + np.arange(15) * 500  # phases 0-14, 500 cycles each
        c = cycles[0, layer * E:]
        c[23], c[24], c[25], c[26] = c[3] + 10, c[3] + 210, c[3] + 310, c[3] + 330  # block 0 ran a unit
        c[28], c[29] = c[3] + 240, c[3] + 290  # its scores and softmax done
        cycles[1, layer * E + 23:layer * E + 30] = 7  # stale stamps from another launch
        cycles[2, layer * E + 27] = cycles[2, layer * E + 5] + 400  # block 2 merged records
    rows = {r["phase"]: r for r in phase_table(cycles, layers, 1.0)}
    assert rows["  unit: q/k/v in, QK-norm, RoPE"]["median_us"] == 200
    assert rows["  unit: scores"]["max_us"] == 30
    assert rows["  unit: softmax"]["median_us"] == 50
    assert rows["  unit: P.V"]["min_us"] == 20
    assert rows["  unit: record out"]["min_us"] == 20
    assert rows["  records: probes seen"]["median_us"] == 400
    assert rows["  records: merge"]["median_us"] == 100


def test_trace_names_the_block_that_publishes_its_sums_last_and_its_lag() -> None:
    """clock64() is per SM, so the last publisher of an accumulator exchange is found as the block that
    waits least in the RMSNorm after it; the others' waits beyond its own are its lag."""
    import numpy as np

    from kernels.megakernel.layout import TRACE_EVENTS_PER_LAYER as E
    from kernels.megakernel.trace import phase_table

    layers, blocks = 3, 5
    cycles = np.zeros((blocks, layers * E + 4), dtype=np.int64)
    for layer in range(layers):
        for b in range(blocks):
            cycles[b, layer * E:layer * E + 15] = 10**9 * b + layer * 10_000 + np.arange(15) * 500  # unrelated clocks
            cycles[b, layer * E + 1] -= 10 * b  # the input RMSNorm's wait: 500 - 10 b cycles, block 4 published last
        cycles[3, layer * E + 9] -= 300  # the post-attention RMSNorm: block 3 waits 300 cycles less than the others
        cycles[3, layer * E + 10:layer * E + 15] -= 300
    rows = {r["phase"]: r for r in phase_table(cycles, layers, 1.0)}
    o_sums = rows["  O sums: last publisher's lag"]
    assert (o_sums["slowest_block"], o_sums["slowest_share"], o_sums["median_us"], o_sums["max_us"]) == (3, 1.0, 300, 300)
    down = rows["  down sums: last publisher's lag"]
    assert (down["slowest_block"], down["median_us"], down["max_us"]) == (4, 20, 40)
