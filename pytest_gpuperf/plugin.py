"""pytest hooks and fixtures of pytest-gpuperf. Loading it costs nothing: CUDA is probed
only when a test needs a GPU, and GPU-only packages are imported only then."""
from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from pytest_gpuperf import arch, hookspecs, options
from pytest_gpuperf.device import DeviceInfo
from pytest_gpuperf.errors import GpuPerfUsageError
from pytest_gpuperf.session import RECORD_KEY, SKIP_PREFIX, GpuPerfSession

SESSION_KEY = pytest.StashKey[GpuPerfSession]()
PERF_OFF = SKIP_PREFIX + "perf test, timing is off: run pytest with --gpu-perf"
ROLE_KEY = "gpu_perf_role"  # user property on a test skipped for want of a GPU: "perf" or "gpu"
MAX_LISTED = 10  # missing-baseline notes and shifted comparisons listed in the terminal summary
PERF_FIXTURE = "gpu_perf"
GPU_FIXTURE = "gpu"
GPU_MARKERS = frozenset({"gpu", *arch.SHORTHAND_MARKERS, arch.GENERIC_MARKER})
MARKERS = {
    "gpu": "gpu: needs a usable CUDA GPU (skipped with the reason otherwise)",
    options.MARKER: "gpu_perf(**settings): a GPU performance test (skipped without --gpu-perf); keywords override "
    "settings for this test: " + ", ".join(sorted(options.PER_TEST_KEYWORDS)),
    **arch.MARKER_HELP,
}


def _session(config: pytest.Config) -> GpuPerfSession:
    return config.stash[SESSION_KEY]


def is_perf_test(item: pytest.Item) -> bool:
    return PERF_FIXTURE in getattr(item, "fixturenames", ()) or item.get_closest_marker(options.MARKER) is not None


def needs_gpu(item: pytest.Item) -> bool:
    if GPU_FIXTURE in getattr(item, "fixturenames", ()):
        return True
    return any(m.name in GPU_MARKERS for m in item.iter_markers())


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
    session = GpuPerfSession(config, settings)
    if settings.enabled and settings.against:
        try:
            session.against  # resolved now, so a bad revision is a usage error before any test runs
        except GpuPerfUsageError as exc:
            raise pytest.UsageError(str(exc)) from None
    config.stash[SESSION_KEY] = session
    config.pluginmanager.register(_RunHooks(session), "gpu_perf_run")
    _load_hypothesis_profile(config)


def _load_hypothesis_profile(config: pytest.Config) -> None:
    """Kernel tests compile on first call, so hypothesis must not impose a deadline."""
    from hypothesis import settings as hsettings

    from pytest_gpuperf.strategies import PROFILE, register_profile

    register_profile()
    if not config.getoption("hypothesis_profile", None):
        hsettings.load_profile(PROFILE)


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
    if s.settings.update_baselines:
        lines.append(f"gpu-perf: --gpu-perf-update-baselines: this run's measurements replace the stored baselines of {device.key}")
    return lines


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Reject bad markers at collection, naming the test, before any GPU time is spent."""
    settings = _session(config).settings
    for item in items:
        try:
            arch.requirements(item)
            settings.for_test(item)
        except GpuPerfUsageError as exc:
            raise pytest.UsageError(str(exc)) from None


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


# -- fixtures ---------------------------------------------------------------------
def _require_device(s: GpuPerfSession) -> DeviceInfo:
    """The session's GPU, or skip the test saying why there is none."""
    device = s.device
    if not isinstance(device, DeviceInfo):
        pytest.skip(SKIP_PREFIX + f"no GPU: {device.reason}")
    return device


@pytest.fixture(scope="session")
def gpu(request: pytest.FixtureRequest) -> DeviceInfo:
    """The GPU under test (skips the test when there is none)."""
    return _require_device(_session(request.config))


@pytest.fixture
def gpu_perf(request: pytest.FixtureRequest) -> Any:
    """Measure variants, assert speedups and check stored baselines (see ``GpuPerf``)."""
    from pytest_gpuperf.fixture import GpuPerf

    s = _session(request.config)
    if not s.settings.enabled:
        pytest.skip(PERF_OFF)
    _require_device(s)
    try:
        settings = s.settings.for_test(request.node)
    except GpuPerfUsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    return GpuPerf(s, request.node, settings)


