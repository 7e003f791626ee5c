"""Charts and the HTML index of a JSON report: a synthetic report, the committed H200 report,
the --gpu-perf-plots option on a fake GPU, and a clear message without matplotlib."""
from __future__ import annotations

import gzip
import json
import math
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from pytest_gpuperf._cli.main import main
from pytest_gpuperf._report.plots import draw, shape
from pytest_gpuperf._store.reports import load_report
from pytest_gpuperf._report.plots import PlotsUnavailable, write_plots
from pytest_gpuperf._report.plots.shape import family_of

pytest.importorskip("matplotlib")
# The same for matplotlib's modules the charts use: first imported inside an in-process pytester
# run, they are dropped afterwards while matplotlib.figure keeps the old classes, and the next
# run fails ("Single argument to subplot must be a three-digit integer, not GridSpec(...)").
for _module in ("matplotlib.figure", "matplotlib.gridspec", "matplotlib.backends.backend_agg", "matplotlib.lines",
                "matplotlib.ticker", "PIL.Image"):
    pytest.importorskip(_module)
# The plugin imports scipy.stats lazily; imported first inside an in-process pytester run, it is
# dropped from sys.modules afterwards and numpy's C modules refuse to load twice
# ("cannot load module more than once per process"). Importing it here keeps it loaded.
pytest.importorskip("scipy.stats")

ROOT = Path(__file__).resolve().parents[2]
# An H200's perf run of all five families (evidence/README.md).
REAL_REPORT = ROOT / "evidence" / "2026-11-22-h200-0013.json.gz"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _measurement(name: str, median: float, low: float, high: float, verdict: str = "pass") -> dict[str, Any]:
    return {
        "module": "m",
        "key": f"k::{name}",
        "measurement": {"name": name, "median_s": median, "ci_low_s": low, "ci_high_s": high, "confidence": 0.99, "throttled": False},
        "baseline": None,
        "regression": {"slowdown": 1.01, "ci_low": 0.99, "ci_high": 1.03, "tolerance": 0.05, "verdict": verdict},
        "verdict": verdict,
        "device": "fake-gpu",
        "gpu_ordinal": 0,
    }


def _comparison(fast: str, base: str, speedup: float, at_least: float | None, verdict: str) -> dict[str, Any]:
    return {"fast": fast, "baseline": base, "speedup": speedup, "ci_low": speedup * 0.98, "ci_high": speedup * 1.02,
            "confidence": 0.995, "at_least": at_least, "verdict": verdict, "rounds": 20}


SYNTHETIC: dict[str, Any] = {
    "schema": "pytest-gpuperf/report/1",
    "created": "2026-11-22T00:00:00+00:00",
    "settings": {"cache": "cold", "confidence": "0.99"},
    "devices": {"fake-gpu": {"name": "Fake GPU", "driver_version": "1", "cuda_runtime_version": "13.0"}},
    "tests": [
        {
            "nodeid": "tests/alpha/test_perf.py::test_fast_vs_slow[small]",
            "outcome": "passed",
            "measurements": [_measurement("fast", 2e-6, 1.9e-6, 2.1e-6), _measurement("slow", 3e-6, 2.9e-6, 3.1e-6)],
            "comparisons": [_comparison("fast", "slow", 1.5, 1.2, "pass")],
            "figures": [{"key": "bandwidth_fraction", "value": 0.42, "unit": ""}, {"key": "tflops", "value": 3.0, "unit": "TFLOP/s"}],
        },
        {
            "nodeid": "tests/alpha/test_perf.py::test_fast_vs_slow[large]",
            "outcome": "failed",
            # a runaway interval (an outlier sample among few): drawn clipped, its end written out
            "measurements": [_measurement("fast", 4e-3, 3.9e-3, 1.6, "fail"), _measurement("slow", 5e-3, 4.9e-3, 5.1e-3)],
            "comparisons": [_comparison("fast", "slow", 1.1, 1.2, "fail")],
            "figures": [{"key": "bandwidth_fraction", "value": 1.04, "unit": ""}],
        },
        {
            "nodeid": "tests/alpha/test_perf.py::test_undecided",
            "outcome": "passed",
            "measurements": [_measurement("a", 1e-5, 0.9e-5, 1.1e-5, "measured"), _measurement("b", 1e-5, 0.9e-5, 1.1e-5, "measured")],
            "comparisons": [_comparison("a", "b", 1.0, 1.01, "inconclusive"), _comparison("a", "b", 1.0, None, "measured")],
            "figures": [],
        },
        {"nodeid": "tests/beta/test_x.py::test_only_figures", "outcome": "passed", "measurements": [], "comparisons": [],
         "figures": [{"key": "dsmem_bandwidth_fraction", "value": 0.7, "unit": ""}, {"key": "baseline_bandwidth_fraction", "value": 0.5, "unit": ""}]},
        {"nodeid": "tests/gamma/test_y.py::test_nothing", "outcome": "skipped", "measurements": [], "comparisons": [], "figures": []},
    ],
    "skipped": [{"reason": "perf test, timing is off", "count": 2}],
    "baseline_changes": [],
    "summary": {"speedup pass": 1, "speedup fail": 1},
}


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_family_is_the_folder_under_tests() -> None:
    assert family_of("tests/qkv/test_perf.py::test_x[a-b]") == "qkv"
    assert family_of("pkg/kern/test_perf.py::test_x") == "kern"
    assert family_of("test_perf.py::test_x") == "test_perf"


