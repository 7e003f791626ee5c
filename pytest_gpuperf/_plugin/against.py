"""Pairing a test's variants with the same test at another revision, timed in the same rounds.

``--gpu-perf-against REV`` (a git revision, or the path of another checkout) makes each perf
test build its variants twice: from the working tree, as usual, and from REV. The REV copy of
the test module is imported under its own names: while it is imported, and while any of its
launches runs, ``sys.modules`` holds REV's versions of the project's top-level packages (those
the REV tree has, e.g. ``kernels`` and ``tests``), and the working tree's come back afterwards.
The REV test function is then called with a collector in place of ``gpu_perf``, which records
every ``Variant`` it is handed. Its other arguments come from REV too where REV defines them:
fixtures of the REV test module and of the ``conftest.py`` files above it are run from REV's
code (module- and session-scoped ones once per run); parameters and fixtures REV does not
define (``gpu``, ``tmp_path``) take the working tree's values. REV's launches keep the code they
were built with, but a launch that imports the project's modules *while it runs* gets the
working tree's: import them when the variant is built. Each variant measured in the
working tree is then timed interleaved with its REV namesake, so machine, clocks and
temperature cancel, and the slowdown against REV decides the regression check.

A test whose REV counterpart is missing, takes other arguments, or builds no variant of the same
name cannot be paired: the result says why, and the stored baseline decides as usual.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import importlib
import inspect
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import pytest

from pytest_gpuperf._store.files import private_dir
from pytest_gpuperf._store.git_output import run_git
from pytest_gpuperf._store.locks import hold
from pytest_gpuperf._timing.results import Variant
from pytest_gpuperf.errors import GpuPerfError, GpuPerfUsageError

T = TypeVar("T")


@dataclass
class Revision:
    """Another version of the project, checked out (or pointed to) as a folder."""

    label: str  # the REV the user gave
    commit: str  # the resolved commit, or "" for a plain folder
    root: Path
    modules: dict[str, ModuleType] = field(default_factory=dict)  # REV's own sys.modules entries
    fixture_values: dict[tuple[str, str], Any] = field(default_factory=dict)  # REV fixtures of wider scope
    teardowns: list[Any] = field(default_factory=list)  # REV generator fixtures made without a pytest request
    _imported: dict[str, ModuleType | None] = field(default_factory=dict)

    @functools.cached_property
    def packages(self) -> frozenset[str]:
        """The top-level import names REV's tree provides (folders holding Python files, and
        top-level modules), except the plugin itself: REV's tests run on this run's plugin."""
        out = {p.name for p in self.root.iterdir() if p.is_dir() and p.name.isidentifier() and any(p.glob("*.py"))}
        out |= {p.stem for p in self.root.glob("*.py")}
        return frozenset(name for name in out if name != "pytest_gpuperf")

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Run with REV's versions of its packages in ``sys.modules`` (and its root first on sys.path)."""
        packages = self.packages
        ours = {k: m for k, m in sys.modules.items() if k.split(".", 1)[0] in packages}
        for k in ours:
            del sys.modules[k]
        sys.modules.update(self.modules)
        sys.path.insert(0, str(self.root))
        importlib.invalidate_caches()
        try:
            yield
        finally:
            sys.path.remove(str(self.root))
            for k in [k for k in sys.modules if k.split(".", 1)[0] in packages]:
                self.modules[k] = sys.modules.pop(k)
            sys.modules.update(ours)

    def module(self, dotted: str) -> ModuleType | None:
        """REV's module ``dotted`` (imported once), or None when REV has no such file."""
        if dotted not in self._imported:
            path = self.root / (dotted.replace(".", "/") + ".py")
            if not path.exists():
                self._imported[dotted] = None
            else:
                with self.active():
                    self._imported[dotted] = importlib.import_module(dotted)
        return self._imported[dotted]

    def fixture(self, name: str, module: ModuleType, dotted: str) -> Any:
        """REV's definition of fixture ``name`` visible from ``module``: the module's own, else the
        nearest ``conftest.py`` above it; None when REV defines none."""
        candidates = [module]
        parts = dotted.split(".")[:-1]
        while parts:
            conftest = self.module(".".join([*parts, "conftest"]))
            if conftest is not None:
                candidates.append(conftest)
            parts.pop()
        root_conftest = self.module("conftest")
        if root_conftest is not None:
            candidates.append(root_conftest)
        for candidate in candidates:
            for attr, obj in vars(candidate).items():
                marker = getattr(obj, "_fixture_function_marker", None)
                if marker is not None and (marker.name or attr) == name:
                    return obj
        return None


