"""The run's results: collected from test reports (so they survive pytest-xdist), shown as
progress under ``-v``, written out at session end, and summed up in the terminal summary."""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_gpuperf._plugin.changed_only import IdenticalToRev
from pytest_gpuperf._plugin.session import RECORD_KEY, SKIP_PREFIX
from pytest_gpuperf._plugin.termination import Termination
from pytest_gpuperf._report.records import Record, is_record

if TYPE_CHECKING:
    from pytest_gpuperf._plugin.session import GpuPerfSession

ROLE_KEY = "gpu_perf_role"  # user property on a test skipped for want of a GPU: "perf" or "gpu"
MAX_LISTED = 10  # missing-baseline notes and shifted comparisons listed in the terminal summary
FAILURE_CHARS = 20_000  # of a failed perf test's message kept in the JSON report


class RunHooks:
    """Collects results from reports (so they survive pytest-xdist) and writes them out."""

    def __init__(self, session: GpuPerfSession):
        self.s = session
        self.outcomes: dict[str, str] = {}
        self.failures: dict[str, str] = {}  # a failed perf test's message, for the JSON report
        self.termination = Termination()
        self.interrupted: str | None = None  # why the run ended early, for the JSON report
        self.no_gpu: Counter[str] = Counter()  # tests skipped for want of a GPU, by role
        self.no_gpu_reason: str | None = None
        self.written: list[Any] = []  # outputs.OutputOutcome of each file written at session end
        self.timing_off = 0  # perf tests skipped because --gpu-perf is off

    @pytest.hookimpl(wrapper=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function) -> Generator[None, object, object]:
        """A test that ``--gpu-perf-changed-only`` proved the same as at the revision ends with
        ``IdenticalToRev``; it passes (its records say why it was not timed)."""
        try:
            return (yield)
        except IdenticalToRev:
            return True

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.skipped and report.longrepr and isinstance(report.longrepr, tuple):
            reason = str(report.longrepr[2]).removeprefix("Skipped: ")
            if reason.startswith(SKIP_PREFIX):
                self.s.skip_reasons[reason[len(SKIP_PREFIX) :]] += 1
                if reason[len(SKIP_PREFIX) :].startswith("perf test, timing is off"):
                    self.timing_off += 1
                if reason[len(SKIP_PREFIX) :].startswith("no GPU: "):
                    roles = [str(v) for k, v in report.user_properties if k == ROLE_KEY]
                    self.no_gpu[roles[0] if roles else "other"] += 1
                    self.no_gpu_reason = reason[len(SKIP_PREFIX) + len("no GPU: ") :]
                self.outcomes[report.nodeid] = "skipped"
        if report.when != "call":
            if report.failed and report.nodeid in self.outcomes:
                self.outcomes[report.nodeid] = "error"
            return
        records = [value for key, value in report.user_properties if key == RECORD_KEY and is_record(value)]
        if records:
            self.outcomes[report.nodeid] = report.outcome
            if report.failed:
                self.failures[report.nodeid] = failure_text(report)
        for record in records:
            self.s.collect(record)
        if records and not self.s.is_worker and self.s.config.get_verbosity() > 0:
            self._progress(records)

    def _progress(self, records: list[Record]) -> None:
        from pytest_gpuperf._report.summary import progress_lines

        tr = self.s.config.pluginmanager.get_plugin("terminalreporter")
        if tr is None:
            return
        for record in records:
            for line in progress_lines(record):
                tr.write_line(line)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.s.settings.enabled and not self.s.is_worker:
            self.termination.install()

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self.termination.uninstall()
        self.s.close_live()
        if self.s.is_worker:
            return
        if session.exitstatus == pytest.ExitCode.INTERRUPTED:
            self.interrupted = self.termination.received or "interrupted"
        from pytest_gpuperf._report.outputs import write_report

        settings = self.s.settings
        json_path = settings.json_path
        if json_path:  # first: whatever fails later, the run is on disk
            self.written.append(write_report(json_path, self._payload()))
        if settings.update_baselines:
            self.written.extend(self.s.write_baselines())
            if json_path and (self.s.baseline_changes or self.s.not_recorded) and not self.written[0].error:
                self.written[0] = write_report(json_path, self._payload())  # now with what was (not) stored
        if settings.plots_dir:
            self.written.append(self._write_plots(self._payload()))
        lost = any(o.error for o in self.written if o.what != "plots")  # charts are a convenience, not a record
        if lost and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def _payload(self) -> dict[str, Any]:
        from pytest_gpuperf._report.provenance import provenance
        from pytest_gpuperf._report.summary import build_json

        payload = build_json(
            records=self.s.records,
            outcomes=self.outcomes,
            failures=self.failures,
            skip_reasons=self.s.skip_reasons,
            changes=self.s.baseline_changes,
            settings=self.s.settings.to_json(),
        )
        payload["provenance"] = provenance(self.s.config.rootpath)
        payload["interrupted"] = self.interrupted
        return payload

    def _write_plots(self, payload: dict[str, Any]) -> Any:
        """Charts per family and index.html (--gpu-perf-plots) from the report ``payload``; a
        missing matplotlib, or anything a chart cannot draw, is an outcome, not a crash."""
        from pytest_gpuperf._report.outputs import OutputOutcome, attempt
        from pytest_gpuperf._report.plots import PlotsUnavailable, write_plots

        folder = self.s.settings.plots_dir
        assert folder is not None

        def draw() -> str:
            written = write_plots(payload, folder)
            return f"{len(written) - 1} chart(s) and index.html"

        try:
            return attempt("plots", folder, draw)
        except PlotsUnavailable as exc:
            return OutputOutcome("plots", folder, str(exc))
        except Exception as exc:  # matplotlib's own errors on data it cannot draw
            return OutputOutcome("plots", folder, f"{type(exc).__name__}: {exc}")

    def _static_summary(self, tr: Any) -> None:
        """The compile-time tier's rows, and which GPU parts a GPU-less run skipped."""
        from pytest_gpuperf._report.summary import static_lines

        no_gpu = self.no_gpu + (
            Counter({"timing off": self.timing_off}) if self.no_gpu and self.timing_off else Counter()
        )
        lines = static_lines(self.s.records, no_gpu, self.no_gpu_reason)
        if any(r["kind"] == "static" for r in self.s.records):
            tr.write_sep("=", "gpu-perf static checks")
        for line in lines:
            tr.write_line(line)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.s.is_worker:
            return
        from pytest_gpuperf._report.summary import (
            changed_only_lines,
            format_changes,
            health_lines,
            summary_rows,
            time_lines,
            verdict_counts,
        )
        from pytest_gpuperf._report.table import text_table
        from pytest_gpuperf._report.undecided import blind_lines, groups, undecided

        tr = terminalreporter
        rows = summary_rows(self.s.records)
        health = health_lines(self.s.records)
        inconclusive = groups(undecided(self.s.records, self.s.settings.inconclusive))
        if len(rows) > 1 or self.s.skip_reasons or health or inconclusive or any(o.error for o in self.written):
            tr.write_sep("=", "gpu-perf summary")
        if len(rows) > 1:
            for line in text_table(rows).splitlines():
                tr.write_line(line)
            counts = verdict_counts(self.s.records)
            tr.write_line("verdicts: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
        for line in changed_only_lines(self.s.records):
            tr.write_line(line)
        for heading, group in inconclusive:  # every one: an undecided result passes, so this is where it shows
            tr.write_line(heading + ":", **({"red": True} if group[0].failed else {"yellow": True}))
            for entry in group:
                tr.write_line("  " + entry.line)
        for line in blind_lines(self.s.records):
            tr.write_line(line)
        if self.s.records:  # the statistics load only for a run that timed something
            from pytest_gpuperf._report.sight import unseen_lines

            for line in unseen_lines(self.s.records, self.s.settings.tolerance):
                tr.write_line(line)
        missing = [
            r["note"].split(" (looked in")[0] for r in self.s.records if r["kind"] == "measurement" and "note" in r
        ]
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
            f"{len(shifted)} comparison(s) moved between levels during their run (a clock, power state or "
            "buffer placement of one variant's own); no gate decides on such a run:",
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
        for line in time_lines(self.s.records):
            tr.write_line(line)


def _write_listed(tr: Any, header: str, lines: list[str]) -> None:
    """``header`` and up to MAX_LISTED of ``lines`` (indented), if there are any lines."""
    if not lines:
        return
    tr.write_line(header)
    for line in lines[:MAX_LISTED]:
        tr.write_line("  " + line)
    if len(lines) > MAX_LISTED:
        tr.write_line(f"  ... and {len(lines) - MAX_LISTED} more (see the JSON report)")


def failure_text(report: pytest.TestReport) -> str:
    """What a failed test's exception said, as pytest shows it after ``E`` (the whole message of a
    gate's failure, without the traceback), cut at ``FAILURE_CHARS``."""
    crash = getattr(report.longrepr, "reprcrash", None)
    text = str(crash.message) if crash is not None else report.longreprtext
    if len(text) > FAILURE_CHARS:
        text = text[:FAILURE_CHARS] + f"\n[{len(text) - FAILURE_CHARS:,} more characters left out]"
    return text
