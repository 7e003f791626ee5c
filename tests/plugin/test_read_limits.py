"""What every reader of baseline, report and margins files refuses: a file that is not a regular
file (a FIFO would hang it), and content past the caps on size, items, nesting and string length
(a 255 KB gzip once took gigabytes). Each refusal is one line naming the file; nothing hangs and
memory stays bounded."""
from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

from pytest_gpuperf._cli.main import main
from pytest_gpuperf.errors import GpuPerfError
from pytest_gpuperf._store import jsonio, reports
from pytest_gpuperf._store.baselines import BaselineStore, BaselineEntry
from pytest_gpuperf._store.locks import HOLDER_SUFFIX, describe_holder
from pytest_gpuperf._store.schema_versions import REPORT_SCHEMA

ROOT = Path(__file__).resolve().parents[2]
FAKE_KEY = "fake-gpu-sm90-132sm-80gib"
H200: dict[str, Any] = {"name": "NVIDIA H200", "key": "nvidia-h200-sm90-132sm-140gib"}
FIFO_LINE = "is a named pipe (FIFO), not a regular file, so it was not read"
RUN_TIMEOUT_S = 120  # generous: only a hang gets near it
# A capped read peaks at 130-300 MB (it varies with the allocator and the machine); uncapped, the
# gzip bomb below took 6.5 GB and the committed blob 0.8 GB.
MEMORY_BOUND_KIB = 600 * 1024


def entry(median: float = 1e-5) -> BaselineEntry:
    return BaselineEntry(median, median * 0.99, median * 1.01, 0.99, 100, 0.01, "cold", "graph", "2026-11-21T00:00:00+00:00")


def minimal_report(**extra: Any) -> dict[str, Any]:
    measurement = {"name": "k", "median_s": 1e-5, "ci_low_s": 0.9e-5, "ci_high_s": 1.1e-5, "confidence": 0.99}
    test = {"nodeid": "tests/fam/test_perf.py::test_a[x]", "outcome": "passed",
            "measurements": [{"measurement": measurement, "verdict": "measured", "regression": None}]}
    return {"schema": REPORT_SCHEMA, "created": "2026-11-22T00:00:00+00:00", "devices": {}, "tests": [test],
            "skipped": [], "baseline_changes": [], "summary": {}, **extra}


def gpuperf(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``gpuperf ARGS`` in a subprocess, so a reader that hangs fails the test instead of hanging it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "pytest_gpuperf", *args], capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S, env=env, cwd=cwd)


def error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in (done.stdout + done.stderr).splitlines() if "ERROR" in line or "error:" in line]
    assert lines, done.stdout + done.stderr
    return "\n".join(lines)


# -- files that are not regular files --------------------------------------------------------
@pytest.fixture
def fifo_store(tmp_path: Path) -> tuple[BaselineStore, Path]:
    """A baselines folder with one real file and one FIFO where a baseline file would be."""
    store = BaselineStore(tmp_path / "baselines")
    store.update(H200["key"], "tests/fam/test_perf.py", H200, {"test_a::k": entry()})
    fifo = store.root / H200["key"] / "tests.fam.test_other.json"
    os.mkfifo(fifo)
    return store, fifo


@pytest.mark.parametrize("command", ["list", "check", "migrate"])
def test_a_fifo_among_the_baselines_is_refused_by_every_command(fifo_store: tuple[BaselineStore, Path],
                                                                command: str) -> None:
    store, fifo = fifo_store
    done = gpuperf(command, str(store.root))
    assert done.returncode == 1
    assert f"{fifo} {FIFO_LINE}" in error_line(done)


@pytest.mark.parametrize("command", [("report",), ("export", "--format", "github-action-benchmark"), ("margins",),
                                     ("levels",), ("migrate",), ("margins", "--file")],
                         ids=["report", "export", "margins", "levels", "migrate", "margins-file"])
