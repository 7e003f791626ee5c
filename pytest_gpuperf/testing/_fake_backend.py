"""A fake device and a fake timing backend (see ``pytest_gpuperf.testing``).

The fake takes samples in the order a GPU would (round by round, in each round's order),
stamps each with a simulated clock, and multiplies each variant's true time by the noise
models' factors for that sample, so budgets, statistics and verdicts are deterministic for a
seed and the noise can depend on time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from pytest_gpuperf._timing import streams
from pytest_gpuperf._timing.backend import Prepared
from pytest_gpuperf._timing.breakdown import Breakdown, KernelTime
from pytest_gpuperf._timing.code_images import COMPILER_INPUT
from pytest_gpuperf._timing.cupy_backend import check_captured_work
from pytest_gpuperf._timing.device import GIB, DeviceInfo
from pytest_gpuperf._timing.launch_identity import KernelIdentity, LaunchIdentity, NodeIdentity
from pytest_gpuperf._timing.results import CacheMode, ClockState, OtherActivity, OtherProcess, Variant
from pytest_gpuperf.testing import noise as noise_models

__all__ = ["FakeBackend", "fake_device"]

_BREAKDOWN_REPEATS = 30


def fake_device(
    compute_capability: tuple[int, int] = (9, 0),
    *,
    name: str = "Fake GPU",
    sm_count: int = 132,
    memory_gib: int = 80,
    l2_mib: int = 50,
    ordinal: int = 0,
) -> DeviceInfo:
    """A DeviceInfo for a GPU that does not exist."""
    return DeviceInfo(
        name=name,
        compute_capability=compute_capability,
        sm_count=sm_count,
        memory_bytes=memory_gib * GIB,
        l2_bytes=l2_mib * 2**20,
        ordinal=ordinal,
        pci_bus_id=f"0000:{ordinal:02x}:00.0",
        driver_version="0.0-fake",
        cuda_runtime_version="0.0",
        cuda_driver_version="0.0",
        cupy_version="none",
    )


class FakeBackend:
    """Seeded synthetic timings.

    ``times`` maps a variant name to its true per-launch seconds (or is a callable of the
    name); the reference kernels (``reference:copy``, ``reference:gemm``) take
    ``reference_s``. ``noise`` lists the models (``pytest_gpuperf.testing.noise``) every
    sample's time is multiplied by; without it, samples are log-normal with sigma ``spread``
    and a fraction ``outlier_rate`` is multiplied by ``outlier_factor``. ``throttled`` makes
    every clock reading report thermal slowdown. ``levels`` maps a variant name to
    ``(factor, from_s)``: once the simulated clock has passed ``from_s`` seconds, that variant
    takes ``factor`` times as long (a GPU that moved to another level during the run).

    The GPU's health and the ways a real GPU can yield a wrong number:
    - ``nvml=False``: clocks, throttling and other processes cannot be read; ``mig=True``: the
      GPU is partitioned (MIG);
    - ``other_processes``: dicts ``{"pid", "name", "sm_percent", "until_s"}`` of processes using
      the GPU (until ``until_s`` simulated seconds, or for ever); while any is busy every sample
      takes ``contended_factor`` times as long;
    - ``inject``: variant name to sample values returned instead of its first samples (NaN, inf,
      zero or negative values, as a broken timer or a cold-mode subtraction can give);
    - ``captured_work``: variant name to the GPU operations its capture held (0: an empty graph),
      ``escaped``: variant name to operations a stream trace found on other streams. Both are
      judged by the CuPy backend's own rule (``check_captured_work``).
    Launches are called the way the CuPy backend calls them: a launch taking one argument gets
    ``timing_stream``, a ``TimingStream`` with a fake handle. A launch with a ``fake_seconds``
    attribute takes that long whatever ``times`` says, so the code of a test decides its fake
    kernel's speed: another revision's build of the test (``--gpu-perf-against``, ``gpuperf
    bisect``) can then be slower or faster than the working tree's. Its ``fake_kernels``
    attribute (dicts with ``name``, ``share`` of the launch's time, and optionally ``grid``,
    ``block``, ``dynamic_smem``, ``registers``, ``static_smem``, ``local_bytes``) is what
    ``breakdown`` reports; without it a launch runs one kernel, ``fake_kernel``. Its
    ``fake_identity`` attribute is what ``launch_identity`` reads from it (``--gpu-perf-changed-only``):
    a list of graph nodes, each a dict with ``kind`` (default ``"kernel"``) and, for a kernel,
    ``name``, ``function`` (a loaded-function handle), ``code`` (a digest the plugin recorded, or
    None), ``grid``, ``block``, ``dynamic_smem``, ``attributes`` (a dict) and ``params`` (a list of
    hex strings, one per parameter, or None: unreadable); for another kind, ``detail`` (None:
    unreadable). A string instead of the list is why the launch could not be captured; a launch
    without the attribute cannot be read.
    """

    name = "fake"

    def __init__(
        self,
        times: Mapping[str, float] | Callable[[str], float] | None = None,
        *,
        default_s: float = 10e-6,
        spread: float = 0.01,
        outlier_rate: float = 0.0,
        outlier_factor: float = 1.5,
        seed: int = 0,
        throttled: bool = False,
        call_launch: bool = True,
        levels: Mapping[str, tuple[float, float]] | None = None,
        noise: Sequence[noise_models.Noise] | None = None,
        reference_s: float = 50e-6,
        nvml: bool = True,
        mig: bool = False,
        other_processes: Sequence[Mapping[str, Any]] = (),
        contended_factor: float = 2.0,
        inject: Mapping[str, Sequence[float]] | None = None,
        captured_work: Mapping[str, int] | None = None,
        escaped: Mapping[str, int] | None = None,
    ):
        self._times = times or {}
        self._default = default_s
        self.spread = spread
        self.outlier_rate = outlier_rate
        self.outlier_factor = outlier_factor
        self._rng = np.random.default_rng(seed)
        self._breakdown_rng = np.random.default_rng([seed, 1])  # breakdowns leave the samples' draws alone
        self._clock = 0.0
        self.throttled = throttled
        self._call_launch = call_launch
        if noise is None:
            noise = [noise_models.Lognormal(spread), noise_models.Outliers(outlier_rate, outlier_factor)]
        self._noise = list(noise) + [noise_models.Step(v, f, t) for v, (f, t) in (levels or {}).items()]
        self.reference_s = reference_s
        self._references: dict[str, Prepared] = {}
        self.prepared_names: list[str] = []
        self._nvml = nvml
        self._mig = mig
        self._others = [dict(p) for p in other_processes]
        self.contended_factor = contended_factor
        self._inject = {k: list(v) for k, v in (inject or {}).items()}
        self._captured = dict(captured_work or {})
        self._escaped = dict(escaped or {})
        self.timing_stream = streams.TimingStream(handle=0xF00D)

    def true_time(self, name: str) -> float:
        if name.startswith("reference:"):
            return self.reference_s
        if callable(self._times):
            return float(self._times(name))
        return float(self._times.get(name, self._default))

    def prepare(self, variant: Variant, cache: CacheMode, target_sample_s: float) -> Prepared:
        if self._call_launch:
            streams.bind(variant.launch, self.timing_stream)()
        self.prepared_names.append(variant.name)
        nodes = self._captured.get(variant.name, 1)
        escaped = self._escaped.get(variant.name, 0)
        trace = None
        if escaped:
            from pytest_gpuperf._timing.audit import StreamTrace

            trace = StreamTrace(on_stream=nodes, elsewhere={7: ["fake_side_kernel"] * escaped})
        check_captured_work(variant.name, "graph", nodes, trace)
        own = getattr(variant.launch, "fake_seconds", None)
        t = float(own) if own is not None else self.true_time(variant.name)
        batch = max(1, min(2048, math.ceil(target_sample_s / max(t, 1e-9))))
        return Prepared(variant=variant, mode=cache, method="fake", batch=batch, state=t, stream_audit="cupti")

    def run_rounds(
        self, prepared: Sequence[Prepared], rounds: int, orders: Sequence[Sequence[int]] | None = None
    ) -> list[list[float]]:
        order_list = [list(o) for o in orders] if orders else [list(range(len(prepared)))] * rounds
        slots = [i for order in order_list for i in order]
        names = [prepared[i].variant.name for i in slots]
        true = np.array([prepared[i].state for i in slots], dtype=np.float64)
        batch = np.array([prepared[i].batch for i in slots], dtype=np.float64)
        starts = self._clock + np.concatenate(([0.0], np.cumsum(true * batch)[:-1]))
        log_factor = np.zeros(len(slots))
        for model in self._noise:
            log_factor += model.log_factors(names, starts, self._rng)
        samples = true * np.exp(log_factor)
        if self._others:
            samples *= np.where([self._busy_at(t) for t in starts], self.contended_factor, 1.0)
        self._clock = float(starts[-1] + samples[-1] * batch[-1]) if len(slots) else self._clock
        out: list[list[float]] = [[] for _ in prepared]
        for i, value in zip(slots, samples.tolist(), strict=False):
            out[i].append(value)
        for p, values in zip(prepared, out, strict=False):
            injected = self._inject.get(p.variant.name, [])
            taken = injected[: len(values)]
            del injected[: len(taken)]
            values[: len(taken)] = taken
        return out

    def reference(self, kind: str) -> Prepared | None:
        """A prepared reference kernel (``copy`` or ``gemm``), as the CuPy backend gives."""
        if kind not in ("copy", "gemm"):
            return None
        if kind not in self._references:
            self._references[kind] = self.prepare(Variant(f"reference:{kind}", _no_work), "hot", 1e-3)
        return self._references[kind]

    def clock_state(self) -> ClockState | None:
        if not self._nvml:
            return None
        reasons = ("hw_thermal_slowdown",) if self.throttled else ()
        return ClockState(sm_clock_mhz=1980, mem_clock_mhz=2619, reasons=reasons, temperature_c=40)

    def health_unknown_reason(self) -> str | None:
        return None if self._nvml else "fake: NVML is not available"

    def _busy_at(self, t: float) -> bool:
        return any(t < float(p.get("until_s") or math.inf) for p in self._others)

    def other_activity(self, since: float) -> OtherActivity | None:
        if not self._nvml:
            return None
        present = tuple(
            OtherProcess(int(p["pid"]), str(p.get("name", "fake")), int(p.get("sm_percent", 90)))
            for p in self._others
            if float(p.get("until_s") or math.inf) > since
        )
        return OtherActivity(present, mig=self._mig)

    def now(self) -> float:
        return self._clock

    def pause(self, seconds: float) -> None:
        self._clock += seconds

    def release(self, prepared: Prepared) -> None:
        prepared.state = None

    def breakdown(self, variant: Variant) -> Breakdown | str:
        """Each of the launch's ``fake_kernels`` at its share of the variant's true time, with
        log-normal noise of sigma ``spread`` on each of 30 repeats."""
        own = getattr(variant.launch, "fake_seconds", None)
        total = float(own) if own is not None else self.true_time(variant.name)
        specs = getattr(variant.launch, "fake_kernels", None) or [{"name": "fake_kernel", "share": 1.0}]
        kernels = []
        for spec in specs:
            seconds = (
                total * float(spec["share"]) * np.exp(self._breakdown_rng.normal(0.0, self.spread, _BREAKDOWN_REPEATS))
            )
            kernels.append(
                KernelTime(
                    name=str(spec["name"]),
                    grid=tuple(spec.get("grid", (1, 1, 1))),
                    block=tuple(spec.get("block", (128, 1, 1))),
                    dynamic_smem=int(spec.get("dynamic_smem", 0)),
                    seconds=tuple(float(s) for s in seconds),
                    registers=spec.get("registers", 32),
                    static_smem=spec.get("static_smem", 0),
                    local_bytes=spec.get("local_bytes", 0),
                )
            )
        return Breakdown(tuple(kernels), launch_s=total, source="fake", repeats=_BREAKDOWN_REPEATS)

    def launch_identity(self, variant: Variant) -> tuple[LaunchIdentity, ...] | str:
        """Each launch's ``fake_identity`` (its launch, then its rotations), or why one has none."""
        out = []
        for launch in (variant.launch, *variant.rotations):
            spec = getattr(launch, "fake_identity", None)
            if spec is None:
                return "the fake launch carries no fake_identity"
            if isinstance(spec, str):
                return spec
            out.append(LaunchIdentity(tuple(_fake_node(node) for node in spec)))
        return tuple(out)


def _fake_node(spec: Mapping[str, Any]) -> NodeIdentity:
    kind = str(spec.get("kind", "kernel"))
    if kind != "kernel":
        detail = spec.get("detail")
        return NodeIdentity(kind, detail=tuple(detail) if isinstance(detail, list) else detail)
    params = spec.get("params", [])
    return NodeIdentity(
        kind,
        kernel=KernelIdentity(
            name=str(spec.get("name", "fake_kernel")),
            function=int(spec.get("function", 0)),
            grid=_dims(spec.get("grid", (1, 1, 1))),
            block=_dims(spec.get("block", (128, 1, 1))),
            dynamic_smem=int(spec.get("dynamic_smem", 0)),
            code=spec.get("code"),
            code_basis=COMPILER_INPUT if spec.get("code") is not None else "",
            attributes=tuple(sorted(dict(spec.get("attributes", {})).items())),
            params=None if params is None else tuple((8 * i, bytes.fromhex(p)) for i, p in enumerate(params)),
            params_unreadable="" if params is not None else "the fake node's parameters are unreadable",
        ),
    )


def _dims(value: Any) -> tuple[int, int, int]:
    x, y, z = (int(v) for v in value)
    return x, y, z


def _no_work() -> None:
    pass
