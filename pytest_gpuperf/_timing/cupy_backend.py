"""GPU timing with CUDA events and CUDA-graph replay, on a CuPy stream.

One sample is one replay of a graph holding ``batch`` launches, timed by an event pair on
the launching stream, divided by ``batch``: launch overhead (several µs from Python)
stays out of the number, which matters below ~20 µs. Samples are enqueued a round at a
time behind an untimed warm replay and read after one synchronize, so the GPU never
idles inside an event pair.

Cold mode needs every launch to find its inputs outside L2. Three ways, best first:
rotate input copies the Variant provides (no extra work at all); nothing, when one launch
moves at least 4x the L2 size (it evicts its own data); otherwise flush L2 before every
launch by writing a buffer twice the L2 size. In a graph the flush cannot sit outside the
event pair, so flushed samples time a graph of (flush, launch) x batch and subtract an
interleaved graph of flush x batch; that subtraction adds noise of a few percent per
sample for kernels of a few microseconds, which the interval reports.

When a callable cannot be captured (it synchronizes, allocates, or uses a launch that
graphs refuse), timing falls back to event pairs around eager launches; the result's
``method`` says which was used.

Launches run with the timing stream current in every framework the process imported
(``streams.current``: CuPy, PyTorch and so Triton), or are handed it (``lambda stream: ...``).
Work that still lands elsewhere is an error, never a short number:
- the timing stream is a *blocking* stream, so a launch on the legacy default stream during
  capture fails the capture (CUDA refuses the implicit dependency) and is reported;
- a captured graph with no kernel, copy or memset node timed nothing and is reported;
- where torch is imported, CUPTI traces one launch (``audit``): operations on other streams
  that the graph lacks are reported, however short;
- the device must drain with the timing stream (escaped work of more than ~0.2 ms).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_gpuperf._timing import audit, graphs, streams
from pytest_gpuperf._timing.backend import Prepared
from pytest_gpuperf._timing.breakdown import Breakdown
from pytest_gpuperf._timing.device import DeviceInfo
from pytest_gpuperf._timing.health import LOOKBACK_S
from pytest_gpuperf._timing.launch_identity import LaunchIdentity
from pytest_gpuperf._timing.nvml import GpuMonitor
from pytest_gpuperf._timing.results import CacheMode, ClockState, OtherActivity, Variant
from pytest_gpuperf.errors import GpuPerfError

MAX_BATCH = 2048
STREAM_CHECK_LAUNCHES = 3
ESCAPE_MIN_S = 200e-6  # a device-wide synchronize itself costs tens of microseconds
ESCAPE_FRACTION = 0.5
COLD_BY_SIZE = 4  # launches moving this many times the L2 size find nothing of theirs left in it
WARMUP_LAUNCHES = 3
ESTIMATE_LAUNCHES = 10
REFERENCE_SAMPLE_S = 0.5e-3  # reference samples are shorter than the variants': they only calibrate
REFERENCE_GEMM_N = 4096  # fp16 4096^3 on the tensor cores: ~0.2 ms on an H100


@dataclass
class _Segment:
    """Work timed by one event pair; ``sign`` -1 marks the flush-only graph subtracted in cold mode."""

    run: Callable[[], None]
    sign: int
    prefix: Callable[[], None] | None = None  # untimed work enqueued before the start event
    keep: Any = None  # the captured graph the segment replays, kept alive with it


class CupyBackend:
    name = "cupy"

    def __init__(self, device: DeviceInfo):
        import cupy

        self._cp = cupy
        self._device = cupy.cuda.Device(device.ordinal)
        self._info = device
        with self._device:
            # Blocking: a launch on the legacy default stream while this stream captures is refused
            # by CUDA (cudaErrorStreamCaptureImplicit) instead of silently missing from the graph.
            self._stream = cupy.cuda.Stream(non_blocking=False)
        self.timing_stream = streams.TimingStream(int(self._stream.ptr), device.ordinal, self._stream)
        self._flush_buf: Any = None
        self._mark_buf: Any = None
        self._references: dict[str, Prepared] = {}
        self._monitor = GpuMonitor(device.pci_bus_id)

    # -- helpers --------------------------------------------------------------------
    def _flush(self) -> None:
        cp = self._cp
        if self._flush_buf is None:
            self._flush_buf = cp.empty(2 * max(self._info.l2_bytes, 1 << 20), dtype=cp.uint8)
        cp.cuda.runtime.memsetAsync(self._flush_buf.data.ptr, 0x5A, self._flush_buf.nbytes, self._stream.ptr)

    def _sync(self, what: str) -> None:
        try:
            self._stream.synchronize()
        except Exception as exc:
            raise GpuPerfError(f"CUDA error while {what}: {exc}") from exc

    def _timed(self, fn: Callable[[], None], repeats: int) -> float:
        """Seconds per call of ``fn`` over ``repeats`` eager calls behind a warm call."""
        cp = self._cp
        start, end = cp.cuda.Event(), cp.cuda.Event()
        fn()
        start.record(self._stream)
        for _ in range(repeats):
            fn()
        end.record(self._stream)
        end.synchronize()
        return float(cp.cuda.get_elapsed_time(start, end)) * 1e-3 / repeats

    def _trial_capture(self, launch: Callable[[], Any], name: str) -> float | None:
        """Capture one launch through CuPy and count its GPU operations (None: unreadable).

        A launch sent to the legacy default stream fails here (the timing stream is blocking) and
        is reported as escaped. The trial uses CuPy's capture even where torch is in use: a capture
        that fails inside torch's graph API leaves torch's random-number state inconsistent.
        """
        try:
            return graphs.capture_cupy(self._stream, launch, upload=False).work_nodes
        except Exception as exc:
            escape = capture_escape(str(exc))
            if escape:
                self._sync(f"recovering from the capture of variant {name!r}")
                raise GpuPerfError(f"variant {name!r}: {escape} ({_first_line(exc)}). {ESCAPE_ADVICE}") from None
            raise

    def _capture(self, body: Callable[[], None]) -> graphs.Captured:
        """Capture ``body`` (torch's graph API where torch is in use: it keeps allocations graph-safe)."""
        if streams.torch_in_use():
            return graphs.capture_torch(self.timing_stream.torch(), body)
        return graphs.capture_cupy(self._stream, body)

    # -- TimingBackend -------------------------------------------------------------
    def prepare(self, variant: Variant, cache: CacheMode, target_sample_s: float, warmup_s: float = 0.05) -> Prepared:
        launch, flush, notes = self._cold_strategy(variant, cache)
        cycle = len(variant.rotations) if variant.rotations and cache != "hot" else 1
        with self._device, streams.current(self.timing_stream):
            try:
                for _ in range(WARMUP_LAUNCHES):
                    launch()
            except Exception as exc:
                raise GpuPerfError(f"variant {variant.name!r} raised during warm-up: {exc}") from exc
            self._sync(f"warming up variant {variant.name!r}")
            self._check_stream(launch, variant.name)
            trace = self._trace(launch)
            per_launch = self._timed(launch, ESTIMATE_LAUNCHES)
            flush_s = self._timed(self._flush, 3) if flush else 0.0
            self._sync(f"estimating the time of variant {variant.name!r}")
            batch = _batch_for(per_launch + flush_s, target_sample_s, cycle)
            try:
                nodes = self._trial_capture(launch, variant.name)
                check_captured_work(variant.name, "graph", nodes, trace)
                segments, batch = self._graph_segments(launch, flush, batch, target_sample_s, cycle)
                method = "graph"
            except GpuPerfError:
                raise
            except Exception as exc:
                segments, batch = self._event_segments(launch, flush, per_launch, target_sample_s, cycle)
                method, nodes = "events", None
                notes.append(f"CUDA-graph capture failed ({type(exc).__name__}: {_first_line(exc)}); timed with events")
                self._sync(f"recovering from a failed capture of variant {variant.name!r}")
                check_captured_work(variant.name, method, nodes, trace)
            self._warm(segments, warmup_s)
        audited = "cupti" if trace is not None else "capture"
        return Prepared(
            variant=variant,
            mode=cache,
            method=method,
            batch=batch,
            notes=notes,
            state=segments,
            stream_audit=audited,
            subtracts_flush=any(seg.sign < 0 for seg in segments),
        )

    def _trace(self, launch: Callable[[], Any]) -> audit.StreamTrace | None:
        """CUPTI's account of one launch, by stream (None where torch's profiler is not in use)."""
        if not audit.trace_available():
            return None
        cp = self._cp
        if self._mark_buf is None:
            self._mark_buf = cp.empty(1, dtype=cp.uint8)
        mark = lambda: cp.cuda.runtime.memsetAsync(self._mark_buf.data.ptr, 0, 1, self._stream.ptr)  # noqa: E731
        return audit.trace_launch(mark, launch, cp.cuda.runtime.deviceSynchronize)

    def _check_stream(self, launch: Callable[[], Any], name: str) -> None:
        """Fail when the callable's work runs on another stream than the current one.

        Events on the timing stream bracket only work enqueued on it. Work sent elsewhere
        (a library handle bound to another stream, say) is not timed, piles up, and runs
        concurrently with later measurements. It shows as device work still running after
        the timing stream has drained.
        """
        import time

        cp = self._cp
        cp.cuda.runtime.deviceSynchronize()
        end = cp.cuda.Event()
        t0 = time.perf_counter()
        for _ in range(STREAM_CHECK_LAUNCHES):
            launch()
        end.record(self._stream)
        end.synchronize()
        stream_s = time.perf_counter() - t0
        cp.cuda.runtime.deviceSynchronize()
        device_s = time.perf_counter() - t0
        if escaped_work(stream_s, device_s) and not self._shared():
            raise GpuPerfError(
                f"variant {name!r}: its GPU work does not all run on the timing stream: the device stayed busy "
                f"{1e3 * (device_s - stream_s):.2f} ms after the timing stream drained ({1e3 * stream_s:.2f} ms). "
                + ESCAPE_ADVICE
            )

    def _check_drained(self, prepared: Sequence[Prepared]) -> None:
        """After a round, nothing may still run elsewhere on the device (see ``_check_stream``)."""
        import time

        t0 = time.perf_counter()
        self._cp.cuda.runtime.deviceSynchronize()
        busy = time.perf_counter() - t0
        if busy > ESCAPE_MIN_S * 5 and not self._shared():
            names = ", ".join(repr(p.variant.name) for p in prepared)
            raise GpuPerfError(
                f"timing {names}: the device stayed busy {1e3 * busy:.2f} ms after the timing stream drained; "
                "some work runs on another stream and would overlap later measurements"
            )

    def _shared(self) -> bool:
        """Whether other processes are using the GPU: then a slow drain is their time slice, not
        escaped work (the measurement is reported as contended instead)."""
        import time

        activity = self._monitor.other_activity(time.time() - LOOKBACK_S)
        return activity is not None and bool(activity.busy)

    def _cold_strategy(self, variant: Variant, cache: CacheMode) -> tuple[Callable[[], Any], bool, list[str]]:
        """How a launch is made cold: rotate input copies, flush L2, or nothing when the data cannot fit."""
        launch = streams.bind(variant.launch, self.timing_stream)
        if cache == "hot":
            return launch, False, []
        l2 = self._info.l2_bytes
        if variant.rotations:
            turn = [0]
            rotations = [streams.bind(r, self.timing_stream) for r in variant.rotations]

            def rotating() -> None:
                rotations[turn[0] % len(rotations)]()
                turn[0] += 1

            notes = [f"cold by rotating {len(rotations)} input copies"]
            if variant.bytes and len(rotations) * variant.bytes < 2 * l2:
                notes.append(
                    f"warning: the rotated copies move {len(rotations) * variant.bytes / 2**20:.0f} MiB, less than twice L2"
                )
            return rotating, False, notes
        if variant.bytes and variant.bytes >= COLD_BY_SIZE * l2:
            return (
                launch,
                False,
                [f"cold without flushing: {variant.bytes / 2**20:.0f} MiB moved per launch is over {COLD_BY_SIZE}x L2"],
            )
        return launch, True, []

    def _warm(self, segments: list[_Segment], seconds: float) -> None:
        """Replay until ``seconds`` of GPU time have passed, so clocks have left their idle state."""
        cp = self._cp
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record(self._stream)
        while True:
            for seg in segments:
                if seg.prefix:
                    seg.prefix()
                seg.run()
            end.record(self._stream)
            end.synchronize()
            if cp.cuda.get_elapsed_time(start, end) * 1e-3 >= seconds:
                return

    def _graph_segments(
        self, launch: Callable[[], Any], flush: bool, batch: int, target_sample_s: float, cycle: int = 1
    ) -> tuple[list[_Segment], int]:
        for attempt in range(2):
            if not flush:
                g = self._capture(functools.partial(_repeat, launch, batch))
                segments = [_Segment(g.replay, +1, keep=g)]
            else:
                gk = self._capture(
                    functools.partial(_repeat, functools.partial(_flush_then, self._flush, launch), batch)
                )
                gf = self._capture(functools.partial(_repeat, self._flush, batch))
                segments = [_Segment(gk.replay, +1, keep=gk), _Segment(gf.replay, -1, keep=gf)]
            replay_s = self._timed(segments[0].run, 3)
            self._sync("replaying a captured graph")
            if attempt == 0 and replay_s < 0.5 * target_sample_s and batch < MAX_BATCH:
                # The first estimate included launch overhead; size the batch on the replay.
                batch = min(MAX_BATCH, max(batch + 1, math.ceil(batch * target_sample_s / max(replay_s, 1e-9))))
                batch = _whole_cycles(batch, cycle)
                continue
            return segments, batch
        return segments, batch

    def _event_segments(
        self, launch: Callable[[], Any], flush: bool, per_launch: float, target_sample_s: float, cycle: int = 1
    ) -> tuple[list[_Segment], int]:
        if flush:
            return [_Segment(lambda: launch(), +1, prefix=self._flush)], 1
        batch = _batch_for(per_launch, target_sample_s, cycle)
        return [_Segment(lambda: _repeat(launch, batch), +1)], batch

    def run_rounds(
        self, prepared: Sequence[Prepared], rounds: int, orders: Sequence[Sequence[int]] | None = None
    ) -> list[list[float]]:
        cp = self._cp
        orders = orders or [range(len(prepared))] * rounds
        plan = [(i, seg) for order in orders for i in order for seg in prepared[i].state]
        events = [(cp.cuda.Event(), cp.cuda.Event()) for _ in plan]
        with self._device, streams.current(self.timing_stream):
            try:
                first = plan[0][1]
                if first.prefix:
                    first.prefix()
                first.run()  # keeps the GPU busy while the timed work is enqueued
                for (_, seg), (start, end) in zip(plan, events, strict=False):
                    if seg.prefix:
                        seg.prefix()
                    start.record(self._stream)
                    seg.run()
                    end.record(self._stream)
                events[-1][1].synchronize()
                self._check_drained(prepared)
            except GpuPerfError:
                raise
            except Exception as exc:
                names = ", ".join(repr(p.variant.name) for p in prepared)
                raise GpuPerfError(f"CUDA error while timing {names}: {exc}") from exc
            times = [cp.cuda.get_elapsed_time(s, e) * 1e-3 for s, e in events]
        out: list[list[float]] = [[] for _ in prepared]
        pos = 0
        for order in orders:
            for i in order:
                total = 0.0
                for seg in prepared[i].state:
                    total += seg.sign * times[pos]
                    pos += 1
                out[i].append(total / prepared[i].batch)
        return out

    def reference(self, kind: str) -> Prepared | None:
        if kind not in self._references:
            variant = self._reference_variant(kind)
            if variant is None:
                return None
            self._references[kind] = self.prepare(variant, "hot", REFERENCE_SAMPLE_S)
        return self._references[kind]

    def _reference_variant(self, kind: str) -> Variant | None:
        cp = self._cp
        with self._device:
            rng = cp.random.default_rng(7)
            if kind == "copy":
                src = rng.integers(0, 255, COLD_BY_SIZE * self._info.l2_bytes, dtype=cp.uint8)
                dst = cp.empty_like(src)
                return Variant("reference:copy", lambda: cp.copyto(dst, src), bytes=2 * src.nbytes)
            if kind == "gemm":
                a = rng.standard_normal((REFERENCE_GEMM_N, REFERENCE_GEMM_N), dtype=cp.float32).astype(cp.float16)
                b = rng.standard_normal((REFERENCE_GEMM_N, REFERENCE_GEMM_N), dtype=cp.float32).astype(cp.float16)
                c = cp.empty_like(a)
                return Variant("reference:gemm", lambda: cp.matmul(a, b, out=c), flops=2 * REFERENCE_GEMM_N**3)
        return None

    def clock_state(self) -> ClockState | None:
        return self._monitor.state()

    def health_unknown_reason(self) -> str | None:
        return self._monitor.unavailable_reason

    def other_activity(self, since: float) -> OtherActivity | None:
        import time

        return self._monitor.other_activity(time.time() - (time.perf_counter() - since))

    def now(self) -> float:
        import time

        return time.perf_counter()

    def pause(self, seconds: float) -> None:
        import time

        time.sleep(seconds)

    def release(self, prepared: Prepared) -> None:
        prepared.state = None

    def breakdown(self, variant: Variant) -> Breakdown | str:
        """The kernels one launch of ``variant`` runs, each timed alone (``cupy_breakdown``), or why not."""
        from pytest_gpuperf._timing.cupy_breakdown import take_breakdown

        with self._device, streams.current(self.timing_stream):
            return take_breakdown(
                self._cp, self._stream, self.timing_stream, streams.bind(variant.launch, self.timing_stream)
            )

    def launch_identity(self, variant: Variant) -> tuple[LaunchIdentity, ...] | str:
        """What each of ``variant``'s launches (its launch, then its rotations) enqueues, read from
        a capture made as the breakdown makes it (``cupy_identity``), or why it cannot be read."""
        from pytest_gpuperf._timing.cupy_identity import take_identity

        launches = [streams.bind(launch, self.timing_stream) for launch in (variant.launch, *variant.rotations)]
        with self._device, streams.current(self.timing_stream):
            return take_identity(self._stream, self.timing_stream, launches)


ESCAPE_ADVICE = (
    "Launch on the timing stream: it is current in CuPy and PyTorch (so Triton and torch.compile) while a "
    "variant runs; a launch that takes one argument is handed it (lambda stream: ...; int(stream) is the "
    "cudaStream_t, and it speaks __cuda_stream__); bind library handles (cuBLAS, cuDNN) to it at each call"
)


def capture_escape(message: str) -> str | None:
    """What a capture error says about work sent off the capturing stream, or None for other errors."""
    if "StreamCaptureImplicit" in message or "legacy stream depend on a capturing" in message:
        return "its work went to the legacy default stream (stream 0) instead of the timing stream"
    if "StreamCaptureUnjoined" in message or "not joined" in message.lower():
        return "it forked work onto another stream and never joined it back to the timing stream"
    return None


def check_captured_work(
    name: str, method: str, nodes_per_launch: float | None, trace: audit.StreamTrace | None
) -> None:
    """Refuse a variant whose GPU work was not captured on, or did not run on, the timing stream.

    ``nodes_per_launch``: kernel, copy and memset nodes the graph holds per launch (None when
    not graph-timed or unreadable). ``trace``: CUPTI's account of one eager launch, or None.
    """
    if method == "graph" and nodes_per_launch == 0:
        raise GpuPerfError(
            f"variant {name!r}: the captured CUDA graph holds no kernel, copy or memset: its launch enqueued "
            f"nothing on the timing stream, so its time would be the cost of replaying an empty graph. {ESCAPE_ADVICE}"
        )
    if trace is None or not trace.elsewhere:
        return
    captured_short = nodes_per_launch is not None and nodes_per_launch < trace.total
    if (method == "graph" and captured_short) or trace.on_stream == 0:
        raise GpuPerfError(
            f"variant {name!r}: part of its GPU work runs off the timing stream and would not be timed "
            f"({trace.describe_elsewhere()}; {trace.on_stream} on the timing stream). {ESCAPE_ADVICE}"
        )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def escaped_work(stream_s: float, device_s: float) -> bool:
    """True when the device kept working well after the timing stream finished (work on another stream)."""
    return device_s - stream_s > max(ESCAPE_MIN_S, ESCAPE_FRACTION * stream_s)


def _flush_then(flush: Callable[[], None], launch: Callable[[], Any]) -> None:
    flush()
    launch()


def _repeat(fn: Callable[[], Any], times: int) -> None:
    for _ in range(times):
        fn()


def _batch_for(per_launch_s: float, target_sample_s: float, cycle: int = 1) -> int:
    """Launches per sample: enough for ``target_sample_s``, and a whole number of ``cycle``s (the
    rotated input copies), so every sample weighs each copy the same."""
    batch = MAX_BATCH if per_launch_s <= 0 else max(1, min(MAX_BATCH, math.ceil(target_sample_s / per_launch_s)))
    return _whole_cycles(batch, cycle)


def _whole_cycles(batch: int, cycle: int) -> int:
    return -(-batch // cycle) * cycle if cycle > 1 else batch
