"""File locks and the files they guard: symlinks refused, waits bounded, holders named."""
from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from filelock import FileLock

from pytest_gpuperf._store import baselines
from pytest_gpuperf._store.baselines import BaselineStore, BaselineEntry
from pytest_gpuperf._store.budgets import Budget, BudgetStore
from pytest_gpuperf.errors import BaselineFileError, LockTimeoutError, UnsafePathError
from pytest_gpuperf._store.locks import HOLDER_SUFFIX, hold

REPO_ROOT = Path(__file__).resolve().parents[2]
DEVICE = {"name": "Fake GPU", "key": "fake-gpu-sm90-132sm-80gib"}
KEY = DEVICE["key"]
MODULE = "tests/fam/test_perf.py"
PRECIOUS = "precious data, not a lock\n"

HOLDER = """
import sys, time
from pathlib import Path
from pytest_gpuperf._store.locks import hold
with hold(Path(sys.argv[1]), timeout_s=5, purpose="a test holder"):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def entry(median: float = 1e-5) -> BaselineEntry:
    return BaselineEntry(median, median * 0.99, median * 1.01, 0.99, 100, 0.01, "cold", "graph", "2026-11-21T00:00:00+00:00")


@pytest.fixture
def held_elsewhere() -> Iterator[Callable[[Path], subprocess.Popen[str]]]:
    """Start a process that holds a lock for 30 s (ended when the test ends)."""
    procs: list[subprocess.Popen[str]] = []

    def start(lock: Path) -> subprocess.Popen[str]:
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock), "30"], env=env, stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def test_a_symlinked_lock_is_refused_and_its_target_kept(tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text(PRECIOUS)
    lock = tmp_path / "x.json.lock"
    lock.symlink_to(target)
    with pytest.raises(UnsafePathError, match=r"x\.json\.lock .*is a symbolic link to .*notes\.txt.*Delete the link"):
        with hold(lock, timeout_s=1, purpose="writing x.json"):
            pass
    assert target.read_text() == PRECIOUS


def test_the_installed_filelock_refuses_symlinks_itself(tmp_path: Path) -> None:
    """The pin (filelock>=3.20.3): below 3.20.1, acquiring a symlinked lock truncated its target."""
    target = tmp_path / "notes.txt"
    target.write_text(PRECIOUS)
    (tmp_path / "x.lock").symlink_to(target)
    with pytest.raises(OSError) as info:
        FileLock(str(tmp_path / "x.lock"), timeout=1).acquire()
    assert info.value.errno == errno.ELOOP
    assert target.read_text() == PRECIOUS


def test_a_timeout_names_the_lock_and_its_holder(tmp_path: Path, held_elsewhere) -> None:
    lock = tmp_path / "b.json.lock"
    proc = held_elsewhere(lock)
    with pytest.raises(LockTimeoutError) as info:
        with hold(lock, timeout_s=0.3, purpose="writing b.json"):
            pass
    message = str(info.value)
    assert f"gave up after 0.3 s waiting for the lock {lock} (writing b.json)" in message
    assert f"held by pid {proc.pid} on " in message and "\n" not in message


def test_the_holder_record_is_removed_on_release(tmp_path: Path) -> None:
    lock = tmp_path / "c.lock"
    holder = Path(str(lock) + HOLDER_SUFFIX)
    with hold(lock, timeout_s=1, purpose="test"):
        assert f"pid {os.getpid()} on " in holder.read_text()
    assert not holder.exists()


def test_baselines_through_a_symlinked_device_folder_are_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root = tmp_path / "baselines"
    root.mkdir()
    (root / KEY).symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(BaselineFileError) as info:
        BaselineStore(root).update(KEY, MODULE, DEVICE, {"t::v": entry()})
    assert f"{root / KEY} is a symbolic link" in str(info.value) and "was not written" in str(info.value)
    assert list(elsewhere.iterdir()) == []  # nothing written, not even a lock


def test_pruning_through_a_symlinked_device_folder_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    BaselineStore(tmp_path / "real").update(KEY, MODULE, DEVICE, {"t::v": entry()})
    (tmp_path / "real" / KEY).rename(elsewhere)
    root = tmp_path / "baselines"
    root.mkdir()
    (root / KEY).symlink_to(elsewhere, target_is_directory=True)
    before = {p.name: p.read_bytes() for p in elsewhere.iterdir()}
    store = BaselineStore(root)
    with pytest.raises(BaselineFileError, match="is a symbolic link"):
        store.remove_entries(store.path_for(KEY, MODULE), ["t::v"])
    assert {p.name: p.read_bytes() for p in elsewhere.iterdir()} == before


@pytest.mark.parametrize("which", ["file", "lock"])
def test_a_symlinked_baseline_file_or_lock_is_refused(tmp_path: Path, which: str) -> None:
    store = BaselineStore(tmp_path / "baselines")
    path = store.path_for(KEY, MODULE)
    path.parent.mkdir(parents=True)
    target = tmp_path / "notes.txt"
    target.write_text(PRECIOUS)
    (path if which == "file" else path.with_name(path.name + ".lock")).symlink_to(target)
    with pytest.raises(BaselineFileError, match="is a symbolic link"):
        store.update(KEY, MODULE, DEVICE, {"t::v": entry()})
    assert target.read_text() == PRECIOUS


def test_a_baseline_lock_timeout_names_the_holder(tmp_path: Path, held_elsewhere, monkeypatch: pytest.MonkeyPatch) -> None:
    store = BaselineStore(tmp_path)
    path = store.path_for(KEY, MODULE)
    path.parent.mkdir(parents=True)
    proc = held_elsewhere(path.with_name(path.name + ".lock"))
    monkeypatch.setattr(baselines, "LOCK_TIMEOUT_S", 0.3)
    with pytest.raises(BaselineFileError) as info:
        store.update(KEY, MODULE, DEVICE, {"t::v": entry()})
    assert f"baseline file {path} was not written: gave up after 0.3 s" in str(info.value)
    assert f"held by pid {proc.pid}" in str(info.value)
    assert not path.exists()


def test_static_budgets_through_a_symlinked_folder_are_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "baselines").mkdir()
    (tmp_path / "baselines" / "static").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(BaselineFileError, match=r"static budget file .* was not written: .*static is a symbolic link"):
        BudgetStore(tmp_path / "baselines").update("fam", "m", "sm_90", {"k": Budget(32, 0, 0, 0, 0)}, "nvcc 13.0.88")
    assert list(elsewhere.iterdir()) == []


MEASURE_TEST = """
from pytest_gpuperf import Variant

