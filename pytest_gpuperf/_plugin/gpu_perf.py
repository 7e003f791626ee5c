"""The ``gpu_perf`` fixture: measure variants, assert speedups, check stored baselines."""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable, Hashable, Iterator
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import pytest

from pytest_gpuperf._gates.regression import check_against, check_regression
from pytest_gpuperf._gates.verdict import Verdict
from pytest_gpuperf._plugin.breakdowns import Breakdowns
from pytest_gpuperf._plugin.options import Settings
from pytest_gpuperf._plugin.session import RECORD_KEY, SKIP_PREFIX, GpuPerfSession
from pytest_gpuperf._report.records import MeasurementRecord, Record
from pytest_gpuperf._report.summary import format_against_failure, format_comparison_failure, format_regression_failure
from pytest_gpuperf._store.baselines import BaselineEntry
from pytest_gpuperf._timing import sampler
from pytest_gpuperf._timing.device import DeviceInfo
from pytest_gpuperf._timing.results import Comparison, Measurement, Variant
from pytest_gpuperf.errors import BaselineFileError, GateFailure, GpuContended, GpuPerfError


class GpuPerfInconclusive(UserWarning):
    """A gate could be neither confirmed nor refuted: too noisy, a level shift, or a contended GPU."""


T = TypeVar("T")


