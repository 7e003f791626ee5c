"""pytest hooks and fixtures of pytest-gpuperf, the module its ``pytest11`` entry point names: a
thin table; the work is in ``_plugin`` and the folders below it.

Installing the plugin changes nothing in a suite that does not use it: it claims no generic
marker or fixture name (its fixtures are ``gpuperf_device``, ``gpu_perf``, ``gpu_counters`` and
``gpu_static``; ``gpu`` remains as an alias that a project's own ``gpu`` fixture overrides), it
loads no hypothesis profile unless asked (``--hypothesis-profile=gpu-perf``), and loading it
imports no NumPy, CUDA or framework package (CUDA is probed only when a test needs a GPU)."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import pytest

from pytest_gpuperf._plugin import arch, gpu_sharing, hookspecs, hypothesis_profile, options
from pytest_gpuperf._plugin.run_hooks import ROLE_KEY, RunHooks
from pytest_gpuperf._plugin.session import SKIP_PREFIX, GpuPerfSession
from pytest_gpuperf._timing.device import DeviceInfo
from pytest_gpuperf.errors import GpuPerfError, GpuPerfUsageError

if TYPE_CHECKING:
    from pytest_gpuperf._plugin.gpu_counters import GpuCounters
    from pytest_gpuperf._plugin.gpu_perf import GpuPerf
    from pytest_gpuperf._plugin.gpu_static import GpuStatic

SESSION_KEY = pytest.StashKey[GpuPerfSession]()
SHARED_KEY = pytest.StashKey[int]()
HOLD_KEY = pytest.StashKey[contextlib.ExitStack]()
PERF_OFF = SKIP_PREFIX + "perf test, timing is off: run pytest with --gpu-perf"
FULL_OFF = SKIP_PREFIX + "perf test of the full tier (gpu_perf_full): run with --gpu-perf-full"
PERF_FIXTURE = "gpu_perf"
DEVICE_FIXTURES = ("gpuperf_device", "gpu")  # "gpu": the old name, kept as an alias
COUNTERS_FIXTURE = "gpu_counters"
GPU_MARKERS = frozenset({*arch.SHORTHAND_MARKERS, arch.GENERIC_MARKER})
MARKERS = {
    options.MARKER: "gpu_perf(**settings): a GPU performance test (skipped without --gpu-perf); keywords override "
    "settings for this test: " + ", ".join(sorted(options.PER_TEST_KEYWORDS)),
    options.GPU_MARKER: "gpu_perf_for(pattern, **settings): settings for the GPUs whose baseline folder name "
    "(e.g. nvidia-h200-sm90-132sm-140gib) matches the fnmatch pattern; applied after every gpu_perf(...), so on "
    "those GPUs its keywords win wherever either marker is placed",
    options.FULL_MARKER: "a perf test of the full tier: skipped unless --gpu-perf-full (or a baseline update) asks "
    "for it; for grids too long for every pull request",
    **arch.MARKER_HELP,
}


def _session(config: pytest.Config) -> GpuPerfSession:
    return config.stash[SESSION_KEY]


def is_perf_test(item: pytest.Item) -> bool:
    return PERF_FIXTURE in getattr(item, "fixturenames", ()) or any(
        item.get_closest_marker(name) is not None for name in (options.MARKER, options.FULL_MARKER)
    )


def needs_gpu(item: pytest.Item) -> bool:
    """A test needs the GPU when it uses this plugin's device fixture (not a project's own fixture
    of the same name) or carries an architecture marker."""
    return _uses_own_fixture(item, DEVICE_FIXTURES) or any(m.name in GPU_MARKERS for m in item.iter_markers())


def uses_gpu(item: pytest.Item) -> bool:
    """What --gpu-perf-gpu-only keeps: perf tests, tests that need the GPU, and the hardware-counter
    tests (the plugin's gpu_counters fixture, which skips by itself where counters cannot run)."""
    return is_perf_test(item) or needs_gpu(item) or _uses_own_fixture(item, (COUNTERS_FIXTURE,))


def _uses_own_fixture(item: pytest.Item, names: tuple[str, ...]) -> bool:
    """Whether the test ends up running the plugin's own fixture of one of ``names``: the closest
    definition, or one it reaches through overrides that request the fixture they override."""
    info = getattr(item, "_fixtureinfo", None)
    for name in names:
        if name in getattr(item, "fixturenames", ()):
            defs = info.name2fixturedefs.get(name, ()) if info is not None else ()
            for definition in reversed(defs):
                if getattr(definition.func, "__module__", None) == __name__:
                    return True
                if name not in definition.argnames:  # an override that does not use the one it hides
                    break
    return False


# -- set-up -----------------------------------------------------------------------
def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    options.add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", text if text.startswith(name) else f"{name}: {text}")
    try:
        settings = options.Settings.from_config(config)
        settings.check_paths()
    except GpuPerfUsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    if settings.enabled and settings.changed_only and (settings.against is None or settings.update_baselines):
        needs = "needs --gpu-perf-against REV" if settings.against is None else "cannot be combined with"
        raise pytest.UsageError(
            f"pytest-gpuperf: --gpu-perf-changed-only (set by {settings.sources.get('changed-only')}) {needs}"
            + (" --gpu-perf-update-baselines, which records every variant" if settings.against is not None else "")
        )
    session = GpuPerfSession(config, settings)
    if settings.enabled and settings.against:
        try:
            _ = session.against  # resolved now, so a bad revision is a usage error before any test runs
        except GpuPerfUsageError as exc:
            raise pytest.UsageError(str(exc)) from None
    config.stash[SESSION_KEY] = session
    config.pluginmanager.register(RunHooks(session), "gpu_perf_run")
    if config.pluginmanager.hasplugin("benchmark") and benchmark_asked(config):
        from pytest_gpuperf._plugin.benchmark_interop import BenchmarkHooks

        config.pluginmanager.register(BenchmarkHooks(session), "gpu_perf_benchmark")


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Register the ``gpu-perf`` hypothesis profile when the command line asks for it, before
    hypothesis's own plugin loads the profile named there (never otherwise: a project's own
    profile stays in force)."""
    if config.getoption("hypothesis_profile", None) == hypothesis_profile.PROFILE:
        hypothesis_profile.register_profile()


def benchmark_asked(config: pytest.Config) -> bool:
    """Whether the run asked pytest-benchmark for stored or compared results."""
    names = ("benchmark_json", "benchmark_autosave", "benchmark_save", "benchmark_compare")
    return any(config.getoption(n, None) for n in names)


def pytest_report_header(config: pytest.Config) -> list[str]:
    s = _session(config)
    if not s.settings.enabled:
        return ["gpu-perf: off (perf tests are skipped; run with --gpu-perf to time them)"]
    device = s.device
    if not isinstance(device, DeviceInfo):
        return [f"gpu-perf: on, but no GPU: {device.reason}; GPU and perf tests will be skipped"]
    lines = [
        f"gpu-perf: on; GPU {device.ordinal}: {device.describe()}",
        f"gpu-perf: driver {device.driver_version or '?'}, CUDA runtime {device.cuda_runtime_version or '?'}, "
        f"CuPy {device.cupy_version or '?'}; cache mode {s.settings.cache}; baselines: "
        f"{s.settings.baselines_dir / device.key}",
    ]
    if shared := _shared_gpus(config):
        lines.append(gpu_sharing.header_line(config, shared))
    if s.settings.update_baselines:
        lines.append(
            f"gpu-perf: --gpu-perf-update-baselines: this run's measurements replace the stored baselines of {device.key}"
        )
    return lines


@pytest.hookimpl(tryfirst=True)  # before pytest's -m selection, which sees the added markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Reject bad markers at collection, naming the test, before any GPU time is spent; mark
    every perf test (the gpu_perf fixture or the gpu_perf_full marker) ``gpu_perf``, so
    ``-m gpu_perf`` selects it; under ``--gpu-perf-only`` deselect the rest, under
    ``--gpu-perf-gpu-only`` the tests that use no GPU."""
    settings = _session(config).settings
    for item in items:
        try:
            arch.requirements(item)
            settings.for_test(item)
        except GpuPerfUsageError as exc:
            raise pytest.UsageError(str(exc)) from None
        full = item.get_closest_marker(options.FULL_MARKER)
        if full is not None and (full.args or full.kwargs):
            raise pytest.UsageError(
                f"{item.nodeid}: @pytest.mark.{options.FULL_MARKER} takes no arguments; "
                f"give settings to @pytest.mark.{options.MARKER}(...)"
            )
        if is_perf_test(item) and item.get_closest_marker(options.MARKER) is None:
            item.add_marker(options.MARKER)
    if settings.only or settings.gpu_only:
        wanted = is_perf_test if settings.only else uses_gpu
        kept = [item for item in items if wanted(item)]
        config.hook.pytest_deselected(items=[item for item in items if not wanted(item)])
        items[:] = kept


