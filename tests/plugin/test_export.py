"""``gpuperf export --format github-action-benchmark`` against the format github-action-benchmark
documents, and ``gpuperf report --failures-first --max-chars`` as the pull request comment uses it."""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Callable

import pytest

from pytest_gpuperf._cli.main import main
from pytest_gpuperf._report.export import benchmark_entries
from pytest_gpuperf._report.render import cut, format_report

jsonschema = pytest.importorskip("jsonschema", reason="the test extra installs jsonschema")

# github-action-benchmark v1.22.0, src/extract.ts: the customSmallerIsBetter file is
# z.array(BenchmarkResult) with BenchmarkResult = z.object({name: string, value: number,
# range?: string, unit: string, extra?: string}); README "customBiggerIsBetter and
# customSmallerIsBetter": "Every entry ... only needs to provide name, unit, and value. You can also
# provide optional range (results' variance) and extra". We emit exactly those keys.
CUSTOM_SMALLER_IS_BETTER = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "array",
    "items": {
        "type": "object",
        "required": ["name", "unit", "value"],
        "additionalProperties": False,
        "properties": {
            "name": {"type": "string", "minLength": 1},
            "unit": {"type": "string"},
            "value": {"type": "number"},
            "range": {"type": "string"},
            "extra": {"type": "string"},
        },
    },
}
# The action's extractRangeInfo: a range it can rescale when the unit changes is '± <number>'.
RANGE = re.compile(r"(?P<prefix>(\+-|±)\s*)(?P<value>\d.*)")

PERF_TEST = """
from pytest_gpuperf import Variant

def test_claim(gpu_perf):
    gpu_perf.assert_speedup(Variant("fast", lambda: None), Variant("slow", lambda: None), at_least=1.1)

def test_alone(gpu_perf):
    gpu_perf.measure(Variant("solo", lambda: None))
"""


_MADE: dict[str, str] = {}  # the report's text, made once per test session (two pytester runs)


@pytest.fixture
def report(pytester: pytest.Pytester, fake_gpu: Callable[..., None]) -> Path:
    """A fresh report on the fake GPU: baselines recorded, then 'fast' 10% slower (its gate fails)."""
    path = pytester.path / "report.json"
    if "report" in _MADE:
        path.write_text(_MADE["report"])
        return path
    pytester.makepyfile(test_perf=PERF_TEST)
    fake_gpu(times={"fast": 10e-6, "slow": 12e-6, "solo": 3e-6})
    pytester.runpytest("--gpu-perf", "--gpu-perf-update-baselines")
    fake_gpu(times={"fast": 11e-6, "slow": 12e-6, "solo": 3e-6})
    pytester.runpytest("--gpu-perf", "--gpu-perf-json=report.json")
    _MADE["report"] = path.read_text()
    return path


def test_the_export_is_github_action_benchmark_custom_smaller_is_better(report: Path, tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    assert main(["export", "--format", "github-action-benchmark", str(report), "-o", str(out)]) == 0
    entries = json.loads(out.read_text())
    jsonschema.validate(entries, CUSTOM_SMALLER_IS_BETTER)
    data = json.loads(report.read_text())
    key = next(iter(data["devices"]))
    assert [e["name"] for e in entries] == [
        f"test_perf.py::test_claim::fast ({key})", f"test_perf.py::test_claim::slow ({key})", f"test_perf.py::test_alone::solo ({key})",
    ], "one entry per measured variant, named by test, variant and GPU"
    records = [m for t in data["tests"] for m in t["measurements"]]
    for entry, record in zip(entries, records):
        m = record["measurement"]
        assert entry["unit"] == "us" and entry["value"] == pytest.approx(m["median_s"] * 1e6, rel=1e-5)
        found = RANGE.match(entry["range"])
        assert found, entry["range"]
        half = max(m["median_s"] - m["ci_low_s"], m["ci_high_s"] - m["median_s"]) * 1e6
        assert float(found["value"]) == pytest.approx(half, rel=1e-5)
        assert f"verdict: {record['verdict']}" in entry["extra"] and "GPU: Fake GPU" in entry["extra"]
        assert re.search(r"\d+(\.\d+)?% CI: \[[\d.]+, [\d.]+\] us", entry["extra"]), entry["extra"]
    assert "vs stored baseline: +" in entries[0]["extra"] and "verdict: fail" in entries[0]["extra"]


def test_the_export_to_standard_output_and_what_it_leaves_out(report: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(report.read_text())
    assert main(["export", "--format", "github-action-benchmark", str(report)]) == 0
    assert json.loads(capsys.readouterr().out) == benchmark_entries(data)
    contended = copy.deepcopy(data)
    contended["tests"][0]["measurements"][0]["verdict"] = "contended"
    twice = copy.deepcopy(data)
    twice["tests"][1]["measurements"].append(copy.deepcopy(twice["tests"][1]["measurements"][0]))
    assert len(benchmark_entries(contended)) == len(benchmark_entries(data)) - 1, "contended times are left out"
    names = [e["name"] for e in benchmark_entries(twice)]
    assert len(set(names)) == len(names) and names[-1].endswith(" #2")


def test_an_unknown_format_is_a_usage_error(report: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["export", "--format", "asv", str(report)])
    assert exc.value.code == 2 and "invalid choice: 'asv'" in capsys.readouterr().err


def test_failures_come_first_in_the_comment(report: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(report.read_text())
    plain = format_report(data)
    first = format_report(data, failures_first=True)
    rows = [line for line in first.splitlines() if line.startswith("| test_")]
    assert rows[0].split("|")[2].strip() == "fast" and rows[0].rstrip(" |").endswith("fail/fail"), rows
    assert sorted(rows) == sorted(line for line in plain.splitlines() if line.startswith("| test_"))
    assert first.index("Failed tests (1)") < first.index("| test |")
    assert main(["report", str(report), "--markdown", "--failures-first"]) == 0
    assert capsys.readouterr().out == first


def test_a_long_report_is_cut_after_a_whole_line(report: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = "\n".join(f"| row {i} | {'x' * 50} |" for i in range(100)) + "\n"
    short = cut(text, 1000, "the run's artifacts")
    assert len(short) <= 1000 and short.endswith("more lines not shown: see the run's artifacts._\n")
    body = short.rsplit("\n\n", 1)[0]
    assert all(line.startswith("| row ") and line.endswith(" |") for line in body.splitlines())
    assert cut(text, len(text)) == text
    assert main(["report", str(report), "--max-chars", "400"]) == 0
    out = capsys.readouterr().out
    assert len(out) <= 400 and "more lines not shown" in out
    with pytest.raises(SystemExit):
        main(["report", str(report), "--max-chars", "10"])
    assert "at least 200" in capsys.readouterr().err




@pytest.mark.parametrize("output", ["folder", "folder/", "new-folder/"])
def test_an_output_that_names_a_folder_is_one_usage_line(report: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch, output: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder").mkdir()
    with pytest.raises(SystemExit) as exc:
        main(["export", "--format", "github-action-benchmark", str(report), "-o", output])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "Traceback" not in err
    assert err.splitlines()[-1] == (
        f"gpuperf: error: -o {output} names a folder; give the file to write, e.g. -o {output.rstrip('/')}/bench.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder"] and not any((tmp_path / "folder").iterdir())


def test_an_output_inside_a_file_is_one_error_line(report: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a-file").write_text("")
    out = tmp_path / "a-file" / "bench.json"
    assert main(["export", "--format", "github-action-benchmark", str(report), "-o", str(out)]) == 1
    assert capsys.readouterr().err == f"gpuperf: error: cannot write {out}: a part of its folder, {out.parent}, is a file\n"