COUNTERS_CACHE_KEY = pytest.StashKey[dict]()


@pytest.fixture
def gpu_counters(request: pytest.FixtureRequest) -> Any:
    """Nsight Compute counters of single kernel launches (see ``pytest_gpuperf.counters``).

    Skipped unless --gpu-perf-counters (independent of --gpu-perf), without a GPU, without
    ncu, or where the counters cannot be read (the skip says how to enable them).
    """
    from pytest_gpuperf.counters import CountersUnavailable, GpuCounters, find_ncu

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
def gpu_static(request: pytest.FixtureRequest) -> Any:
    """The compile-time tier, no GPU needed: ``gpu_static.check(module, arch)`` builds a
    ``CudaModule`` with nvcc and gates registers, spills, shared memory and stack against the
    budgets in ``<baselines>/static/``, ptxas performance warnings and SASS facts. Runs without
    --gpu-perf; skipped (saying how to install it) where nvcc is missing."""
    from pytest_gpuperf.compile.nvcc import NvccNotFound, find_nvcc
    from pytest_gpuperf.compile.static import INSTALL_HINT, GpuStatic

    try:
        find_nvcc()
    except NvccNotFound:
        pytest.skip(SKIP_PREFIX + f"static tier: nvcc not found; {INSTALL_HINT}")
    return GpuStatic(_session(request.config), request.node)