def _shared_gpus(config: pytest.Config) -> int:
    """How many GPUs the workers of a timed xdist run share (gpu_sharing), or 0 where each has its
    own or nothing is timed; decided once per process."""
    if SHARED_KEY not in config.stash:
        s = _session(config)
        shared = 0
        if s.settings.enabled and gpu_sharing.worker_count(config) > 1:
            gpus = 1 if s.settings.device != "auto" else (s.gpu_count() or 1)  # --gpu-perf-device N: one for all
            shared = gpus if gpu_sharing.shares_gpus(config, gpus) else 0
        config.stash[SHARED_KEY] = shared
    return config.stash[SHARED_KEY]


def _hold_shared_gpu(item: pytest.Item, s: GpuPerfSession) -> None:
    """Where workers share a GPU, a test that uses it holds it from here (its set-up, once it is
    known not to skip) to the end of its teardown."""
    if not (uses_gpu(item) and _shared_gpus(item.config)):
        return
    hold = contextlib.ExitStack()
    try:
        hold.enter_context(s.gpu_lock())
    except GpuPerfError as exc:
        pytest.fail(f"gpu-perf: could not take the shared GPU for this test: {exc}", pytrace=False)
    item.stash[HOLD_KEY] = hold


@pytest.hookimpl(wrapper=True, tryfirst=True)  # outermost: released after every fixture's teardown
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    try:
        return (yield)
    finally:
        hold = item.stash.get(HOLD_KEY, None)
        if hold is not None:
            del item.stash[HOLD_KEY]
            hold.close()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    s = _session(item.config)
    perf = is_perf_test(item)
    if perf and not s.settings.enabled:
        pytest.skip(PERF_OFF)
    if perf or needs_gpu(item):
        device = s.device
        if not isinstance(device, DeviceInfo):
            item.user_properties.append((ROLE_KEY, "perf" if perf else "gpu"))  # for the summary's count
            pytest.skip(SKIP_PREFIX + f"no GPU: {device.reason}")
        for requirement in arch.requirements(item):
            reason = requirement.unmet_reason(device)
            if reason:
                pytest.skip(SKIP_PREFIX + reason)
    if perf and item.get_closest_marker(options.FULL_MARKER) and not (s.settings.full or s.settings.update_baselines):
        pytest.skip(FULL_OFF)
    _hold_shared_gpu(item, s)