def test_synthetic_report(tmp_path: Path) -> None:
    written = write_plots(SYNTHETIC, tmp_path / "plots")
    names = [p.name for p in written]
    assert names == ["alpha.png", "beta.png", "index.html"], "one chart per family with results, gamma has none"
    for png in written[:-1]:
        width, height = _png_size(png)
        assert width == 1200 and 150 < height < 3000
    page = (tmp_path / "plots" / "index.html").read_text()
    for text in ('src="alpha.png"', 'src="beta.png"', "fast_vs_slow[large]", "&ge; 1.200x", "inconclusive", "none (report)",
                 "42.0%", "gamma", "(no results)", "perf test, timing is off"):
        assert text in page, text


def test_rows_label_and_clip() -> None:
    tests = SYNTHETIC["tests"]
    rows = shape.measurement_rows(tests)
    assert rows[0]["label"] == "fast_vs_slow[small] \u00b7 fast"
    assert rows[2]["high"] == 1.6
    comparisons = shape.comparison_rows(tests)
    assert comparisons[0]["label"] == "fast_vs_slow[small]", "the test id names both variants already"
    assert comparisons[2]["label"] == "undecided: a vs b"
    fractions, title = shape.fraction_rows(tests[3:4])
    assert [r["label"] for r in fractions] == ["only_figures \u00b7 dsmem", "only_figures \u00b7 baseline"]
    assert title is not None and "bandwidth_fraction" in title
    long = shape.clipped_label("speedup_with_a_very_long_test_function_name_indeed[param-one-two-three-four]", "variant_name_x")
    assert len(long) <= shape.MAX_LABEL and long.endswith("[param-one-two-three-four] \u00b7 variant_name_x")