def resolve(rootdir: Path, rev: str) -> Revision:
    """REV is a git revision of ``rootdir`` or a folder (another checkout). A name that is both,
    such as a folder ``main`` beside a branch ``main``, is refused, as git refuses an argument
    that is both a revision and a file; a folder written as a path (``./main``) is a folder. A
    revision is exported once into a private cache folder (``export``)."""
    if rev.startswith("-"):
        raise GpuPerfUsageError(f"pytest-gpuperf: --gpu-perf-against {rev!r} is not a git revision or a folder")
    folder = Path(rev).expanduser()
    commit, why_not = _commit(rootdir, rev)
    if folder.is_dir():
        if commit and not rev.startswith(_PATH_PREFIXES) and rev not in (".", ".."):
            raise GpuPerfUsageError(
                f"pytest-gpuperf: --gpu-perf-against {rev!r} names both a git revision of {rootdir} "
                f"(commit {commit[:12]}) and the folder {folder.resolve()}; write ./{rev} for the folder, "
                f"or the commit {commit[:12]} for the revision"
            )
        return Revision(rev, "", folder.resolve())
    if not commit:
        raise GpuPerfUsageError(
            f"pytest-gpuperf: --gpu-perf-against {rev!r} is neither a folder nor a git revision of {rootdir}"
            f"{f' ({why_not})' if why_not else ''}. "
            "Give a commit, branch or tag (e.g. origin/main, HEAD~1), or the path of another checkout."
        )
    try:
        root = export(rootdir, commit, rev)
    except GpuPerfUsageError:
        raise
    except (OSError, GpuPerfError) as exc:  # the cache folder, its lock, a full disk
        raise GpuPerfUsageError(
            f"pytest-gpuperf: --gpu-perf-against {rev}: commit {commit[:12]} cannot be exported: "
            f"{getattr(exc, 'strerror', None) or exc}"
        ) from None
    return Revision(rev, commit, root)


_PATH_PREFIXES = ("/", "./", "../", "~")


def _commit(rootdir: Path, rev: str) -> tuple[str, str]:
    """The commit ``rev`` names in ``rootdir`` (``git rev-parse --verify REV^{commit}``: a
    revision only, never a path), or "" and why not."""
    try:
        done = run_git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], rootdir, limit=4096, timeout_s=60)
    except (OSError, GpuPerfError) as exc:
        return "", str(exc)
    commit = done.stdout.decode("ascii", "replace").strip()
    if done.returncode != 0 or not commit:
        return "", " ".join(done.stderr.split())
    return commit, ""


COMPLETE = ".complete"  # written into a staging folder last, before it is renamed into place
EXPORT_LOCK_TIMEOUT_S = 900.0
ARCHIVE_TIMEOUT_S = 300.0


def export(rootdir: Path, commit: str, rev: str = "") -> Path:
    """The tree of ``commit``, extracted once into ``<cache>/against/<commit>``.

    The tree is extracted into a private staging folder beside it and renamed into place once
    complete, so a run sees the whole tree or none: eight runs exporting one revision at once
    used to read files that another was still writing. One export per commit runs at a time (a
    lock); a run that finds the tree in place, or loses the rename to another, uses that tree.
    A failed export leaves nothing behind.
    """
    cache = private_dir("against")
    target = cache / commit
    if (target / COMPLETE).is_file():
        return target
    with hold(cache / f".{commit}.lock", timeout_s=EXPORT_LOCK_TIMEOUT_S, purpose=f"exporting {commit[:12]}"):
        if (target / COMPLETE).is_file():
            return target
        for leftover in [p for p in cache.glob(f".*{commit}*") if p.is_dir()]:
            shutil.rmtree(leftover, ignore_errors=True)  # a crashed export's staging, or a half-removed tree
        if target.exists():
            _remove(target)  # left incomplete by an older version, which extracted in place
        staging = Path(tempfile.mkdtemp(prefix=f".{commit}.", suffix=".staging", dir=cache))
        try:
            _extract(rootdir, commit, staging, rev or commit[:12])
            (staging / COMPLETE).write_text(commit + "\n")
            try:
                os.rename(staging, target)
            except OSError as exc:
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY) or not (target / COMPLETE).is_file():
                    raise
        finally:
            _remove(staging)
    return target