def test_a_fifo_named_as_a_report_or_margins_file_is_refused(tmp_path: Path, command: tuple[str, ...]) -> None:
    fifo = tmp_path / "gpu-perf-report.json"
    os.mkfifo(fifo)
    done = gpuperf(*command, str(fifo), cwd=tmp_path)
    assert done.returncode == 1
    assert f"{fifo} {FIFO_LINE}" in error_line(done)


def test_sockets_and_devices_are_refused_before_they_are_opened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)  # a short relative name: socket paths are limited to about 100 bytes
    server = socket.socket(socket.AF_UNIX)
    server.bind("sock.json")
    device = tmp_path / "device.json"
    device.symlink_to("/dev/null")  # a link is followed: what it names must be a regular file
    opened: list[str] = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda path, *a, **k: opened.append(str(path)) or real_open(path, *a, **k))
    try:
        for name, what in (("sock.json", "a socket"), (str(device), "a character device")):
            assert main(["report", name]) == 1
            assert capsys.readouterr().err.strip() == (
                f"gpuperf: error: report file {name} is {what}, not a regular file, so it was not read "
                "(reading it could wait forever); remove it, or replace it with the file itself"
            )
    finally:
        server.close()
    assert opened == [], "a file that is not regular is refused from its stat alone"


def test_a_fifo_baseline_fails_the_run_and_the_update_without_hanging(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None]
) -> None:
    fake_gpu(times={"k": 10e-6})
    pytester.makepyfile(test_perf="from pytest_gpuperf import Variant\n\ndef test_k(gpu_perf):\n"
                                  "    gpu_perf.measure(Variant('k', lambda: None))\n")
    folder = pytester.path / "baselines" / FAKE_KEY
    folder.mkdir(parents=True)
    fifo = folder / "test_perf.json"
    os.mkfifo(fifo)
    for flags in (("--gpu-perf",), ("--gpu-perf", "--gpu-perf-update-baselines")):
        result = pytester.runpytest_subprocess(*flags, timeout=RUN_TIMEOUT_S)
        output = result.stdout.str() + result.stderr.str()
        assert f"baseline file {fifo} {FIFO_LINE}" in " ".join(output.split()), output
        assert "INTERNALERROR" not in output and "Traceback" not in output
    assert fifo.is_fifo()