class GpuPerf:
    """Bound to one test: every result is recorded on the test's report."""

    def __init__(self, session: GpuPerfSession, item: pytest.Item, settings: Settings):
        self._session = session
        self._item = item
        self.settings = settings
        device = session.device
        assert isinstance(device, DeviceInfo)
        self.device: DeviceInfo = device
        self._module = _module_path(item)
        self._test_key = item.nodeid.split("::", 1)[1] if "::" in item.nodeid else item.name
        self._pairing: Any = None  # REV's variants of this test (--gpu-perf-against), built on first use
        self._breakdowns = Breakdowns(session.backend, session.gpu_lock, item.config.rootpath, settings.binaries)
        self._shared: dict[Hashable, Any] = {}
        self._timed_because: str | None = None  # --gpu-perf-changed-only: why this test is timed
        self._deciding_s = 0.0  # --gpu-perf-changed-only: wall seconds its decision took

    # -- public API -------------------------------------------------------------------
    def measure(self, variant: Variant, *, check_baseline: bool = True) -> Measurement:
        """Time ``variant``; when ``check_baseline``, fail on a significant slowdown vs the stored
        baseline (or, under ``--gpu-perf-against REV``, vs the same variant built from REV)."""
        if check_baseline:
            self._baseline_file_readable()
        self._end_if_identical()
        if check_baseline and self._rev_variant(variant) is not None:
            pair = self._against(variant)
            failure = self._record_measurement(pair.fast, True, pair, variant)
            self._stop_if_contended(pair.fast)
            if failure:
                raise GateFailure(failure)
            return pair.fast
        policy = self._session.policy(self.settings)
        with self._timing(repr(variant.name), policy.budget_s) as on_rounds:
            m = sampler.measure(
                self._session.backend,
                variant,
                policy,
                self.settings.cache,
                self.device.key,
                self._session.guard,
                self._session.reference_for(variant, self.settings) if check_baseline else None,
                on_rounds,
            )
        failure = self._record_measurement(m, check_baseline, variant=variant)
        self._stop_if_contended(m)
        if failure:
            raise GateFailure(failure)
        return m

    def assert_speedup(self, fast: Variant, baseline: Variant, at_least: float | None) -> Comparison:
        """Measure both variants interleaved and assert ``t(baseline) / t(fast) >= at_least``.

        ``at_least=None`` measures and records the speedup without gating (for an
        architecture with no measured margin). Both variants are also checked against
        their stored baselines.
        """
        if fast.name == baseline.name:
            fast, baseline = fast.renamed(fast.name + "#a"), baseline.renamed(baseline.name + "#b")
        if at_least is not None and not at_least > 0:
            raise ValueError(f"assert_speedup: at_least must be a positive ratio such as 1.10, got {at_least!r}")
        self._baseline_file_readable()
        self._end_if_identical()
        policy = self._session.policy(self.settings)
        with self._timing(f"{fast.name!r} vs {baseline.name!r}", policy.budget_s) as on_rounds:
            c = sampler.compare(
                self._session.backend,
                fast,
                baseline,
                policy,
                at_least,
                self.settings.cache,
                self.device.key,
                self._session.guard,
                self._session.reference_for(fast, self.settings),
                on_rounds,
            )
        pairs = {v.name: self._against(v) for v in (fast, baseline) if self._rev_variant(v) is not None}
        variants = {fast.name: fast, baseline.name: baseline}
        failures = [
            f
            for f in (
                self._record_measurement(m, True, pairs.get(m.name), variants[m.name]) for m in (c.fast, c.baseline)
            )
            if f
        ]
        summary = c.summary() | {"gpu_seconds": c.wall_s, "budget_s": policy.budget_s}
        if c.verdict is Verdict.INCONCLUSIVE:
            summary["on_inconclusive"] = self.settings.inconclusive
        explained: list[str] = []
        if (
            c.verdict in (Verdict.FAIL, Verdict.INCONCLUSIVE)
            and self.settings.breakdown != "off"
            and not c.fast.contended
        ):
            summary["breakdowns"], explained = self._breakdowns.sides(variants)
        self._emit({"kind": "comparison", "test": self._item.nodeid, "comparison": summary})
        self._stop_if_contended(c.fast)
        if c.verdict in (Verdict.FAIL, Verdict.INCONCLUSIVE):  # a measured claim (no margin) has no failure text
            text = "\n".join([format_comparison_failure(c), *explained])
            if c.verdict is Verdict.FAIL:
                failures.insert(0, text)
            else:
                failures[:0] = self._undecided(text)
        if failures:
            raise GateFailure("\n\n".join(failures))
        return c

    def record(self, key: str, value: float, unit: str = "") -> None:
        """Attach an extra figure (bandwidth fraction, TFLOP/s, ratio to a library) to the report."""
        self._emit({"kind": "figure", "test": self._item.nodeid, "key": key, "value": float(value), "unit": unit})

    def copy_bandwidth(self) -> float:
        """This GPU's measured device-to-device copy bandwidth, bytes/s (read + write counted)."""
        return self._session.copy_bandwidth()

    def shared(self, key: Hashable, make: Callable[[], T]) -> T:
        """``make()``, called once per ``key`` in this test. Under --gpu-perf-against, the other
        revision's build of this test gets the same object for the same key, so both sides time
        their kernels on the same buffers: a kernel whose time depends on where its inputs landed
        (their addresses) then shows no difference between the revisions that the code did not
        make. Share plain arrays, not objects of the project's own classes, which the two
        revisions may define differently. A revision whose test does not call ``shared`` makes
        its own."""
        if key not in self._shared:
            self._shared[key] = make()
        value: T = self._shared[key]
        return value

    # -- internals --------------------------------------------------------------------
    def _end_if_identical(self) -> None:
        """Under --gpu-perf-changed-only, decide once per test (``changed_only.decide``): a test
        proven the same as at REV emits one ``identical`` record per variant and ends here, as
        passed (``IdenticalToRev``); otherwise the reason goes into every record it makes."""
        revision = self._session.against
        if not self.settings.changed_only or revision is None or self._timed_because is not None:
            return
        from pytest_gpuperf._plugin import changed_only

        started = time.perf_counter()
        collected = changed_only.collect_calls(self._item, self)
        now_calls, now_variants = (collected, {}) if isinstance(collected, str) else collected
        first = next(iter(now_variants.values()), None)
        if first is not None:
            paired = time.perf_counter()
            self._rev_variant(first)  # REV's pairing, built once (timing against REV needs it anyway)
            started += time.perf_counter() - paired
        pairing = self._pairing
        read = getattr(self._session.backend, "launch_identity", None)

        def read_locked(variant: Variant) -> Any:
            assert read is not None
            with self._session.gpu_lock():
                return read(variant)

        decision = changed_only.decide(
            rev_root=revision.root,
            label=revision.label,
            commit=revision.commit,
            module=self._module,
            rootdir=self._item.config.rootpath,
            now_calls=now_calls,
            now_variants=now_variants,
            rev_calls=pairing.calls if pairing is not None else (),
            rev_variants=pairing.variants if pairing is not None else {},
            rev_stopped=pairing.stopped if pairing is not None else "",
            unpaired=pairing.reason if pairing is not None else "the test builds no variant",
            read=read_locked if read is not None else None,
        )
        self._deciding_s = time.perf_counter() - started
        if isinstance(decision, str):
            self._timed_because = decision
            return
        self._timed_because = ""
        for name in decision.proofs:
            self._emit(
                {
                    "kind": "identical",
                    "test": self._item.nodeid,
                    "module": self._module,
                    "key": f"{self._test_key}::{name}",
                    "variant": name,
                    "verdict": str(Verdict.PASS),
                    "identical_to": decision.to_json(name),
                    "note": decision.note(name),
                    "deciding_s": self._deciding_s,
                }
            )
        raise changed_only.IdenticalToRev(decision.note(next(iter(decision.proofs))))

    def _baseline_file_readable(self) -> None:
        """A stored baseline file that cannot be read fails the test before any timing, in one line."""
        if self.settings.update_baselines:
            return
        try:
            self._session.store.load(self.device.key, self._module)
        except GpuPerfError as exc:
            pytest.fail(str(exc), pytrace=False)

    def _rev_variant(self, variant: Variant) -> Variant | None:
        """``variant``'s namesake built from ``--gpu-perf-against``'s revision, or None."""
        revision = self._session.against
        if revision is None:
            return None
        if self._pairing is None:
            from pytest_gpuperf._plugin.against import pair

            funcargs = getattr(self._item, "funcargs", {})
            self._pairing = pair(
                revision, self._module, self._test_key, funcargs, self, getattr(self._item, "_request", None)
            )
        found: Variant | None = self._pairing.variants.get(variant.name)
        return found

    def _against(self, variant: Variant) -> Comparison:
        """``variant`` timed interleaved with its REV namesake: speedup = t(REV) / t(now)."""
        rev = self._rev_variant(variant)
        assert rev is not None
        policy = self._session.policy(self.settings)
        with self._timing(f"{variant.name!r} vs {self._session.against_label}", policy.budget_s) as on_rounds:
            return sampler.compare(
                self._session.backend,
                variant,
                rev.renamed(variant.name + "@rev"),
                policy,
                None,
                self.settings.cache,
                self.device.key,
                self._session.guard,
                on_rounds=on_rounds,
            )

    @contextlib.contextmanager
    def _timing(self, label: str, budget_s: float) -> Iterator[sampler.OnRounds | None]:
        """Show the live status (from the wait for the GPU on), hold the GPU, stop the test if
        another process contends for it."""
        with (
            self._session.live_status(self._test_key, label, budget_s) as on_rounds,
            self._session.gpu_lock(),
            self._contention_stops_the_test(),
        ):
            yield on_rounds

    def _undecided(self, text: str) -> list[str]:
        """An undecided gate: a failure under --gpu-perf-inconclusive=fail, else a warning."""
        if self.settings.inconclusive == "fail":
            return [text]
        warnings.warn(GpuPerfInconclusive(text), stacklevel=3)
        return []

    def _stop_if_contended(self, m: Measurement) -> None:
        """A measurement shared with other processes ends the test: skipped (or failed under
        --gpu-perf-inconclusive=fail), so no assertion on its numbers blames the code."""
        if m.contended:
            self._stop_contended(
                f"contended: {m.name!r} was measured while other processes used the GPU "
                f"({m.health.describe_contention()})"  # type: ignore[union-attr]
            )

    @contextlib.contextmanager
    def _contention_stops_the_test(self) -> Iterator[None]:
        try:
            yield
        except GpuContended as exc:
            self._stop_contended(f"contended: {exc}")

    def _stop_contended(self, text: str) -> NoReturn:
        if self.settings.inconclusive == "fail":
            raise GateFailure(text + "; rerun on a quiet GPU")
        pytest.skip(SKIP_PREFIX + text + "; its numbers are neither judged nor stored")

    def _emit(self, record: Record) -> None:
        self._item.user_properties.append((RECORD_KEY, record))

    def _record_measurement(
        self, m: Measurement, check_baseline: bool, pair: Comparison | None = None, variant: Variant | None = None
    ) -> str | None:
        """Record ``m`` (of ``variant``) and judge it against its REV namesake (``pair``) or its
        stored baseline; return a failure message or None. A check that fails or is undecided
        carries the kernel breakdown of both sides (``--gpu-perf-breakdown``)."""
        key = f"{self._test_key}::{m.name}"
        store = self._session.store
        consult = check_baseline and not self.settings.update_baselines and pair is None
        entry = store.lookup(self.device.key, self._module, key) if consult else None
        record: MeasurementRecord = {
            "kind": "measurement",
            "test": self._item.nodeid,
            "module": self._module,
            "key": key,
            "device": self.device.fingerprint(),
            "measurement": m.summary(),
            "samples": list(m.samples),
            "baseline": entry.to_json() if entry else None,
            "regression": None,
            "verdict": str(Verdict.MEASURED),
            "budget_s": self._session.policy(self.settings).budget_s,
        }
        if self._timed_because:
            record["timed_because"] = self._timed_because
            record["deciding_s"] = self._deciding_s
        failure = None
        if m.contended:
            record["verdict"] = str(Verdict.CONTENDED)
            record["on_inconclusive"] = self.settings.inconclusive
            self._emit_measurement(record, variant)
            return None
        explain = variant if self.settings.breakdown != "off" else None  # the variant to break down
        if self.settings.update_baselines:
            record["verdict"] = str(Verdict.RECORDED)
            if explain is not None:
                record["breakdown"] = self._breakdowns.json(explain)
            try:
                old = store.lookup(self.device.key, self._module, key)
            except BaselineFileError:  # the update refuses to write that file, and says so at the end
                old = None
            kept = self._levels_kept(m, old)
            if kept is not None:
                record["levels"] = kept
        elif pair is not None:
            check = check_against(pair, self.settings.tolerance)
            record["regression"] = check.summary() | {
                "against": self._session.against_label,
                "gpu_seconds": pair.wall_s,
            }
            record["verdict"] = str(check.verdict)
            if check.verdict in (Verdict.FAIL, Verdict.INCONCLUSIVE):
                text = format_against_failure(pair, check, self._session.against_label)
                rev = self._rev_variant(explain) if explain is not None else None
                if explain is not None and rev is not None:
                    revision = self._session.against
                    assert revision is not None
                    now, then, binaries, lines = self._breakdowns.against(
                        explain, rev.renamed(explain.name + "@rev"), self._session.against_label, revision.root
                    )
                    record["breakdown"], record["breakdown_against"] = now, then
                    if binaries:
                        record["kernel_binaries"] = binaries
                    text = "\n".join([text, *lines])
                if check.verdict is Verdict.INCONCLUSIVE:
                    record["on_inconclusive"] = self.settings.inconclusive
                self._emit_measurement(record, variant)
                return text if check.verdict is Verdict.FAIL else next(iter(self._undecided(text)), None)
        elif check_baseline and entry is None:
            path = store.path_for(self.device.key, self._module)
            message = (
                f"no stored baseline for {key!r} on {self.device.key} (looked in {path}); "
                "record one with: pytest --gpu-perf --gpu-perf-update-baselines"
            )
            record["note"] = message + self._unpaired_note()
            self._emit_measurement(record, variant)
            if self.settings.missing_baseline == "fail":
                return message
            if self.settings.missing_baseline == "skip":
                pytest.skip(message)
            return None
        elif entry is not None:
            check = check_regression(m, entry, self.settings.tolerance, self.settings.bands)
            verdict = check.verdict
            # inside a speedup claim the variant's wall_s is 0: the claim's gpu_seconds covers it
            record["regression"] = check.summary() | {"gpu_seconds": m.wall_s or None}
            record["verdict"] = str(verdict)
            if verdict in (Verdict.FAIL, Verdict.INCONCLUSIVE):
                text = format_regression_failure(
                    m, entry, check, self.device.key, store.path_for(self.device.key, self._module)
                )
                if explain is not None:
                    record["breakdown"], lines = self._breakdowns.baseline(explain, entry.extra.get("breakdown"))
                    text = "\n".join([text, *lines])
                if verdict is Verdict.FAIL:
                    failure = text
                else:
                    record["on_inconclusive"] = self.settings.inconclusive
                    self._emit_measurement(record, variant)
                    undecided = self._undecided(text)
                    return undecided[0] if undecided else None
        self._emit_measurement(record, variant)
        return failure

    def _emit_measurement(self, record: MeasurementRecord, variant: Variant | None) -> None:
        """Emit ``record``, with the variant's breakdown under --gpu-perf-breakdown=all (not for a
        contended measurement: the GPU is someone else's)."""
        wanted = self.settings.breakdown == "all" and record["verdict"] != str(Verdict.CONTENDED)
        if wanted and variant is not None and "breakdown" not in record:
            record["breakdown"] = self._breakdowns.json(variant)
        self._emit(record)

    def _levels_kept(self, m: Measurement, old: BaselineEntry | None) -> dict[str, Any] | None:
        """The stored levels of the entry ``m`` replaces, when ``m`` sits at one of them (so they
        still describe the kernel); otherwise the update drops them and says so."""
        if old is None or old.levels() is None:
            return None
        check = check_regression(m, old, self.settings.tolerance, self.settings.bands)
        return dict(old.extra["levels"]) if check.levels and check.verdict is Verdict.PASS else None

    def _unpaired_note(self) -> str:
        if self._session.against is None or self._pairing is None or not self._pairing.reason:
            return ""
        return f"; not paired with {self._session.against_label}: {self._pairing.reason}"


def _module_path(item: pytest.Item) -> str:
    """The test module's path relative to the rootdir; a module outside it keeps its absolute path
    (never just its file name, which another folder's module may share)."""
    path = Path(item.path).resolve()
    try:
        return path.relative_to(item.config.rootpath.resolve()).as_posix()
    except ValueError:
        return "outside-rootdir/" + path.as_posix().lstrip("/")
