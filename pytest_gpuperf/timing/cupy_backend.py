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
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from pytest_gpuperf.device import DeviceInfo
from pytest_gpuperf.errors import GpuPerfError
from pytest_gpuperf.results import CacheMode, ClockState, Variant
from pytest_gpuperf.timing.backend import Prepared
from pytest_gpuperf.timing.nvml import ClockMonitor

MAX_BATCH = 2048
STREAM_CHECK_LAUNCHES = 3
ESCAPE_MIN_S = 200e-6  # a device-wide synchronize itself costs tens of microseconds
ESCAPE_FRACTION = 0.5
COLD_BY_SIZE = 4  # launches moving this many times the L2 size find nothing of theirs left in it
WARMUP_LAUNCHES = 3
ESTIMATE_LAUNCHES = 10


@dataclass
class _Segment:
    """Work timed by one event pair; ``sign`` -1 marks the flush-only graph subtracted in cold mode."""

    run: Callable[[], None]
    sign: int
    prefix: Callable[[], None] | None = None  # untimed work enqueued before the start event


class CupyBackend:
    name = "cupy"

    def __init__(self, device: DeviceInfo):
        import cupy

        self._cp = cupy
        self._device = cupy.cuda.Device(device.ordinal)
        self._info = device
        with self._device:
            self._stream = cupy.cuda.Stream(non_blocking=True)
        self._flush_buf: Any = None
        self._monitor = ClockMonitor(device.pci_bus_id)

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
        return cp.cuda.get_elapsed_time(start, end) * 1e-3 / repeats

    def _capture(self, body: Callable[[], None]) -> Any:
        self._stream.begin_capture()
        try:
            body()
        except BaseException:
            # Ending the capture returns the stream to normal use. The stream is kept: it is
            # the current stream of the caller's `with` block, and swapping it here once sent
            # the warm-up's launches to one stream and its events to another.
            try:
                self._stream.end_capture()
            except Exception:
                pass
            raise
        graph = self._stream.end_capture()
        if hasattr(graph, "upload"):
            graph.upload(self._stream)
        return graph

    # -- TimingBackend -------------------------------------------------------------
    def prepare(self, variant: Variant, cache: CacheMode, target_sample_s: float, warmup_s: float = 0.05) -> Prepared:
        launch, flush, notes = self._cold_strategy(variant, cache)
        with self._device, self._stream:
            try:
                for _ in range(WARMUP_LAUNCHES):
                    launch()
            except Exception as exc:
                raise GpuPerfError(f"variant {variant.name!r} raised during warm-up: {exc}") from exc
            self._sync(f"warming up variant {variant.name!r}")
            self._check_stream(launch, variant.name)
            per_launch = self._timed(launch, ESTIMATE_LAUNCHES)
            flush_s = self._timed(self._flush, 3) if flush else 0.0
            self._sync(f"estimating the time of variant {variant.name!r}")
            batch = _batch_for(per_launch + flush_s, target_sample_s)
            try:
                segments, batch = self._graph_segments(launch, flush, batch, target_sample_s)
                method = "graph"
            except GpuPerfError:
                raise
            except Exception as exc:
                segments, batch = self._event_segments(launch, flush, per_launch, target_sample_s)
                method = "events"
                notes.append(f"CUDA-graph capture failed ({type(exc).__name__}: {exc}); timed with events")
                self._sync(f"recovering from a failed capture of variant {variant.name!r}")
            self._warm(segments, warmup_s)
        return Prepared(variant=variant, mode=cache, method=method, batch=batch, notes=notes, state=segments)

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
        if escaped_work(stream_s, device_s):
            raise GpuPerfError(
                f"variant {name!r}: its GPU work does not run on the current CuPy stream: the device stayed busy "
                f"{1e3 * (device_s - stream_s):.2f} ms after the timing stream drained ({1e3 * stream_s:.2f} ms). "
                "Enqueue everything on cupy.cuda.get_current_stream() (e.g. bind cuBLAS/cuDNN handles to it at "
                "each call, pass its .ptr to ctypes launches, run torch under torch.cuda.ExternalStream)."
            )

    def _check_drained(self, prepared: Sequence[Prepared]) -> None:
        """After a round, nothing may still run elsewhere on the device (see ``_check_stream``)."""
        import time

        t0 = time.perf_counter()
        self._cp.cuda.runtime.deviceSynchronize()
        busy = time.perf_counter() - t0
        if busy > ESCAPE_MIN_S * 5:
            names = ", ".join(repr(p.variant.name) for p in prepared)
            raise GpuPerfError(
                f"timing {names}: the device stayed busy {1e3 * busy:.2f} ms after the timing stream drained; "
                "some work runs on another stream and would overlap later measurements"
            )

    def _cold_strategy(self, variant: Variant, cache: CacheMode) -> tuple[Callable[[], Any], bool, list[str]]:
        """How a launch is made cold: rotate input copies, flush L2, or nothing when the data cannot fit."""
        if cache == "hot":
            return variant.launch, False, []
        l2 = self._info.l2_bytes
        if variant.rotations:
            turn = [0]
            rotations = variant.rotations

            def rotating() -> None:
                rotations[turn[0] % len(rotations)]()
                turn[0] += 1

            notes = [f"cold by rotating {len(rotations)} input copies"]
            if variant.bytes and len(rotations) * variant.bytes < 2 * l2:
                notes.append(f"warning: the rotated copies move {len(rotations) * variant.bytes / 2**20:.0f} MiB, less than twice L2")
            return rotating, False, notes
        if variant.bytes and variant.bytes >= COLD_BY_SIZE * l2:
            return variant.launch, False, [f"cold without flushing: {variant.bytes / 2**20:.0f} MiB moved per launch is over {COLD_BY_SIZE}x L2"]
        return variant.launch, True, []

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
        self, launch: Callable[[], Any], flush: bool, batch: int, target_sample_s: float
    ) -> tuple[list[_Segment], int]:
        for attempt in range(2):
            if not flush:
                g = self._capture(lambda: _repeat(launch, batch))
                segments = [_Segment(lambda g=g: g.launch(self._stream), +1)]
            else:
                gk = self._capture(lambda: _repeat(lambda: (self._flush(), launch()), batch))
                gf = self._capture(lambda: _repeat(self._flush, batch))
                segments = [
                    _Segment(lambda g=gk: g.launch(self._stream), +1),
                    _Segment(lambda g=gf: g.launch(self._stream), -1),
                ]
            replay_s = self._timed(segments[0].run, 3)
            self._sync("replaying a captured graph")
            if attempt == 0 and replay_s < 0.5 * target_sample_s and batch < MAX_BATCH:
                # The first estimate included launch overhead; size the batch on the replay.
                batch = min(MAX_BATCH, max(batch + 1, math.ceil(batch * target_sample_s / max(replay_s, 1e-9))))
                continue
            return segments, batch
        return segments, batch

    def _event_segments(
        self, launch: Callable[[], Any], flush: bool, per_launch: float, target_sample_s: float
    ) -> tuple[list[_Segment], int]:
        if flush:
            return [_Segment(lambda: launch(), +1, prefix=self._flush)], 1
        batch = _batch_for(per_launch, target_sample_s)
        return [_Segment(lambda: _repeat(launch, batch), +1)], batch

    def run_rounds(self, prepared: Sequence[Prepared], rounds: int) -> list[list[float]]:
        cp = self._cp
        plan = [(i, seg) for _ in range(rounds) for i, p in enumerate(prepared) for seg in p.state]
        events = [(cp.cuda.Event(), cp.cuda.Event()) for _ in plan]
        with self._device, self._stream:
            try:
                first = prepared[0].state[0]
                if first.prefix:
                    first.prefix()
                first.run()  # keeps the GPU busy while the timed work is enqueued
                for (_, seg), (start, end) in zip(plan, events):
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
        acc = [0.0] * len(prepared)
        pos = 0
        for _ in range(rounds):
            for i, p in enumerate(prepared):
                acc[i] = 0.0
                for seg in p.state:
                    acc[i] += seg.sign * times[pos]
                    pos += 1
                out[i].append(acc[i] / p.batch)
        return out

    def clock_state(self) -> ClockState | None:
        return self._monitor.state()

    def now(self) -> float:
        import time

        return time.perf_counter()

    def pause(self, seconds: float) -> None:
        import time

        time.sleep(seconds)

    def release(self, prepared: Prepared) -> None:
        prepared.state = None


def escaped_work(stream_s: float, device_s: float) -> bool:
    """True when the device kept working well after the timing stream finished (work on another stream)."""
    return device_s - stream_s > max(ESCAPE_MIN_S, ESCAPE_FRACTION * stream_s)


def _repeat(fn: Callable[[], Any], times: int) -> None:
    for _ in range(times):
        fn()


def _batch_for(per_launch_s: float, target_sample_s: float) -> int:
    if per_launch_s <= 0:
        return MAX_BATCH
    return max(1, min(MAX_BATCH, math.ceil(target_sample_s / per_launch_s)))