def test_a_fifo_holder_record_is_not_read(tmp_path: Path) -> None:
    lock = tmp_path / "x.json.lock"
    holder = Path(str(lock) + HOLDER_SUFFIX)
    os.mkfifo(holder)
    answer: list[str] = []
    reader = threading.Thread(target=lambda: answer.append(describe_holder(lock)), daemon=True)
    reader.start()
    reader.join(timeout=30)
    if reader.is_alive():  # let the stuck reader go before failing
        os.close(os.open(holder, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("reading a FIFO holder record hung")
    assert answer == ["its holder left no record (it may be an older pytest-gpuperf)"]


# -- the caps on what is parsed ----------------------------------------------------------------
# The peak of this process's own memory: /proc's VmHWM belongs to the address space exec made,
# where getrusage's ru_maxrss also keeps the peak of the process that started it (a pytest worker
# that had grown past the bound made a capped read look 615 MB large).
PEAK_KIB_SOURCE = (
    "def peak_kib():\n"
    "    try:\n"
    "        with open('/proc/self/status') as fh:\n"
    "            return next(int(line.split()[1]) for line in fh if line.startswith('VmHWM:'))\n"
    "    except (OSError, StopIteration):\n"
    "        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
)


def peak_memory_of(*args: str, cwd: Path | None = None) -> tuple[int, str, int]:
    """Exit status, error output and peak memory (KiB) of ``gpuperf ARGS`` in a fresh process."""
    code = (
        "import resource, sys\nfrom pytest_gpuperf._cli.main import main\n" + PEAK_KIB_SOURCE +
        "status = main(sys.argv[1:])\n"
        "print(peak_kib(), file=sys.stderr)\nsys.exit(status)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=600, env=env,
                          cwd=cwd)
    *lines, peak = done.stderr.strip().splitlines()
    return done.returncode, "\n".join(lines), int(peak)


def write_gzip(path: Path, head: bytes, item: bytes, count: int, tail: bytes) -> Path:
    with gzip.open(path, "wb", compresslevel=6) as fh:
        fh.write(head)
        block = item * 65536
        for _ in range(count // 65536):
            fh.write(block)
        fh.write(item * (count % 65536) + tail)
    return path


def test_the_255_kb_bomb_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    """256 MiB of ``[],`` gzipped to about 255 KB: uncapped it took 6.5 GB and minutes."""
    bomb = write_gzip(tmp_path / "bomb.json.gz", b'{"schema": "pytest-gpuperf/report/1", "tests": [], "notes": [',
                      b"[],", (256 * 1024 * 1024 - 64) // 3, b"[]]}")
    assert bomb.stat().st_size < 300 * 1024
    code, err, peak_kib = peak_memory_of("report", str(bomb))
    assert code == 1
    assert err == (f"gpuperf: error: report file {bomb} is larger than 64 MiB decompressed; it is not a file "
                   "pytest-gpuperf wrote (raise pytest_gpuperf._store.jsonio.MAX_JSON_BYTES to read it anyway)")
    assert peak_kib < MEMORY_BOUND_KIB, f"peak memory {peak_kib} KiB"


def test_millions_of_samples_under_the_byte_cap_are_refused_before_parsing(tmp_path: Path) -> None:
    measurement = b'{"measurement": {"name": "k", "median_s": 1e-5, "ci_low_s": 1e-5, "ci_high_s": 1e-5}, "verdict": "pass", "samples": ['
    report = write_gzip(tmp_path / "samples.json.gz",
                        b'{"schema": "pytest-gpuperf/report/1", "tests": [{"nodeid": "t", "measurements": [' + measurement,
                        b"1e-05,", 3_000_000, b"1e-05]}]}]}")
    code, err, peak_kib = peak_memory_of("report", str(report))
    assert code == 1
    assert err == (f"gpuperf: error: report file {report} holds more than 2,000,000 array elements and object fields, "
                   "so it was not parsed (a report would need millions of samples to be that large); "
                   "raise pytest_gpuperf._store.jsonio.MAX_JSON_ITEMS to read it anyway")
    assert peak_kib < MEMORY_BOUND_KIB, f"peak memory {peak_kib} KiB"


def test_the_caps_are_those_the_docs_state() -> None:
    assert (jsonio.MAX_JSON_BYTES, jsonio.MAX_JSON_ITEMS, jsonio.MAX_JSON_DEPTH, jsonio.MAX_JSON_STRING_CHARS) == (
        64 * 1024 * 1024, 2_000_000, 64, 1024 * 1024)
    assert reports.MAX_REPORT_RESULTS == 100_000
    docs = (ROOT / "docs" / "schemas.md").read_text()
    for stated in ("64 MiB", "2,000,000", "64 levels", "1 MiB", "100,000"):
        assert stated in docs


@pytest.mark.parametrize(
    ("notes", "message"),
    [
        ("[" * 64 + "]" * 64, "nests arrays or objects too deeply to read (deeper than 64); it is not a file pytest-gpuperf wrote"),
        (json.dumps(["x" * (1024 * 1024 + 1)]),
         "holds a string of 1,048,577 characters, longer than the 1,048,576 read; it is not a file pytest-gpuperf wrote"),
        (json.dumps({"y" * (1024 * 1024 + 1): 1}),
         "holds a string of 1,048,577 characters, longer than the 1,048,576 read; it is not a file pytest-gpuperf wrote"),
    ],
    ids=["nesting", "string", "key"],
)
def test_deep_nesting_and_long_strings_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], notes: str,
                                                   message: str) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(minimal_report())[:-1] + f', "x": {notes}}}')
    assert main(["report", str(path)]) == 1
    assert capsys.readouterr().err.strip() == f"gpuperf: error: report file {path} {message}"
    path.write_text(json.dumps(minimal_report())[:-1] + ', "x": ' + "[" * 63 + "]" * 63 + "}")
    assert main(["report", str(path)]) == 0, "64 levels (the report's object and 63 arrays) are read"


def test_a_report_of_too_many_results_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reports, "MAX_REPORT_RESULTS", 5)
    data = minimal_report()
    data["tests"] = data["tests"] * 3  # 3 tests of 1 measurement each: 6 results
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    assert main(["report", str(path)]) == 1
    assert capsys.readouterr().err.strip() == (
        f"gpuperf: error: report file {path}: more than 5 tests and results by tests[2], more than pytest-gpuperf "
        "reads; split the run into several reports (or raise pytest_gpuperf._store.reports.MAX_REPORT_RESULTS)")


