"""Every kernel family's margins file (kernels/<family>/margins.json), no GPU needed: each margin
follows the rule from the interval it records, with the GPU, date and commit it was measured on;
every gated comparison of the perf tests has an entry naming that test; the reports it cites are
kept in evidence/ and give that interval again; the family README's margins table is the file's, as ``gpuperf margins`` prints it."""
from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_gpuperf._cli.margins import command
from pytest_gpuperf._store.margins import FIGURE_RULE, RULE, MarginsFile, measurements_of
from pytest_gpuperf._store.reports import load_report

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = sorted(p.parent.name for p in (ROOT / "kernels").glob("*/margins.json"))



def _qkv_test(key: str) -> str:
    gate, layer = key.split("/")
    return "test_strip_beats_base_w2_on_larger_layer" if gate.startswith("qkv_strip_w2") else f"test_rearranged_weights_beat_base[{layer}]"


def _merge_test(key: str) -> str:
    name, case = key.split("/")
    return f"test_{name}[{case}]"


def _megakernel_test(key: str) -> str:
    comparison, position = key.split("@")
    return f"test_variant_speedup[{comparison}-{position}]"


# How each family's margin key names the test it gates (the part of the node id after "::").
TEST_OF_KEY: dict[str, Callable[[str], str]] = {
    "cluster_reduce": lambda key: f"test_speedup[{key}]",
    "gemm_schedules": lambda key: f"test_{key}",
    "megakernel": _megakernel_test,
    "merge_attn_states": _merge_test,
    "qkv": _qkv_test,
}


def _margins(family: str) -> MarginsFile:
    return MarginsFile.read(ROOT / "kernels" / family / "margins.json")


def test_every_family_has_a_margins_file() -> None:
    assert FAMILIES == sorted(p.parent.name for p in (ROOT / "kernels").glob("*/family.py"))


@pytest.mark.parametrize("family", FAMILIES)
def test_each_margin_follows_the_rule_from_the_evidence_it_records(family: str) -> None:
    """value == floor(100 * 0.95 * ci_low) / 100 of the recorded lowest interval, the interval in
    order, its GPU, date and commit given, its run among the runs the minimum was taken over."""
    margins = _margins(family)
    assert margins.family == family
    assert margins.problems() == []
    for e in margins.all_entries():
        assert e.rule == (FIGURE_RULE if e.figure else RULE), e.key


@pytest.mark.parametrize("family", FAMILIES)
def test_every_gated_comparison_has_an_entry_naming_its_test(family: str, family_node_ids: set[str]) -> None:
    module = f"tests/{family}/test_perf.py"
    gated = {n for n in family_node_ids if n.startswith(module + "::")
             and n.partition("::")[2].partition("[")[0] in importlib.import_module(f"kernels.{family}.family").FAMILY.margin_tests}
    margins = _margins(family)
    for arch, table in margins.entries.items():
        comparisons = {e.key: e for e in table.values() if e.figure is None}
        assert {e.test for e in comparisons.values()} == gated, arch
        for key, e in comparisons.items():
            assert e.test == f"{module}::{TEST_OF_KEY[family](key)}", key
        for e in table.values():
            assert e.test in family_node_ids, e.key


@pytest.mark.parametrize("family", FAMILIES)
def test_each_entry_names_the_variants_its_key_compares(family: str) -> None:
    for e in _margins(family).all_entries():
        if e.figure is not None:
            continue
        assert e.fast and e.baseline, e.key
        name = e.key.split("/")[0].split("[")[0].split("@")[0]
        fast, baseline = (v.split("@")[0] for v in (e.fast, e.baseline))  # the megakernel's carry their position
        assert name == f"{fast}_vs_{baseline}", e.key


@pytest.mark.parametrize("family", FAMILIES)
def test_the_reports_cited_are_kept_in_evidence(family: str) -> None:
    margins = _margins(family)
    for rid, run in margins.runs.items():
        assert run.report is not None, rid
        assert run.report.startswith("evidence/") and (ROOT / run.report).is_file(), run.report
    assert set(margins.runs) == {rid for e in margins.all_entries() for rid in e.over}


@pytest.mark.parametrize("family", FAMILIES)
def test_each_margin_is_the_lowest_interval_of_the_reports_it_names(family: str) -> None:
    """Replays the kept reports: the interval each entry records is the lowest one its test measured
    over the runs in ``over``, read again from their reports (its GPU, date and run with it)."""
    margins = _margins(family)
    measured = {rid: measurements_of(load_report(ROOT / run.report), run.report or "", run.commit)
                for rid, run in margins.runs.items()}
    for e in margins.all_entries():
        mine = [m for rid in e.over for m in measured[rid] if m.run.gpu.arch == e.arch and m.matches(e)]
        assert mine, f"{e.key}: no run it names measured it"
        lowest = min(mine, key=lambda m: m.low).evidence()
        assert e.evidence is not None
        recorded = e.evidence
        assert (lowest.run, lowest.gpu, lowest.date, lowest.estimate, lowest.ci_low, lowest.ci_high, lowest.confidence) == (
            recorded.run, recorded.gpu, recorded.date, recorded.estimate, recorded.ci_low, recorded.ci_high, recorded.confidence), e.key


MARKER = re.compile(r"<!-- margins: gpuperf margins --file (\S+) --markdown -->\n(.*?)<!-- end margins -->\n", re.S)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_readme_table_is_the_margins_file(family: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's margins table is what ``gpuperf margins --file ... --markdown`` prints: run that
    command and paste its output between the markers when the file changes."""
    monkeypatch.chdir(ROOT)
    found = MARKER.findall((ROOT / "kernels" / family / "README.md").read_text())
    assert [f for f, _ in found] == [f"kernels/{family}/margins.json"], "one generated margins table"
    text, status = command([], Path(found[0][0]), markdown=True)
    assert status == 0
    assert found[0][1] == text


def test_an_entry_that_breaks_the_rule_is_reported(tmp_path: Path) -> None:
    margins = _margins("qkv")
    key, e = next(iter(margins.entries["sm_90"].items()))
    margins.entries["sm_90"][key] = replace(e, value=(e.value or 0) + 0.01)
    assert any("but the rule gives" in p for p in margins.problems())