def _remove(path: Path) -> None:
    """Delete a tree: renamed aside first, so no reader ever sees it half deleted."""
    aside = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.removing")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return
    shutil.rmtree(aside, ignore_errors=True)


def _extract(rootdir: Path, commit: str, dest: Path, label: str) -> None:
    """``git archive`` of ``commit``, streamed into ``dest`` (never whole in memory). A symbolic
    link that points outside the tree (to an absolute path, or up past its top) is refused."""
    problem = ""
    with tempfile.TemporaryFile() as err:  # a file, not a pipe: git never blocks on its error output
        proc = subprocess.Popen(
            ["git", "-C", str(rootdir), "archive", "--format=tar", commit],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
        )
        timer = threading.Timer(ARCHIVE_TIMEOUT_S, proc.kill)
        timer.start()
        try:
            with proc:
                assert proc.stdout is not None
                try:
                    with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
                        tar.extractall(dest, filter="data")
                except (tarfile.AbsoluteLinkError, tarfile.LinkOutsideDestinationError) as exc:
                    proc.kill()
                    member = exc.tarinfo
                    raise GpuPerfUsageError(
                        f"pytest-gpuperf: --gpu-perf-against {label}: the tree at commit {commit[:12]} holds the "
                        f"symbolic link {member.name} -> {member.linkname}, which points outside the tree, so "
                        "nothing was exported; check the revision out into a folder and pass that folder instead"
                    ) from None
                except (tarfile.TarError, OSError) as exc:
                    problem = str(exc) or type(exc).__name__  # git's own complaint, if any, says more
                    proc.kill()
                code = proc.wait()
        finally:
            timed_out = not timer.is_alive()
            timer.cancel()
        if code != 0 or problem:
            err.seek(0)
            said = " ".join(err.read(2000).decode("utf-8", "replace").split())
            why = f"ran past {ARCHIVE_TIMEOUT_S:g} s" if timed_out else said or problem
            raise GpuPerfUsageError(
                f"pytest-gpuperf: --gpu-perf-against {label}: git archive {commit[:12]} failed ({why}); "
                "nothing was exported"
            )


class VariantCollector:
    """Stands in for ``gpu_perf`` while the REV test runs: records variants, measures nothing."""

    def __init__(self, real: Any):
        self.device = real.device
        self.settings = real.settings
        self.variants: dict[str, Variant] = {}
        self.calls: list[
            tuple[Any, ...]
        ] = []  # ("measure", name, check_baseline) or ("speedup", fast, baseline, at_least)
        self._real = real

    def measure(self, variant: Variant, *, check_baseline: bool = True) -> Any:
        self.variants.setdefault(variant.name, variant)
        self.calls.append(("measure", variant.name, check_baseline))
        return _Unmeasured()

    def assert_speedup(self, fast: Variant, baseline: Variant, at_least: float | None = None) -> Any:
        self.variants.setdefault(fast.name, fast)
        self.variants.setdefault(baseline.name, baseline)
        self.calls.append(("speedup", fast.name, baseline.name, at_least))
        return _Unmeasured()

    def record(self, *args: Any, **kwargs: Any) -> None:
        pass

    def copy_bandwidth(self) -> float:
        return 1.0

    def shared(self, key: Hashable, make: Callable[[], T]) -> T:
        """The working tree's object for ``key`` (``GpuPerf.shared``): both sides on the same buffers."""
        value: T = self._real.shared(key, make)
        return value


class _Unmeasured:
    """What the collector returns: any public attribute is a placeholder number, so a test that
    computes with a result, or asserts on it, runs on to its next call."""

    def __getattr__(self, name: str) -> float:
        return _placeholder_attribute(name)


