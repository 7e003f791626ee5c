"""The sweep harness every family's sweep.py uses (kernels/sweeps.py): what its JSON carries, and
that each sweep's command line parses on any machine (the timing itself needs a GPU)."""
from __future__ import annotations

import importlib
import json
import math
from pathlib import Path

import pytest

from kernels import sweeps
from pytest_gpuperf.testing import fake_device

ROOT = Path(__file__).resolve().parents[2]
FAMILIES_WITH_SWEEPS = sorted(p.parent.name for p in (ROOT / "kernels").glob("*/sweep.py"))


def test_the_file_names_the_gpu_the_time_and_the_commit(tmp_path: Path) -> None:
    run = sweeps.start("qkv", fake_device(name="NVIDIA H200", memory_gib=140))
    written = run.write(tmp_path / "out" / "sweep.json", {"timings": [{"median_s": 1e-6}], "ratio": math.nan})
    data = json.loads((tmp_path / "out" / "sweep.json").read_text())
    assert {k: v for k, v in data.items() if k not in ("ratio", "notes")} == {
        k: v for k, v in written.items() if k != "ratio"
    }
    assert data["family"] == "qkv" and data["gpu"]["key"] == "nvidia-h200-sm90-132sm-140gib"
    assert data["created"].endswith("+00:00") and data["elapsed_s"] >= 0
    assert data["provenance"]["commit"] is None or len(data["provenance"]["commit"]) == 40
    assert data["timings"] == [{"median_s": 1e-6}]
    assert data["ratio"] is None and any("ratio" in note for note in data["notes"])  # JSON has no NaN


def test_results_may_not_overwrite_the_header(tmp_path: Path) -> None:
    run = sweeps.start("qkv", fake_device())
    with pytest.raises(ValueError, match=r"\['gpu'\]"):
        run.write(tmp_path / "x.json", {"gpu": "mine"})
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("family", FAMILIES_WITH_SWEEPS)
def test_every_sweep_uses_the_harness_and_parses_its_options(family: str, capsys: pytest.CaptureFixture[str]) -> None:
    module = importlib.import_module(f"kernels.{family}.sweep")
    source = Path(module.__file__ or "").read_text()
    for call in ("sweeps.parser(", "sweeps.start(", ".write(args.out"):
        assert call in source, f"kernels/{family}/sweep.py does not call {call}"
    with pytest.raises(SystemExit) as exit_info:
        module.main(["--help"])
    assert exit_info.value.code == 0
    assert f"python -m kernels.{family}.sweep" in capsys.readouterr().out
    with pytest.raises(SystemExit):  # --out is required before any GPU work
        module.main([])


def test_five_families_have_sweeps() -> None:
    assert FAMILIES_WITH_SWEEPS == ["cluster_reduce", "gemm_schedules", "megakernel", "merge_attn_states", "qkv"]
