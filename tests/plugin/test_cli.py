"""The ``gpuperf`` command on inputs written by the plugin's own writers (CPU only)."""
from __future__ import annotations

import gzip
import json
import zlib
import shutil
import subprocess
from pathlib import Path
from typing import Any, Callable

import pytest

from pytest_gpuperf._store.baselines import BaselineFile, BaselineStore, BaselineEntry
from pytest_gpuperf._cli.main import main
from pytest_gpuperf.errors import BaselineFileError

H200: dict[str, Any] = {"name": "NVIDIA H200", "key": "nvidia-h200-sm90-132sm-140gib", "compute_capability": "9.0", "sm_count": 132,
        "driver_version": "580.1", "cuda_runtime_version": "13.0", "cupy_version": "14.0"}
A100: dict[str, Any] = {"name": "NVIDIA A100", "key": "nvidia-a100-sm80-108sm-80gib", "compute_capability": "8.0", "sm_count": 108,
        "driver_version": "580.1", "cuda_runtime_version": "13.0", "cupy_version": "14.0"}
MODULE = "tests/fam/test_perf.py"
FILE = "nvidia-h200-sm90-132sm-140gib/tests.fam.test_perf.json"


def entry(median: float, halfwidth: float = 0.002, when: str = "2026-11-21T10:00:00+00:00") -> BaselineEntry:
    return BaselineEntry(median, median * (1 - halfwidth), median * (1 + halfwidth), 0.99, 100, 0.01, "cold", "graph", when)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def store(tmp_path: Path) -> BaselineStore:
    s = BaselineStore(tmp_path / "baselines")
    s.update(H200["key"], MODULE, H200, {"test_a[x]::fast": entry(10e-6), "test_a[x]::slow": entry(20e-6),
                                         "test_b::k": entry(5e-6, when="2026-11-22T09:00:00+00:00")})
    s.update(H200["key"], "tests/other/test_perf.py", H200, {"test_c::k": entry(1e-3)})
    s.update(A100["key"], MODULE, A100, {"test_a[x]::fast": entry(15e-6)})
    return s


# -- list ------------------------------------------------------------------------------
def test_list_shows_devices_files_counts_and_dates(store: BaselineStore, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "list", str(store.root))
    assert code == 0
    assert out.splitlines()[0] == f"{store.root}: 2 device(s), 3 file(s), 5 entries"
    assert "nvidia-h200-sm90-132sm-140gib: NVIDIA H200, compute capability 9.0, 132 SMs; driver 580.1, CUDA 13.0" in out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.startswith("  tests.")}
    assert rows["tests.other.test_perf.json"] == ["1", "2026-11-21"]
    h200_fam = [line for line in out.splitlines() if "tests.fam.test_perf.json" in line][1]  # A100 is listed first
    assert h200_fam.split()[1:] == ["3", "2026-11-21", "..", "2026-11-22"]


def test_list_names_the_corrupt_file_and_field_and_fails(store: BaselineStore, capsys: pytest.CaptureFixture[str]) -> None:
    path = store.root / FILE
    data = json.loads(path.read_text())
    data["entries"]["test_b::k"]["n"] = 0
    path.write_text(json.dumps(data))
    code, out, _ = run(capsys, "list", str(store.root))
    assert code == 1
    assert f"ERROR baseline file {path}: field 'entries.test_b::k.n' must be a positive integer" in out
    assert "tests.other.test_perf.json" in out, "the valid files are still listed"


def test_list_of_a_missing_folder_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "list", str(tmp_path / "nope"))
    assert code == 1 and out == ""
    assert f"gpuperf: error: baseline folder {tmp_path / 'nope'} does not exist" in err


# -- diff ----------------------------------------------------------------------------
def _table(out: str) -> dict[str, list[str]]:
    """key -> [old, new, delta, change] from the markdown table."""
    rows = {}
    for line in out.splitlines():
        if line.startswith("| ") and not line.startswith("| baseline file") and not line.startswith("| ---"):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            rows[f"{cells[0]}#{cells[1]}"] = cells[2:]
    return rows