def test_one(gpu_perf):
    gpu_perf.measure(Variant("kernel", lambda: None))
"""


def test_update_through_a_symlinked_device_folder_fails_the_run(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (pytester.path / "baselines").mkdir()
    (pytester.path / "baselines" / KEY).symlink_to(elsewhere, target_is_directory=True)
    pytester.makepyfile(test_perf=MEASURE_TEST)
    result = pytester.runpytest("--gpu-perf", "--gpu-perf-update-baselines")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([f"*gpu-perf: baselines *test_perf.json NOT written: *{KEY} is a symbolic link*"])
    assert list(elsewhere.iterdir()) == []


def test_a_busy_gpu_lock_times_out_naming_its_holder(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, held_elsewhere
) -> None:
    from pytest_gpuperf._plugin import session

    monkeypatch.setenv("GPU_PERF_LOCK_DIR", str(tmp_path))  # a lock of this test's own
    monkeypatch.setattr(session, "GPU_LOCK_TIMEOUT_S", 0.5)
    lock = session.gpu_lock_path("0000:00:00.0")
    proc = held_elsewhere(lock)
    pytester.makepyfile(test_perf=MEASURE_TEST)
    result = pytester.runpytest("--gpu-perf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        f"*LockTimeoutError: gave up after 0.5 s waiting for the lock {lock} (timing on GPU 0000:00:00.0); "
        f"it is held by pid {proc.pid} on *"
    ])


def test_a_symlinked_gpu_lock_is_refused(
    pytester: pytest.Pytester, fake_gpu: Callable[..., None], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_gpuperf._plugin import session

    monkeypatch.setenv("GPU_PERF_LOCK_DIR", str(tmp_path))
    target = tmp_path / "notes.txt"
    target.write_text(PRECIOUS)
    session.gpu_lock_path("0000:00:00.0").symlink_to(target)
    pytester.makepyfile(test_perf=MEASURE_TEST)
    result = pytester.runpytest("--gpu-perf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*UnsafePathError: the lock file *pytest-gpuperf-gpu-0000_00_00.0.lock (timing on GPU*) is a symbolic link*"])
    assert target.read_text() == PRECIOUS


def test_the_gpu_lock_re_enters_in_its_thread_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A measurement inside a test that holds a shared GPU goes through; another thread of the same
    process waits for the GPU like another process, and the lock is free again afterwards."""
    import threading
    import time

    from pytest_gpuperf._plugin.session import GpuPerfSession, gpu_lock_path
    from pytest_gpuperf.testing import fake_device

    monkeypatch.setenv("GPU_PERF_LOCK_DIR", str(tmp_path))
    session = GpuPerfSession(None, None, _device=fake_device((9, 0)))  # type: ignore[arg-type]
    entered: list[float] = []

    def other_thread() -> None:
        with session.gpu_lock():
            entered.append(time.monotonic())

    with session.gpu_lock():
        with session.gpu_lock():  # re-entered: no wait, no deadlock
            pass
        thread = threading.Thread(target=other_thread)
        thread.start()
        time.sleep(0.5)
        assert entered == [], "another thread took the GPU while this one held it"
        released = time.monotonic()
    thread.join(timeout=10)
    assert entered and entered[0] >= released
    outside = FileLock(str(gpu_lock_path("0000:00:00.0")), timeout=1)
    outside.acquire()  # free: neither thread still holds it, whatever order they left in
    outside.release()


# -- the machine-wide GPU lock ------------------------------------------------------------------
def fresh_session() -> Any:
    from pytest_gpuperf._plugin.session import GpuPerfSession
    from pytest_gpuperf.testing import fake_device

    return GpuPerfSession(None, None, _device=fake_device((9, 0)))  # type: ignore[arg-type]