def _placeholder_attribute(name: str) -> _Placeholder:
    """The placeholder for a public attribute; a private or special name stays missing, so that
    protocol probes (``__array_interface__``, ``__deepcopy__``) see no such attribute."""
    if name.startswith("_"):
        raise AttributeError(name)
    return PLACEHOLDER


class _Placeholder(float):
    """1.0 that satisfies every comparison and stays itself through arithmetic and attribute
    access: ``assert c.speedup > 1.1``, ``assert bw / peak < 0.9`` and ``c.fast.bandwidth / copy``
    all hold, so the calls after them are seen."""

    def _true(self, other: object) -> bool:
        return True

    __lt__ = __le__ = __gt__ = __ge__ = __eq__ = __ne__ = _true

    def _same(self, *other: object) -> _Placeholder:
        return self

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _same
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __pow__ = __rpow__ = _same
    __neg__ = __pos__ = __abs__ = _same
    __hash__ = float.__hash__

    def __getattr__(self, name: str) -> _Placeholder:
        # ``comparison.fast.bandwidth``: the collector's result holds placeholders where the real
        # one holds measurements, so their attributes are placeholders too.
        return _placeholder_attribute(name)


PLACEHOLDER = _Placeholder(1.0)


@dataclass(frozen=True)
class Pairing:
    """REV's variants for one test, or why there are none."""

    variants: dict[str, Variant]
    reason: str = ""
    calls: tuple[tuple[Any, ...], ...] = ()  # the test's calls of gpu_perf, in order (VariantCollector.calls)
    stopped: str = ""  # the exception that ended REV's run of the test early ("" when it ran to its end)


class FixtureResolver:
    """Values for a REV test's arguments: REV's own fixtures run from REV's code, the rest from this run."""

    def __init__(self, revision: Revision, module: ModuleType, dotted: str, funcargs: dict[str, Any], request: Any):
        self.revision, self.module, self.dotted = revision, module, dotted
        self.funcargs, self.request = funcargs, request

    def value(self, name: str, collector: VariantCollector, stack: tuple[str, ...] = ()) -> Any:
        if name == "gpu_perf":
            return collector
        definition = self.revision.fixture(name, self.module, self.dotted) if name not in stack else None
        if definition is None:
            if name in self.funcargs:
                return self.funcargs[name]
            return self.request.getfixturevalue(name)
        scope = definition._fixture_function_marker.scope
        owner = self._scope_node(scope)
        cache = self.revision.fixture_values
        key = (owner.nodeid if owner is not None else self.dotted if scope == "module" else "", name)
        if scope != "function" and key in cache:
            return cache[key]
        function = definition._get_wrapped_function()
        kwargs = {p: self.value(p, collector, (*stack, name)) for p in inspect.signature(function).parameters}
        with self.revision.active():
            result = function(**kwargs)
            if inspect.isgenerator(result):
                generator, result = result, next(result)
                self._tear_down_with_scope(owner, name, key, generator)
        if scope != "function":
            cache[key] = result
        return result

    def _scope_node(self, scope: str) -> Any:
        """The collection node whose end ends a fixture of ``scope`` (None without a pytest request)."""
        item = getattr(self.request, "node", None)
        if item is None:
            return None
        kinds = {"class": (pytest.Class, pytest.Module), "module": (pytest.Module,), "package": (pytest.Package,)}
        for kind in kinds.get(scope, ()):
            node = item.getparent(kind)
            if node is not None:
                return node
        return item.session if scope != "function" else item

    def _tear_down_with_scope(self, owner: Any, name: str, key: tuple[str, str], generator: Any) -> None:
        """Run a REV generator fixture's teardown when its scope ends, as pytest does for this run's.

        REV's variants are measured after REV's test function returns, so the teardown must not run
        earlier: a fixture that frees what a launch uses (a model, a captured graph) would leave the
        launch reading freed memory. Without a request the generator is kept until the revision goes."""
        revision = self.revision

        def finish() -> None:
            revision.fixture_values.pop(key, None)
            with revision.active():
                try:
                    next(generator)
                except StopIteration:
                    return
            raise GpuPerfError(f"fixture {name!r} at {revision.label} yields more than once")

        if owner is None:
            revision.teardowns.append(generator)
        else:
            owner.addfinalizer(finish)