# -- fixtures ---------------------------------------------------------------------
def _require_device(s: GpuPerfSession) -> DeviceInfo:
    """The session's GPU, or skip the test saying why there is none."""
    device = s.device
    if not isinstance(device, DeviceInfo):
        pytest.skip(SKIP_PREFIX + f"no GPU: {device.reason}")
    return device


@pytest.fixture(scope="session")
def gpuperf_device(request: pytest.FixtureRequest) -> DeviceInfo:
    """The GPU under test (skips the test when there is none)."""
    return _require_device(_session(request.config))


@pytest.fixture(scope="session")
def gpu(request: pytest.FixtureRequest) -> DeviceInfo:
    """The GPU under test: the old name of ``gpuperf_device`` (a project's own ``gpu`` fixture wins)."""
    return _require_device(_session(request.config))


@pytest.fixture
def gpu_perf(request: pytest.FixtureRequest) -> GpuPerf:
    """Measure variants, assert speedups and check stored baselines (see ``GpuPerf``)."""
    from pytest_gpuperf._plugin.gpu_perf import GpuPerf

    s = _session(request.config)
    if not s.settings.enabled:
        pytest.skip(PERF_OFF)
    device = _require_device(s)
    if not device.cupy_version and s.config.hook.pytest_gpuperf_backend.get_hookimpls() == []:
        pytest.skip(SKIP_PREFIX + "timing needs CuPy, which is not installed: pip install pytest-gpuperf[gpu]")
    try:
        settings = s.settings.for_test(request.node, device.key)
    except GpuPerfUsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    return GpuPerf(s, request.node, settings)


COUNTERS_CACHE_KEY = pytest.StashKey[dict[str, Any]]()


@pytest.fixture
def gpu_counters(request: pytest.FixtureRequest) -> GpuCounters:
    """Nsight Compute counters of single kernel launches (see ``GpuCounters``).

    Skipped unless --gpu-perf-counters (independent of --gpu-perf), without a GPU, without
    ncu, or where the counters cannot be read (the skip says how to enable them).
    """
    from pytest_gpuperf._counters.ncu import CountersUnavailable, find_ncu
    from pytest_gpuperf._plugin.gpu_counters import GpuCounters

    s = _session(request.config)
    if not s.settings.counters:
        pytest.skip(SKIP_PREFIX + "hardware-counter test, counters are off: run pytest with --gpu-perf-counters")
    _require_device(s)
    try:
        ncu = find_ncu()
    except CountersUnavailable as exc:
        pytest.skip(SKIP_PREFIX + exc.reason)
    cache = request.config.stash.setdefault(COUNTERS_CACHE_KEY, {})
    return GpuCounters(s, request.node, ncu, cache)


@pytest.fixture
def gpu_static(request: pytest.FixtureRequest) -> GpuStatic:
    """The compile-time tier, no GPU needed: ``gpu_static.check(module, arch)`` builds a
    ``CudaModule`` with nvcc and gates registers, spills, shared memory and stack against the
    budgets in ``<baselines>/static/``, ptxas performance warnings and SASS facts. Runs without
    --gpu-perf; skipped (saying how to install it) where nvcc is missing."""
    from pytest_gpuperf._compile.cuda_module import INSTALL_HINT
    from pytest_gpuperf._compile.nvcc import NvccNotFound, find_nvcc
    from pytest_gpuperf._plugin.gpu_static import GpuStatic

    try:
        find_nvcc()
    except NvccNotFound:
        pytest.skip(SKIP_PREFIX + f"static tier: nvcc not found; {INSTALL_HINT}")
    return GpuStatic(_session(request.config), request.node)