def test_diff_of_two_folders(store: BaselineStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    new = BaselineStore(tmp_path / "new")
    shutil.copytree(store.root, new.root)
    new.update(H200["key"], MODULE, {**H200, "driver_version": "590.2"},
               {"test_a[x]::fast": entry(11e-6), "test_a[x]::slow": entry(20.04e-6), "test_d::k": entry(2e-6)})
    new.update(A100["key"], MODULE, A100, {"test_a[x]::fast": entry(12e-6)})
    new.remove_entries(new.root / FILE, ["test_b::k"])
    code, out, _ = run(capsys, "diff", str(store.root), str(new.root))
    assert code == 0
    assert out.splitlines()[0] == "6 baseline entries compared: 1 slower, 1 faster, 1 within tolerance, 1 added, 1 removed, 1 identical."
    assert "- device software changed: `nvidia-h200-sm90-132sm-140gib`: driver_version 580.1 -> 590.2" in out
    rows = _table(out)
    assert rows[f"{FILE}#test_a[x]::fast"] == ["10 us", "11 us", "+10.0%", "slower"]
    assert rows["nvidia-a100-sm80-108sm-80gib/tests.fam.test_perf.json#test_a[x]::fast"] == ["15 us", "12 us", "-20.0%", "faster"]
    assert rows[f"{FILE}#test_a[x]::slow"][2:] == ["+0.2%", "within tolerance"]
    assert rows[f"{FILE}#test_d::k"] == ["-", "2 us", "-", "added"]
    assert rows[f"{FILE}#test_b::k"] == ["5 us", "-", "-", "removed"]
    assert "nvidia-h200-sm90-132sm-140gib/tests.other.test_perf.json#test_c::k" not in rows
    assert "1 identical entries not listed (--all lists them)." in out
    code, out, _ = run(capsys, "diff", "--all", str(store.root), str(new.root))
    assert _table(out)["nvidia-h200-sm90-132sm-140gib/tests.other.test_perf.json#test_c::k"][-1] == "identical"


def test_diff_of_equal_folders_says_so(store: BaselineStore, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "diff", str(store.root), str(store.root))
    assert code == 0 and "No baseline entry differs." in out and "|" not in out


def test_diff_escapes_pipes_in_test_ids(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    BaselineStore(tmp_path / "new").update(H200["key"], MODULE, H200, {"test_a[a|b]::k": entry(1e-6)})
    (tmp_path / "old").mkdir()
    code, out, _ = run(capsys, "diff", str(tmp_path / "old"), str(tmp_path / "new"))
    assert code == 0 and "| test_a[a\\|b]::k |" in out


def test_diff_names_the_corrupt_file_and_field(store: BaselineStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = store.root / FILE
    data = json.loads(path.read_text())
    data["entries"]["test_b::k"]["median_s"] = "fast"
    path.write_text(json.dumps(data))
    code, _, err = run(capsys, "diff", str(store.root), str(store.root))
    assert code == 1 and f"{path}: field 'entries.test_b::k.median_s' must be a time per launch from 1e-07 s to 1000 s, got 'fast'" in err


def test_diff_takes_two_folders_or_git(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["diff", "one"])
    assert info.value.code == 2
    assert "diff takes two baseline folders (OLD NEW), two device folders, two files, or --git REV [DIR]" in capsys.readouterr().err


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True, capture_output=True)


def test_diff_against_a_git_revision(store: BaselineStore, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "baselines")
    _git(tmp_path, "commit", "-q", "-m", "baselines")
    store.update(H200["key"], MODULE, H200, {"test_a[x]::fast": entry(9e-6)})
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "diff", "--git", "HEAD")
    assert code == 0
    assert out.splitlines()[0] == "5 baseline entries compared: 1 faster, 4 identical."
    assert _table(out) == {f"{FILE}#test_a[x]::fast": ["10 us", "9 us", "-10.0%", "faster"]}
    monkeypatch.chdir(store.root / H200["key"])  # from a subfolder, naming the folder
    code, out, _ = run(capsys, "diff", "--git", "HEAD", str(store.root))
    assert code == 0 and list(_table(out)) == [f"{FILE}#test_a[x]::fast"]
    code, _, err = run(capsys, "diff", "--git", "no-such-rev", str(store.root))
    assert code == 1 and "'no-such-rev' is not a commit of the git repository" in err


# -- prune ---------------------------------------------------------------------------
def test_prune_from_a_node_id_file_dry_run_then_for_real(store: BaselineStore, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    ids = tmp_path / "ids.txt"
    ids.write_text("tests/fam/test_perf.py::test_a[x]\n# a comment\n\n3 tests collected\n")
    before = {p: p.read_bytes() for p in store.files()}
    other = "nvidia-h200-sm90-132sm-140gib/tests.other.test_perf.json"
    code, out, _ = run(capsys, "prune", str(store.root), "--dry-run", "--node-ids", str(ids))
    assert code == 0
    assert out.splitlines() == [
        f"kept {other}: no test of its module was collected (deleted or renamed, skipped at import, or failing to "
        "collect); pass --remove-uncollected to remove its 1 entry",
        f"would remove {FILE} :: test_b::k",
        f"1 stale entry would be removed from 1 file(s) under {store.root} (dry run: nothing changed)",
    ]
    assert {p: p.read_bytes() for p in store.files()} == before, "a dry run changes nothing"

    code, out, _ = run(capsys, "prune", str(store.root), "--node-ids", str(ids))
    assert code == 0 and f"removed {FILE} :: test_b::k" in out and f"kept {other}" in out
    kept = BaselineFile.read(store.root / FILE)
    assert kept is not None and set(kept.entries) == {"test_a[x]::fast", "test_a[x]::slow"}
    assert kept.entries["test_a[x]::fast"] == entry(10e-6), "kept entries are untouched"
    assert (store.root / other).exists(), "a file whose module was not collected is kept"

    code, out, _ = run(capsys, "prune", str(store.root), "--node-ids", str(ids), "--remove-uncollected")
    assert code == 0
    assert out.splitlines() == [
        f"removed {other} :: test_c::k",
        f"removed {other} (no entries left)",
        f"1 stale entry removed from 1 file(s) under {store.root}",
    ]
    assert not (store.root / other).exists()
    assert not list(store.root.rglob("*.tmp"))


def test_prune_collects_node_ids_with_pytest(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(
        test_one="import pytest\n@pytest.mark.parametrize('n', [1, 2])\ndef test_k(n):\n    pass\n",
        test_two="def test_k():\n    pass\n",
    )
    store = BaselineStore(pytester.path / "baselines")
    store.update(H200["key"], "test_one.py", H200, {"test_k[1]::v": entry(1e-6), "test_k[3]::v": entry(1e-6)})
    store.update(H200["key"], "test_two.py", H200, {"test_k::v": entry(1e-6), "test_gone::v": entry(1e-6)})
    store.update(H200["key"], "test_deleted.py", H200, {"test_k::v": entry(1e-6)})

    code, out, _ = run(capsys, "prune", "--keep-tests-from", "test_one.py")
    assert code == 0, out
    assert out.splitlines() == [
        "removed nvidia-h200-sm90-132sm-140gib/test_one.json :: test_k[3]::v",
        "1 stale entry removed from 1 file(s) under baselines",
    ], "only the collected module's file is pruned"

    code, out, _ = run(capsys, "prune")
    assert code == 0, out
    assert "removed nvidia-h200-sm90-132sm-140gib/test_two.json :: test_gone::v" in out
    assert "kept nvidia-h200-sm90-132sm-140gib/test_deleted.json: no test of its module was collected" in out
    assert out.splitlines()[-1] == "1 stale entry removed from 1 file(s) under baselines"
    two = BaselineFile.read(store.root / H200["key"] / "test_two.json")
    assert two is not None and set(two.entries) == {"test_k::v"}

    code, out, _ = run(capsys, "prune", "--remove-uncollected")
    assert code == 0, out
    assert out.splitlines() == [
        "removed nvidia-h200-sm90-132sm-140gib/test_deleted.json :: test_k::v",
        "removed nvidia-h200-sm90-132sm-140gib/test_deleted.json (no entries left)",
        "1 stale entry removed from 1 file(s) under baselines",
    ]


def test_prune_refuses_when_collection_fails(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_broken="def test_k(:\n")
    store = BaselineStore(pytester.path / "baselines")
    store.update(H200["key"], "test_other.py", H200, {"test_k::v": entry(1e-6)})
    code, out, err = run(capsys, "prune")
    assert code == 1 and out == ""
    assert "collecting the tests failed" in err and "nothing was pruned" in err
    assert (store.root / H200["key"] / "test_other.json").exists()


# -- report ----------------------------------------------------------------------------
PERF_TESTS = """
from pytest_gpuperf import Variant

def test_claim(gpu_perf):
    gpu_perf.assert_speedup(Variant("fast", lambda: None, bytes=1000), Variant("slow", lambda: None), at_least=1.1)
    gpu_perf.record("bandwidth_fraction", 0.83)

def test_single(gpu_perf):
    gpu_perf.measure(Variant("k", lambda: None))
"""


def test_report_renders_a_saved_json_report(pytester: pytest.Pytester, fake_gpu: Callable[..., None],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    fake_gpu(times={"fast": 10e-6, "slow": 12e-6, "k": 30e-6})
    pytester.makepyfile(test_perf=PERF_TESTS)
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-json=report.json", "--gpu-perf-update-baselines")
    result.assert_outcomes(passed=2)
    capsys.readouterr()
    report = pytester.path / "report.json"

    code, out, _ = run(capsys, "report", str(report), "--markdown")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "## gpu-perf report"
    assert "on Fake GPU (`fake-gpu-sm90-132sm-80gib`)" in lines[1]
    assert "| test | variant | median | CI | speedup (required) | vs baseline | verdict |" in lines
    fast = next(line for line in lines if line.startswith("| test_claim | fast |"))
    assert "1.2" in fast and "(1.100)" in fast and "pass/recorded" in fast
    assert any(line.startswith("| test_single | k | 29.") or line.startswith("| test_single | k | 30") for line in lines), lines
    assert "| test_claim | bandwidth_fraction | 0.83 |" in lines
    assert "### Baselines updated (3 entries)" in lines
    assert code == main(["report", str(report)]), "markdown is the default"
    assert capsys.readouterr().out == out

    code, text, _ = run(capsys, "report", str(report), "--text")
    assert code == 0 and "|" not in text
    assert any(line.split()[:2] == ["test_claim", "fast"] for line in text.splitlines())

    archived = pytester.path / "report.json.gz"
    archived.write_bytes(gzip.compress(report.read_bytes()))
    assert run(capsys, "report", str(archived), "--markdown") == (0, out, ""), "a gzipped report reads the same"


def test_report_explains_its_verdict_column(capsys: pytest.CaptureFixture[str]) -> None:
    """Under the table, after a blank line (in markdown a line right under a table is one of its
    rows), a legend: a speedup row's verdict is the claim's, then the baseline check's, and each
    word a verdict can be is explained."""
    from pytest_gpuperf._gates.verdict import Verdict
    from pytest_gpuperf._report.summary import VERDICT_LEGEND

    assert "the claim's verdict / the baseline check's" in VERDICT_LEGEND
    for verdict in Verdict:
        assert f"; {verdict.value}: " in VERDICT_LEGEND or VERDICT_LEGEND.split(". ", 1)[1].startswith(f"{verdict.value}: ")
    report = Path(__file__).parents[2] / "evidence" / "2026-11-27-h100-6a6c-gemm-aa.json.gz"
    for fmt, row in (("--markdown", "| "), ("--text", "  test_")):
        code, out, _ = run(capsys, "report", str(report), fmt)
        lines = out.splitlines()
        assert code == 0 and any("inconclusive/pass" in line for line in lines)
        legend = next(i for i, line in enumerate(lines) if line.strip().startswith("verdict: on a row with a speedup"))
        assert lines[legend - 1] == "" and lines[legend - 2].startswith(row) and "pass" in lines[legend - 2]
        assert "inconclusive: the run could not decide" in lines[legend]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(schema="pytest-gpuperf/report/0"), "field 'schema' must be 'pytest-gpuperf/report/1'"),
        (lambda d: d.update(tests={}), "field 'tests' must be a list"),
        (lambda d: d["tests"][0].pop("nodeid"), "field 'tests[0].nodeid' must be a string"),
        (lambda d: d["tests"][0]["measurements"][0]["measurement"].update(median_s="1us"),
         "field 'tests[0].measurements[0].measurement.median_s' must be a finite number"),
        (lambda d: d["tests"][0]["comparisons"][0].update(speedup=None), "field 'tests[0].comparisons[0].speedup' must be a finite number"),
        (lambda d: d["tests"][0]["figures"][0].update(value=True), "field 'tests[0].figures[0].value' must be a finite number"),
    ],
)
def test_report_errors_name_the_file_and_field(pytester: pytest.Pytester, fake_gpu: Callable[..., None],
                                               capsys: pytest.CaptureFixture[str], mutate: Callable[[dict[str, Any]], Any],
                                               message: str) -> None:
    fake_gpu(times={"fast": 10e-6, "slow": 12e-6})
    pytester.makepyfile(test_perf=PERF_TESTS)
    pytester.runpytest("--gpu-perf", "--gpu-perf-json=report.json", "-k", "claim").assert_outcomes(passed=1)
    capsys.readouterr()
    path = pytester.path / "report.json"
    data = json.loads(path.read_text())
    mutate(data)
    path.write_text(json.dumps(data))
    code, out, err = run(capsys, "report", str(path))
    assert code == 1 and out == ""
    assert f"gpuperf: error: report file {path}: {message}" in err


def test_report_of_a_missing_or_invalid_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "report", str(tmp_path / "none.json"))
    assert code == 1 and "does not exist (write one with pytest --gpu-perf --gpu-perf-json" in err
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": \n')
    code, _, err = run(capsys, "report", str(bad))
    assert code == 1 and f"report file {bad} is not valid JSON (line 2" in err
    truncated = tmp_path / "cut.json.gz"
    truncated.write_bytes(gzip.compress(b'{"schema": "pytest-gpuperf/report/1"}')[:-6])
    code, _, err = run(capsys, "report", str(truncated))
    assert code == 1 and f"report file {truncated} cannot be read" in err
    damaged = tmp_path / "damaged.json.gz"
    packed = bytearray(gzip.compress(b'{"schema": "pytest-gpuperf/report/1", "tests": []}', mtime=0))
    packed[10] ^= 0xFF  # the deflate stream's first block header: zlib.error, not an OSError
    with pytest.raises(zlib.error):
        gzip.decompress(bytes(packed))
    damaged.write_bytes(bytes(packed))
    code, _, err = run(capsys, "report", str(damaged))
    assert code == 1 and f"report file {damaged} cannot be read" in err