# -- results ----------------------------------------------------------------------
class _RunHooks:
    """Collects results from reports (so they survive pytest-xdist) and writes them out."""

    def __init__(self, session: GpuPerfSession):
        self.s = session
        self.outcomes: dict[str, str] = {}
        self.no_gpu: Counter[str] = Counter()  # tests skipped for want of a GPU, by role
        self.no_gpu_reason: str | None = None
        self.written: list[Any] = []  # outputs.Outcome of each file written at session end

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped and report.longrepr and isinstance(report.longrepr, tuple):
            reason = str(report.longrepr[2]).removeprefix("Skipped: ")
            if reason.startswith(SKIP_PREFIX):
                self.s.skip_reasons[reason[len(SKIP_PREFIX) :]] += 1
                if reason[len(SKIP_PREFIX) :].startswith("no GPU: "):
                    roles = [v for k, v in report.user_properties if k == ROLE_KEY]
                    self.no_gpu[roles[0] if roles else "other"] += 1
                    self.no_gpu_reason = reason[len(SKIP_PREFIX) + len("no GPU: ") :]
                self.outcomes[report.nodeid] = "skipped"
        if report.when != "call":
            if report.failed and report.nodeid in self.outcomes:
                self.outcomes[report.nodeid] = "error"
            return
        records = [value for key, value in report.user_properties if key == RECORD_KEY]
        if records:
            self.outcomes[report.nodeid] = report.outcome
        for record in records:
            self.s.collect(record)
            if record.get("kind") == "measurement" and not self.s.is_worker:
                from pytest_gpuperf.benchmark_interop import add_measurement

                add_measurement(self.s.config, record)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.s.is_worker:
            return
        from pytest_gpuperf.outputs import write_report

        settings = self.s.settings
        json_path = settings.json_path
        if json_path:  # first: whatever fails later, the run is on disk
            self.written.append(write_report(json_path, self._payload()))
        if settings.update_baselines:
            self.written.extend(self.s.write_baselines())
            if json_path and self.s.baseline_changes and not self.written[0].error:
                self.written[0] = write_report(json_path, self._payload())  # now with the changes
        if settings.plots_dir:
            self.written.append(self._write_plots(self._payload()))
        lost = any(o.error for o in self.written if o.what != "plots")  # charts are a convenience, not a record
        if lost and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _payload(self) -> dict[str, Any]:
        from pytest_gpuperf.provenance import provenance
        from pytest_gpuperf.report import build_json

        payload = build_json(
            records=self.s.records,
            outcomes=self.outcomes,
            skip_reasons=self.s.skip_reasons,
            changes=self.s.baseline_changes,
            settings={k: str(v) for k, v in vars(self.s.settings).items() if k != "sources"},
        )
        payload["provenance"] = provenance(self.s.config.rootpath)
        return payload

    def _write_plots(self, payload: dict[str, Any]) -> Any:
        """Charts per family and index.html (--gpu-perf-plots) from the report ``payload``; a
        missing matplotlib, or anything a chart cannot draw, is an outcome, not a crash."""
        from pytest_gpuperf.outputs import Outcome, attempt
        from pytest_gpuperf.plots import PlotsUnavailable, write_plots

        folder = self.s.settings.plots_dir
        assert folder is not None

        def draw() -> str:
            written = write_plots(payload, folder)
            return f"{len(written) - 1} chart(s) and index.html"

        try:
            return attempt("plots", folder, draw)
        except PlotsUnavailable as exc:
            return Outcome("plots", folder, str(exc))
        except Exception as exc:  # matplotlib's own errors on data it cannot draw
            return Outcome("plots", folder, f"{type(exc).__name__}: {exc}")

    def _static_summary(self, tr: Any) -> None:
        """The compile-time tier's rows, and which GPU parts a GPU-less run skipped."""
        from pytest_gpuperf.report import static_lines

        lines = static_lines(self.s.records, self.no_gpu, self.no_gpu_reason)
        if any(r["kind"] == "static" for r in self.s.records):
            tr.write_sep("=", "gpu-perf static checks")
        for line in lines:
            tr.write_line(line)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.s.is_worker:
            return
        from pytest_gpuperf.report import format_changes, health_lines, summary_rows, verdict_counts

        tr = terminalreporter
        rows = summary_rows(self.s.records)
        health = health_lines(self.s.records)
        if len(rows) > 1 or self.s.skip_reasons or health or any(o.error for o in self.written):
            tr.write_sep("=", "gpu-perf summary")
        if len(rows) > 1:
            widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
            for r in rows:
                tr.write_line("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
            counts = verdict_counts(self.s.records)
            tr.write_line("verdicts: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
        missing = [r["note"].split(" (looked in")[0] for r in self.s.records if r.get("note")]
        _write_listed(
            tr,
            f"{len(missing)} measurement(s) have no stored baseline for this GPU; "
            "record them with: pytest --gpu-perf --gpu-perf-update-baselines",
            missing,
        )
        shifted = [
            f"{r['test']}: {c['fast']} vs {c['baseline']} {c['speedup']:.4f}x, {c['verdict']}"
            for r in self.s.records
            if r["kind"] == "comparison" and (c := r["comparison"]).get("level_shift")
        ]
        _write_listed(
            tr,
            f"{len(shifted)} comparison(s) moved between levels during their run (clocks or power "
            "state); their margins need runs on several machines:",
            shifted,
        )
        if self.s.skip_reasons:
            tr.write_line("GPU parts skipped, and why:")
            for reason, n in self.s.skip_reasons.most_common():
                tr.write_line(f"  {n:4d} x {reason}")
        for line in health:
            tr.write_line(line)
        _write_listed(
            tr,
            f"baselines NOT recorded for {len(self.s.not_recorded)} measurement(s):",
            self.s.not_recorded,
        )
        if self.s.baseline_changes:
            tr.write_line(f"baselines updated ({len(self.s.baseline_changes)} entries):")
            for line in format_changes(self.s.baseline_changes):
                tr.write_line(line)
        self._static_summary(tr)
        for outcome in self.written:
            tr.write_line(outcome.line, red=bool(outcome.error))


def _write_listed(tr: Any, header: str, lines: list[str]) -> None:
    """``header`` and up to MAX_LISTED of ``lines`` (indented), if there are any lines."""
    if not lines:
        return
    tr.write_line(header)
    for line in lines[:MAX_LISTED]:
        tr.write_line("  " + line)
    if len(lines) > MAX_LISTED:
        tr.write_line(f"  ... and {len(lines) - MAX_LISTED} more (see the JSON report)")