def test_the_gpu_lock_lies_in_one_folder_whatever_the_tmpdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    from pytest_gpuperf._plugin.session import gpu_lock_path

    monkeypatch.delenv("GPU_PERF_LOCK_DIR", raising=False)
    for job_tmp in ("a", "b"):  # two jobs of one runner, each with its own TMPDIR
        (tmp_path / job_tmp).mkdir()
        monkeypatch.setenv("TMPDIR", str(tmp_path / job_tmp))
        monkeypatch.setattr(tempfile, "tempdir", None)
        assert gpu_lock_path("GPU-1") == Path("/tmp/pytest-gpuperf-gpu-GPU-1.lock")
    monkeypatch.setenv("GPU_PERF_LOCK_DIR", str(tmp_path))
    assert gpu_lock_path("GPU-1") == tmp_path / "pytest-gpuperf-gpu-GPU-1.lock"
    docs = (REPO_ROOT / "docs" / "runners.md").read_text()
    assert "GPU_PERF_LOCK_DIR" in docs and "/tmp/pytest-gpuperf-gpu-" in docs


def test_the_gpu_lock_file_is_created_for_every_user_whatever_the_umask(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_gpuperf._plugin.session import gpu_lock_path

    monkeypatch.setenv("GPU_PERF_LOCK_DIR", str(tmp_path))
    before = os.umask(0o077)
    try:
        with fresh_session().gpu_lock():
            pass
    finally:
        os.umask(before)
    assert gpu_lock_path("0000:00:00.0").stat().st_mode & 0o777 == 0o666


def test_an_existing_gpu_lock_file_is_opened_read_only_and_without_o_creat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a sticky folder Linux refuses O_CREAT on another user's file (fs.protected_regular), and
    a file an older version made 0644 cannot be opened for writing by anyone else."""
    from pytest_gpuperf._plugin.session import gpu_lock_path

    monkeypatch.setenv("GPU_PERF_LOCK_DIR", str(tmp_path))
    lock = gpu_lock_path("0000:00:00.0")
    lock.write_text("")
    lock.chmod(0o444)
    flags: list[int] = []
    real_open = os.open

    def spy(path: Any, f: int, *args: Any, **kwargs: Any) -> int:
        if str(path) == str(lock):
            flags.append(f)
        return real_open(path, f, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy)
    with fresh_session().gpu_lock():
        pass
    assert flags and all(f & (os.O_CREAT | os.O_WRONLY | os.O_RDWR | os.O_TRUNC) == 0 for f in flags)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to act as a second user")
def test_a_second_user_shares_the_gpu_lock_the_first_created(monkeypatch: pytest.MonkeyPatch) -> None:
    """Root creates the lock in a sticky, world-writable folder; user 'nobody' then takes it, and
    waits for it while root holds it."""
    import fcntl  # noqa: F401  (loaded before the fork: the second user cannot read the interpreter's files)
    import shutil
    import tempfile

    from pytest_gpuperf._plugin import session

    shared = Path(tempfile.mkdtemp(dir="/tmp"))
    shared.chmod(0o1777)
    monkeypatch.setenv("GPU_PERF_LOCK_DIR", str(shared))
    monkeypatch.setattr(session, "GPU_LOCK_TIMEOUT_S", 0.5)

    def as_nobody() -> str:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: a second user's process
            os.close(read)
            try:
                os.setgid(65534)
                os.setuid(65534)
                with fresh_session().gpu_lock():
                    answer = "took it"
            except Exception as exc:
                answer = f"{type(exc).__name__}: {exc}"
            os.write(write, answer.encode()[:4000])
            os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as fh:
            answer = fh.read().decode()
        os.waitpid(pid, 0)
        return answer

    try:
        with fresh_session().gpu_lock():
            pass  # root creates the lock file
        assert as_nobody() == "took it"
        with fresh_session().gpu_lock():
            assert as_nobody().startswith("LockTimeoutError: gave up after 0.5 s waiting for the lock")
    finally:
        shutil.rmtree(shared)


def test_a_gpu_lock_that_is_a_fifo_or_in_a_folder_anyone_may_swap_is_refused(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_gpuperf._plugin.session import gpu_lock_path

    monkeypatch.setenv("GPU_PERF_LOCK_DIR", str(tmp_path))
    os.mkfifo(gpu_lock_path("0000:00:00.0"))
    with pytest.raises(UnsafePathError, match=r"pytest-gpuperf-gpu-0000_00_00\.0\.lock \(timing on GPU 0000:00:00\.0\) "
                                              r"is not a regular file \(mode prw.*\); remove it"):
        with fresh_session().gpu_lock():
            pass
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    open_folder.chmod(0o777)
    monkeypatch.setenv("GPU_PERF_LOCK_DIR", str(open_folder))
    with pytest.raises(UnsafePathError, match=r"writable by every user but lacks the sticky bit.*chmod \+t"):
        with fresh_session().gpu_lock():
            pass
