"""``gpuperf prune`` never removes the entries of a module it did not see collected: run from the
wrong folder, or with a module skipped at import, it keeps those files and says so, and it stops
when no file's module was collected; ``--remove-uncollected`` removes them when asked to."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pytest_gpuperf._cli.main import main
from pytest_gpuperf._store.baselines import BaselineFile, BaselineStore, BaselineEntry

KEY = "nvidia-h200-sm90-132sm-140gib"
H200: dict[str, Any] = {"name": "NVIDIA H200", "key": KEY}
SKIPPED_AT_IMPORT = "import pytest\npytest.importorskip('no_such_module_anywhere')\n\ndef test_k():\n    pass\n"


def entry(median: float = 1e-5) -> BaselineEntry:
    return BaselineEntry(median, median * 0.99, median * 1.01, 0.99, 40, 0.01, "cold", "graph", "2026-11-21T10:00:00+00:00")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*.json"))}


@pytest.fixture
def project(pytester: pytest.Pytester) -> BaselineStore:
    """A project with two perf modules, one skipped at import, and their baselines."""
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_one="def test_k():\n    pass\n", test_skipped=SKIPPED_AT_IMPORT)
    store = BaselineStore(pytester.path / "baselines")
    store.update(KEY, "test_one.py", H200, {"test_k::v": entry(), "test_gone::v": entry()})
    store.update(KEY, "test_skipped.py", H200, {"test_k::v": entry(), "test_k::w": entry()})
    return store


def test_a_module_skipped_at_import_keeps_its_baselines(project: BaselineStore, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "prune")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"kept {KEY}/test_skipped.json: no test of its module was collected (deleted or renamed, skipped at import, "
        "or failing to collect); pass --remove-uncollected to remove its 2 entries",
        f"removed {KEY}/test_one.json :: test_gone::v",
        "1 stale entry removed from 1 file(s) under baselines",
    ]
    skipped = BaselineFile.read(project.root / KEY / "test_skipped.json")
    assert skipped is not None and set(skipped.entries) == {"test_k::v", "test_k::w"}


def test_remove_uncollected_removes_them_and_says_when_that_is_everything(
    project: BaselineStore, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "prune", "--dry-run", "--remove-uncollected")
    assert code == 0 and "would remove nvidia-h200-sm90-132sm-140gib/test_skipped.json (no entries left)" in out
    assert out.splitlines()[-1] == "3 stale entries would be removed from 2 file(s) under baselines (dry run: nothing changed)"
    code, out, _ = run(capsys, "prune", "--remove-uncollected")
    assert code == 0 and not (project.root / KEY / "test_skipped.json").exists()

    project.update(KEY, "test_skipped.py", H200, {"test_k::v": entry()})
    (project.root.parent / "test_one.py").unlink()
    (project.root.parent / "test_two.py").write_text("def test_other():\n    pass\n")
    code, out, _ = run(capsys, "prune", "--remove-uncollected")
    assert code == 0
    assert out.splitlines()[-1] == "2 stale entries removed from 2 file(s) under baselines: every entry there"
    assert snapshot(project.root) == {}


def test_a_collection_that_matches_no_baseline_file_prunes_nothing(
    project: BaselineStore, pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run from another project's folder: before, every entry of every file was removed, exit 0."""
    elsewhere = pytester.path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "pytest.ini").write_text("[pytest]\n")
    (elsewhere / "test_unrelated.py").write_text("def test_x():\n    pass\n")
    monkeypatch.chdir(elsewhere)
    before = snapshot(project.root)
    code, out, err = run(capsys, "prune", str(project.root))
    assert code == 1 and out == ""
    assert err == (
        "gpuperf: error: no test of the modules of any of the 2 baseline file(s) was collected (run gpuperf prune "
        "from the project root, where the test modules import, or give the node ids with --node-ids); nothing was "
        "pruned. To remove them all, pass --remove-uncollected\n"
    )
    assert snapshot(project.root) == before


def test_node_ids_of_another_suite_prune_nothing(project: BaselineStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = tmp_path / "ids.txt"
    ids.write_text("tests/elsewhere/test_perf.py::test_x\n")
    before = snapshot(project.root)
    code, out, err = run(capsys, "prune", str(project.root), "--node-ids", str(ids))
    assert code == 1 and out == "" and "nothing was pruned" in err and err.count("\n") == 1
    assert snapshot(project.root) == before


def test_remove_uncollected_needs_the_whole_suite(project: BaselineStore, capsys: pytest.CaptureFixture[str]) -> None:
    before = snapshot(project.root)
    with pytest.raises(SystemExit) as info:
        main(["prune", "--keep-tests-from", "test_one.py", "--remove-uncollected"])
    assert info.value.code == 2
    assert "--remove-uncollected needs the whole suite collected" in capsys.readouterr().err
    assert snapshot(project.root) == before


def test_the_flag_is_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["prune", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--remove-uncollected" in text
    assert "A file whose module had no test collected" in text and "is kept, with a line naming it" in text