# -- git output ---------------------------------------------------------------------------------
def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True, capture_output=True)


def test_diff_git_refuses_a_blob_past_the_cap_before_reading_it(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    store = BaselineStore(tmp_path / "baselines")
    store.update(H200["key"], "tests/fam/test_perf.py", H200, {"test_a::k": entry()})
    big = store.root / H200["key"] / "tests.fam.test_big.json"
    big.write_text(json.dumps({"schema": "pytest-gpuperf/baselines/1", "pad": "x" * (2 * 1024 * 1024)}))
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "baselines")
    git(tmp_path, "commit", "-q", "-m", "baselines")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(jsonio, "MAX_JSON_BYTES", 1024 * 1024)
    read: list[int] = []
    real = jsonio.read_capped
    monkeypatch.setattr(jsonio, "read_capped", lambda stream, limit: read.append(limit) or real(stream, limit))
    assert main(["diff", "--git", "HEAD"]) == 1
    size = big.stat().st_size
    assert capsys.readouterr().err.strip() == (
        f"gpuperf: error: baseline file HEAD:baselines/{H200['key']}/tests.fam.test_big.json is {size:,} bytes, "
        "larger than the 1 MiB pytest-gpuperf reads; it is not a file pytest-gpuperf wrote")
    assert all(limit <= 1024 * 1024 for limit in read), "every git output is read with a cap"


def test_git_output_past_its_cap_stops_the_command(tmp_path: Path) -> None:
    from pytest_gpuperf._store.git_output import run_git

    git(tmp_path, "init", "-q")
    (tmp_path / "a.txt").write_text("a" * 10_000)
    git(tmp_path, "add", "a.txt")
    git(tmp_path, "commit", "-q", "-m", "a")
    assert run_git(["cat-file", "blob", "HEAD:a.txt"], tmp_path, limit=10_000).stdout == b"a" * 10_000
    with pytest.raises(GpuPerfError, match=r"^git cat-file blob HEAD:a\.txt printed more than 9,999 bytes, more than "
                                           r"pytest-gpuperf reads; it was stopped$"):
        run_git(["cat-file", "blob", "HEAD:a.txt"], tmp_path, limit=9_999)


def test_diff_git_parses_a_committed_blob_within_the_caps(tmp_path: Path) -> None:
    """Millions of tiny items under the byte cap, committed as a baseline file: refused before parsing."""
    store = BaselineStore(tmp_path / "baselines")
    store.update(H200["key"], "tests/fam/test_perf.py", H200, {"test_a::k": entry()})
    name = f"baselines/{H200['key']}/tests.fam.test_many.json"
    (tmp_path / name).write_bytes(b'{"schema": "pytest-gpuperf/baselines/1", "x": [' + b"[]," * 10_000_000 + b"[]]}")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "baselines")
    git(tmp_path, "commit", "-q", "-m", "baselines")
    code, err, peak_kib = peak_memory_of("diff", "--git", "HEAD", cwd=tmp_path)
    assert code == 1
    assert err == (f"gpuperf: error: baseline file HEAD:{name} holds more than 2,000,000 array elements and object "
                   "fields, so it was not parsed (a report would need millions of samples to be that large); "
                   "raise pytest_gpuperf._store.jsonio.MAX_JSON_ITEMS to read it anyway")
    assert peak_kib < MEMORY_BOUND_KIB, f"peak memory {peak_kib} KiB"