# -- the store helpers the command uses ----------------------------------------------------
def test_parse_validates_text_like_read(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    store.update(H200["key"], MODULE, H200, {"t::v": entry(1e-6)})
    path = store.path_for(H200["key"], MODULE)
    assert BaselineFile.parse(Path("HEAD:x.json"), path.read_text()) == BaselineFile(
        Path("HEAD:x.json"), H200, {"t::v": entry(1e-6)}
    )
    with pytest.raises(BaselineFileError, match=r"baseline file HEAD:x.json: field 'entries'"):
        BaselineFile.parse(Path("HEAD:x.json"), json.dumps({"schema": "pytest-gpuperf/baselines/1", "device": {}, "entries": 3}))


def test_remove_entries_rereads_under_the_lock(tmp_path: Path) -> None:
    store = BaselineStore(tmp_path)
    store.update(H200["key"], MODULE, H200, {"t::a": entry(1e-6), "t::b": entry(2e-6)})
    path = store.path_for(H200["key"], MODULE)
    assert store.lookup(H200["key"], MODULE, "t::b") is not None  # cached
    BaselineStore(tmp_path).update(H200["key"], MODULE, H200, {"t::c": entry(3e-6)})  # another process
    assert store.remove_entries(path, ["t::b", "t::missing"]) == ["t::b"]
    f = BaselineFile.read(path)
    assert f is not None and set(f.entries) == {"t::a", "t::c"}, "the other process's entry survives"
    assert store.lookup(H200["key"], MODULE, "t::b") is None, "the cache is dropped"
    assert store.remove_entries(path, ["t::a", "t::c"]) == ["t::a", "t::c"]
    assert not path.exists(), "a file with no entries left is deleted"
    assert store.remove_entries(path, ["t::a"]) == []


def test_files_of_other_kinds_beside_the_baselines_are_left_alone(store: BaselineStore, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The compile-time tier keeps its budgets in baselines/static/*.json, under its own schema."""
    static = store.root / "static" / "fam.json"
    static.parent.mkdir()
    static.write_text(json.dumps({"schema": "pytest-gpuperf/static-budgets/1", "modules": {}}))
    code, out, _ = run(capsys, "list", str(store.root))
    assert code == 0 and "static/: 1 file(s) of another kind, not listed" in out
    assert run(capsys, "diff", str(store.root), str(store.root))[0] == 0
    ids = tmp_path / "ids.txt"
    ids.write_text("tests/fam/test_perf.py::test_a[x]\n")
    code, out, _ = run(capsys, "prune", str(store.root), "--node-ids", str(ids))
    assert code == 0 and "static" not in out and static.exists()
    old = json.loads((store.root / FILE).read_text())
    old["schema"] = "pytest-gpuperf/baselines/0"  # an older timing baseline is still an error
    (store.root / FILE).write_text(json.dumps(old))
    code, out, _ = run(capsys, "list", str(store.root))
    assert code == 1 and "field 'schema' must be 'pytest-gpuperf/baselines/1'" in out