def pair(
    revision: Revision, module: str, test_name: str, funcargs: dict[str, Any], real: Any, request: Any = None
) -> Pairing:
    """Build REV's variants of ``module``'s ``test_name`` (``test_fn`` or ``TestClass::test_fn``)."""
    dotted = module[:-3].replace("/", ".") if module.endswith(".py") else module.replace("/", ".")
    try:
        rev_module = revision.module(dotted)
    except Exception as exc:
        return Pairing({}, f"{module} does not import at {revision.label} ({type(exc).__name__}: {exc})")
    if rev_module is None:
        return Pairing({}, f"{module} does not exist at {revision.label}")
    func: Any = rev_module
    for part in test_name.split("[", 1)[0].split("::"):
        func = getattr(func, part, None)
        if func is None:
            return Pairing({}, f"{test_name.split('[', 1)[0]} does not exist at {revision.label}")
    if inspect.isclass(getattr(func, "__self__", None)) or "::" in test_name:
        return Pairing({}, "test methods of classes are not paired yet")
    collector = VariantCollector(real)
    funcargs = {**funcargs, **own_parameters(func, rev_module, funcargs)}
    resolver = FixtureResolver(revision, rev_module, dotted, funcargs, request)
    try:
        kwargs = {name: resolver.value(name, collector) for name in inspect.signature(func).parameters}
    except Exception as exc:
        return Pairing({}, f"the test's arguments cannot be made at {revision.label} ({type(exc).__name__}: {exc})")
    stopped = ""
    try:
        with revision.active():
            func(**kwargs)
    except STAND_IN_STOPS as exc:  # REV's test ran on placeholder results; the variants built before stopping are kept
        stopped = stop_reason(exc)
    if not collector.variants:
        before = f" (it stopped before its first measurement: {stopped})" if stopped else ""
        return Pairing({}, f"the test builds no variant at {revision.label}{before}")
    return Pairing(dict(collector.variants), calls=tuple(collector.calls), stopped=stopped)


def own_parameters(func: Any, module: ModuleType, funcargs: dict[str, Any]) -> dict[str, Any]:
    """REV's own values of the test's parameters, where REV parametrizes the same argument with a
    value that prints the same: an object of a class the revision defines (a dataclass of shapes)
    is then REV's, so REV's code that compares it with its own objects (``case in CASES``) finds
    it. Any other argument keeps this run's value."""
    found: dict[str, Any] = {}
    for mark in _marks(func) + _marks(module):
        if mark.name != "parametrize" or len(mark.args) < 2 or not isinstance(mark.args[1], (list, tuple)):
            continue
        names = mark.args[0]
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        indirect = mark.kwargs.get("indirect", False)
        for position, name in enumerate(names):
            if name not in funcargs or indirect is True or (isinstance(indirect, (list, tuple)) and name in indirect):
                continue
            printed = repr(funcargs[name])
            for entry in mark.args[1]:
                values = entry.values if isinstance(entry, _PARAMETER_SET) else entry if len(names) > 1 else (entry,)
                if position < len(values) and repr(values[position]) == printed:
                    found[name] = values[position]
                    break
    return found


def _marks(owner: Any) -> list[Any]:
    marks = getattr(owner, "pytestmark", [])
    return [getattr(mark, "mark", mark) for mark in (marks if isinstance(marks, list) else [marks])]


_PARAMETER_SET = type(pytest.param(None))


# What ends a test run on the stand-in without ending the real test: its exceptions, and a skip, an
# xfail or a failure it calls for on a placeholder result (which says nothing of the real one).
STAND_IN_STOPS: tuple[type[BaseException], ...] = (
    Exception,
    pytest.skip.Exception,
    pytest.xfail.Exception,
    pytest.fail.Exception,
)


def stop_reason(exc: BaseException) -> str:
    """Why a test run with the stand-in ended early, for ``--gpu-perf-changed-only``'s reasons."""
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