@pytest.fixture(scope="module")
def real_plots(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    report = load_report(REAL_REPORT)
    return write_plots(report, tmp_path_factory.mktemp("real") / "plots")


@pytest.mark.slow  # draws all five families of a whole-suite report (about 15 s)
def test_committed_h200_report(real_plots: list[Path]) -> None:
    assert [p.name for p in real_plots] == [
        "merge_attn_states.png", "qkv.png", "cluster_reduce.png", "gemm_schedules.png", "megakernel.png", "index.html",
    ]
    for png in real_plots[:-1]:
        width, height = _png_size(png)
        assert width == 1200 and height < 4000
        assert png.stat().st_size < 400_000, f"{png.name}: keep committed charts small"
    page = real_plots[-1].read_text()
    assert "NVIDIA H200" in page and page.count("<img ") == 5


def test_command_line_reads_an_archived_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``gpuperf plots`` draws a gzipped report; a missing one is a message. One family of the
    committed report (test_committed_h200_report draws all five)."""
    report = json.loads(gzip.decompress(REAL_REPORT.read_bytes()))
    report["tests"] = [t for t in report["tests"] if family_of(t["nodeid"]) == "qkv"]
    archived = tmp_path / "qkv.json.gz"
    archived.write_bytes(gzip.compress(json.dumps(report).encode()))
    assert main(["plots", str(archived), str(tmp_path / "plots")]) == 0
    printed = capsys.readouterr().out.split()
    assert [Path(line).name for line in printed] == ["qkv.png", "index.html"]
    assert all(Path(line).exists() for line in printed)
    assert main(["plots", str(tmp_path / "none.json.gz"), str(tmp_path / "other")]) == 1
    err = capsys.readouterr().err
    assert "none.json.gz does not exist" in err and f"--gpu-perf-json {tmp_path / 'none.json'})" in err
    assert not (tmp_path / "other").exists()


def test_missing_matplotlib_is_a_message_not_a_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(PlotsUnavailable, match="pip install matplotlib"):
        write_plots(SYNTHETIC, tmp_path / "plots")
    assert not (tmp_path / "plots").exists()


PERF_TEST = """
from pytest_gpuperf import Variant

def test_claim(gpu_perf):
    c = gpu_perf.assert_speedup(Variant("fast", lambda: None, bytes=1000), Variant("slow", lambda: None), at_least=1.1)
    gpu_perf.record("bandwidth_fraction", 0.5)
"""


@pytest.fixture
def perf_project(pytester: pytest.Pytester, fake_gpu: Callable[..., None], monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for name in ("GPU_PERF_PLOTS", "GPU_PERF_COUNTERS"):
        monkeypatch.delenv(name, raising=False)
    fake_gpu(times={"fast": 10e-6, "slow": 12e-6})
    pytester.makepyfile(test_perf=PERF_TEST)
    return pytester


def test_option_writes_plots_after_the_run(perf_project: pytest.Pytester) -> None:
    result = perf_project.runpytest("--gpu-perf", "--gpu-perf-plots=out/plots", "--gpu-perf-json=report.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["gpu-perf: plots *out/plots (1 chart(s) and index.html)"])
    folder = perf_project.path / "out" / "plots"
    assert sorted(p.name for p in folder.iterdir()) == ["index.html", "test_perf.png"]
    _png_size(folder / "test_perf.png")
    assert ">claim</td>" in (folder / "index.html").read_text()


def test_option_from_the_environment(perf_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPU_PERF_PLOTS", "envplots")
    perf_project.runpytest("--gpu-perf").assert_outcomes(passed=1)
    assert (perf_project.path / "envplots" / "index.html").exists()


def test_option_without_matplotlib_says_so(perf_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    result = perf_project.runpytest("--gpu-perf", "--gpu-perf-plots=plots")
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["gpu-perf: plots * NOT written: matplotlib is not installed*pip install matplotlib*"])


def _titles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The suptitles drawn from now on (where a chart notes the rows it left out)."""
    from matplotlib.figure import Figure

    seen: list[str] = []
    original = Figure.suptitle

    def spy(self: Any, t: str, **kwargs: Any) -> Any:
        seen.append(t)
        return original(self, t, **kwargs)

    monkeypatch.setattr(Figure, "suptitle", spy)
    return seen


def test_hostile_numbers_and_names_render_or_are_left_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import copy

    report = copy.deepcopy(SYNTHETIC)
    alpha = report["tests"]
    alpha[0]["measurements"][0]["measurement"].update(median_s=1e308, ci_high_s=1e308)  # past the axis range
    alpha[0]["measurements"][1]["measurement"].update(ci_low_s=4e-6)  # low above the median: out of order
    alpha[0]["comparisons"][0].update(speedup=-1.0, ci_low=-2.0)  # a negative speedup
    alpha[1]["comparisons"][0]["at_least"] = 1e308  # a margin no axis holds: not drawn, the row is
    alpha[2]["nodeid"] = "tests/alpha/test_perf.py::test_$\\frac{1}{0}$[\x1b[31m]"  # mathtext and control characters
    alpha[3]["figures"][0]["value"] = 1e308
    long_family = "f" * 300
    report["tests"].append({"nodeid": f"tests/{long_family}/test_x.py::test_y", "outcome": "passed", "comparisons": [],
                            "figures": [], "measurements": [_measurement("k", 1e-6, 1e-6, 1e-6)]})
    path = tmp_path / "r.json"
    path.write_text(json.dumps(report))
    titles = _titles(monkeypatch)
    written = write_plots(load_report(path), tmp_path / "plots")
    assert [p.name for p in written][:2] == ["alpha.png", "beta.png"] and written[-1].name == "index.html"
    slug = written[2].name
    assert slug.startswith("fff") and len(slug) <= shape.MAX_SLUG + len(".png")
    for png in written[:-1]:
        _png_size(png)
    assert "not drawn (listed in index.html): 2 times outside 1e-12..1e+06 or out of order; " \
           "1 speedups outside 1e-06..1e+06 or out of order" in titles[0]
    assert "1 fractions outside 0..1000" in titles[1]
    page = written[-1].read_text()
    assert "1e+308 s" in page, "left out of the chart, still in the table"


def test_a_panel_draws_at_most_max_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(draw, "MAX_ROWS", 3)
    tests = [{"nodeid": f"tests/many/test_x.py::test_{i}", "outcome": "passed", "comparisons": [], "figures": [],
              "measurements": [_measurement("k", 1e-6 * (i + 1), 1e-6 * (i + 1), 1e-6 * (i + 1))]} for i in range(5)]
    titles = _titles(monkeypatch)
    png = draw.plot_family("many", tests, tmp_path / "many.png")
    assert png is not None and _png_size(png)[1] < 400
    assert "2 times past the first 3" in titles[0]


# -- the gate on the charts: stored baseline, threshold band, change panel, sweeps ------------
def _checked(name: str, median: float, stored: float, slowdown: float, verdict: str = "pass",
             threshold: float = 0.025) -> dict[str, Any]:
    """A measurement record judged against a stored baseline, as the fixture writes it."""
    record = _measurement(name, median, median * 0.99, median * 1.01, verdict)
    record["baseline"] = {"median_s": stored, "ci_low_s": stored * 0.99, "ci_high_s": stored * 1.01, "confidence": 0.99,
                          "n": 40, "spread": 0.01, "mode": "cold", "method": "graph", "recorded_at": "2026-11-20T00:00:00+00:00"}
    record["regression"] = {"slowdown": slowdown, "ci_low": slowdown - 0.01, "ci_high": slowdown + 0.01, "confidence": 0.99,
                            "tolerance": 0.05, "band": 0.015, "threshold": threshold, "calibrated_by": None,
                            "independent": True, "verdict": verdict}
    return record


def _drawn(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The figures plot_family draws from now on (captured instead of only saved)."""
    figures: list[Any] = []
    original = draw._save_small_png

    def keep(fig: Any, path: Path) -> None:
        figures.append(fig)
        original(fig, path)

    monkeypatch.setattr(draw, "_save_small_png", keep)
    return figures


def _with_gid(fig: Any, gid: str) -> list[Any]:
    return fig.findobj(lambda artist: artist.get_gid() == gid)


def _axes(fig: Any) -> list[Any]:
    """Every axes of the figure, its subfigures' included."""
    from matplotlib.axes import Axes

    return list(dict.fromkeys(fig.findobj(lambda artist: isinstance(artist, Axes))))


ROW_TESTS = [
    {"nodeid": "tests/fam/test_perf.py::test_pair", "outcome": "failed", "comparisons": [], "figures": [],
     "measurements": [_checked("fused", 10.6e-6, 10e-6, 1.06, "fail"), _checked("plain", 20e-6, 20e-6, 1.0)]},
    {"nodeid": "tests/fam/test_perf.py::test_new", "outcome": "passed", "comparisons": [], "figures": [],
     "measurements": [_measurement("fresh", 5e-6, 4.9e-6, 5.1e-6, "measured") | {"regression": None}]},
]


def test_each_checked_median_stands_beside_its_baseline_band_and_its_change(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    figures = _drawn(monkeypatch)
    assert draw.plot_family("fam", ROW_TESTS, tmp_path / "fam.png") is not None
    fig = figures[0]
    bands = _with_gid(fig, "baseline-band")
    assert len(bands) == 2, "one band per measurement with a stored baseline and a threshold; none for the new one"
    spans = sorted((b.get_x(), b.get_x() + b.get_width()) for b in bands)
    assert spans[0] == pytest.approx((10e-6 * 0.975, 10e-6 * 1.025)) and spans[1] == pytest.approx((20e-6 * 0.975, 20e-6 * 1.025))
    ticks = _with_gid(fig, "baseline")
    assert sorted(t.get_xdata()[0] for t in ticks) == pytest.approx([10e-6, 20e-6]), "the stored medians are drawn"
    thresholds = _with_gid(fig, "threshold-band")
    assert [(b.get_x(), b.get_width()) for b in thresholds] == [pytest.approx((-0.025, 0.05))] * 2
    deltas = [line for line in _with_gid(fig, "delta") if hasattr(line, "get_marker") and line.get_marker() == "s"]
    assert sorted(float(d.get_xdata()[0]) for d in deltas) == pytest.approx([0.0, 0.06])
    times_ax, delta_ax = (ax for ax in _axes(fig) if ax.get_title(loc="left") in ("Median GPU time per launch", "Change vs baseline"))
    low, high = delta_ax.get_xlim()
    assert low >= -0.3 and high <= 0.3 * 1.35, "zoomed: a 5% change is a visible share of the change axis"
    assert times_ax.get_xscale() == "linear" and times_ax.get_xlim()[0] > 3e-6, "times within 20x: linear, not from 0"
    assert delta_ax.get_shared_y_axes().joined(delta_ax, times_ax), "the change panel shares the rows and their labels"


SWEEP_TESTS = [
    {"nodeid": f"tests/mk/test_perf.py::test_ms_per_token[{variant}-{tokens}]", "outcome": "passed", "comparisons": [],
     "figures": [{"key": "roofline_fraction", "value": 0.3 + 0.001 * tokens, "unit": ""}],
     "measurements": [_checked(f"{variant}@{tokens}", base * (1 + tokens / 5000) * (1.05 if (variant, tokens) == ("fused", 200) else 1),
                               base * (1 + tokens / 5000), 1.05 if (variant, tokens) == ("fused", 200) else 1.0,
                               "fail" if (variant, tokens) == ("fused", 200) else "pass")]}
    for variant, base in (("baseline", 0.94e-3), ("fused", 0.87e-3), ("dataflow", 0.54e-3))
    for tokens in (1, 10, 50, 200, 1000)
]


def test_a_sweep_is_drawn_as_lines_over_its_number(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sweeps, rest = shape.split_sweeps(SWEEP_TESTS + ROW_TESTS)
    assert [s["name"] for s in sweeps] == ["ms_per_token"] and rest == ROW_TESTS
    assert sorted({(x, series) for x, series, _ in sweeps[0]["tests"]})[:2] == [(1.0, "baseline"), (1.0, "dataflow")]
    figures = _drawn(monkeypatch)
    draw.plot_family("mk", SWEEP_TESTS, tmp_path / "mk.png")
    fig = figures[0]
    times = next(ax for ax in _axes(fig) if ax.get_title(loc="left") == "ms_per_token: median time per launch")
    lines = [line for line in times.get_lines() if line.get_label() in ("baseline", "fused", "dataflow")]
    assert sorted(line.get_label() for line in lines) == ["baseline", "dataflow", "fused"], "one line per variant"
    assert all(list(line.get_xdata()) == [1, 10, 50, 200, 1000] for line in lines), "over the swept number"
    assert times.get_xscale() == "log", "1..1000 tokens: a log axis"
    low, high = times.get_ylim()
    assert low > 0.4e-3 and high < 1.3e-3, "zoomed on the times, not from 0"
    assert len(_with_gid(fig, "baseline-band")) == 3 and len(_with_gid(fig, "baseline")) == 3, "a baseline and band per series"
    change = next(ax for ax in _axes(fig) if ax.get_title(loc="left") == "Change vs stored baseline")
    assert [p.get_gid() for p in change.patches] == ["threshold-band"]
    assert change.get_ylim()[1] <= 0.3, "a 5% change spans a sixth of the axis or more"
    assert any("fused" in t.get_text() and "+5.0%" in t.get_text() for t in change.texts), "the failed point is named"
    fractions = next(ax for ax in _axes(fig) if ax.get_title(loc="left").startswith("ms_per_token: recorded roofline_fraction"))
    assert len(fractions.get_lines()) == 4, "three series and the 100% line, not 15 label rows"
    assert not any(ax.get_title(loc="left") == "Median GPU time per launch" for ax in _axes(fig)), "no label rows for a sweep"


def test_a_report_without_thresholds_uses_the_tolerance_rule() -> None:
    record = _checked("k", 1e-5, 1e-5, 1.0)
    del record["regression"]["threshold"], record["regression"]["band"]
    gate = shape.gate_of(record)
    assert gate is not None and gate["threshold"] == pytest.approx(0.025) and gate["baseline"] == 1e-5
    assert shape.gate_of(_measurement("k", 1, 1, 1) | {"regression": None}) is None
    hostile = _checked("k", 1e-5, 1e-5, 1.0) | {"baseline": "not an entry"}
    assert math.isnan(shape.gate_of(hostile)["baseline"])  # type: ignore[index]
