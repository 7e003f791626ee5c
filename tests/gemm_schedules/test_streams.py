"""Every launch path of the family enqueues on the CuPy stream current at call time (CPU only).

A fake ``cupy`` stands in for the real one: streams with CuPy's ``with stream:`` semantics, and a
cuBLAS module that, like CuPy 14.2's, refuses ``setStream`` on a capturing stream. Work sent to any
stream other than the timing stream is not bracketed by the timing events and runs concurrently
with later measurements (once on an H200: cuBLAS 3278 us at 8192^3 instead of ~1617).
"""
from __future__ import annotations

import collections
import ctypes
import itertools
import sys
import time
import types
from typing import Any

import pytest

from kernels.gemm_schedules.family import CONFIGS


class FakeCupy:
    """Just enough of cupy (and cupy.cuda.cublas) for CublasGemm, GemmPlan and the CuPy timing backend."""

    def __init__(self) -> None:
        fake = self
        self.stack: list[Any] = []
        self.pending: collections.Counter[int] = collections.Counter()  # launched, not yet waited for
        self.calls: list[tuple[str, Any, int]] = []  # (call, handle, stream ptr)
        ptrs = itertools.count(1)

        class Stream:
            def __init__(self, non_blocking: bool = False, null: bool = False) -> None:
                self.ptr = 0 if null else next(ptrs)
                self.capturing = False

            def __enter__(self) -> "Stream":
                fake.stack.append(self)
                return self

            def __exit__(self, *exc: Any) -> None:
                fake.stack.pop()

            def begin_capture(self) -> None:
                self.capturing = True

            def end_capture(self) -> Any:
                self.capturing = False
                return types.SimpleNamespace(launch=lambda stream: None)

            def synchronize(self) -> None:
                fake.pending[self.ptr] = 0

        class Event:
            def record(self, stream: Any = None) -> None:
                self.t, self.ptr = time.perf_counter(), (stream or fake.current()).ptr

            def synchronize(self) -> None:
                fake.pending[self.ptr] = 0

        class Device:
            def __init__(self, ordinal: int = 0) -> None:
                pass

            def __enter__(self) -> "Device":
                return self

            def __exit__(self, *exc: Any) -> None:
                pass

        def set_stream(handle: int, stream: int) -> None:
            # cupy_backends/cuda/libs/cublas.pyx (v14.2.0): setStream raises during stream capture.
            if any(s.capturing and s.ptr == stream for s in [*fake.stack, fake.null]):
                raise NotImplementedError("calling cuBLAS API during stream capture is currently unsupported")
            fake.calls.append(("setStream", handle, stream))
            fake.bound[handle] = stream

        def gemm_ex(handle: int, *args: Any) -> None:
            # The real gemmEx runs on the stream the handle is bound to (CuPy 14.2 also rebinds it
            # to the current stream inside gemmEx; the fake does not, so the family must).
            stream = fake.bound.get(handle, 0)
            fake.calls.append(("gemmEx", handle, stream))
            fake.pending[stream] += 1

        def device_synchronize() -> None:
            fake.pending.clear()

        self.null = Stream(null=True)
        self.bound: dict[int, int] = {}
        self.cublas = types.SimpleNamespace(gemmEx=gemm_ex, setStream=set_stream)
        self.device = types.SimpleNamespace(get_cublas_handle=lambda: 0xB1A5)
        self.cuda = types.ModuleType("cupy.cuda")
        self.cuda.__dict__.update(
            Stream=Stream, Event=Event, Device=Device, cublas=self.cublas, device=self.device,
            get_current_stream=self.current,
            get_elapsed_time=lambda start, end: 1e3 * (end.t - start.t),
            runtime=types.SimpleNamespace(deviceSynchronize=device_synchronize, memsetAsync=lambda *a: None),
        )  # fmt: skip
        self.module = types.ModuleType("cupy")
        self.module.__dict__.update(
            cuda=self.cuda, uint8="uint8", uint16="uint16",
            empty=lambda shape, dtype=None: FakeDeviceArray(shape if isinstance(shape, tuple) else (shape,)),
        )  # fmt: skip

    def current(self) -> Any:
        return self.stack[-1] if self.stack else self.null


class FakeDeviceArray:
    """A C-contiguous bf16 (uint16) device array as check_operands sees it."""

    _next = itertools.count(1)

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape, self.ndim, self.dtype = shape, len(shape), "uint16"
        self.flags = types.SimpleNamespace(c_contiguous=True)
        self.data = types.SimpleNamespace(ptr=0x10000 * next(self._next))
        self.nbytes = 2 * int(sum(shape))


@pytest.fixture
def fake_cupy(monkeypatch: pytest.MonkeyPatch) -> FakeCupy:
    fake = FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", fake.module)
    monkeypatch.setitem(sys.modules, "cupy.cuda", fake.cuda)
    return fake


def _operands(m: int = 64, n: int = 48, k: int = 32) -> tuple[FakeDeviceArray, ...]:
    return FakeDeviceArray((m, k)), FakeDeviceArray((n, k)), FakeDeviceArray((m, n))


def test_cublas_binds_the_current_stream_at_every_launch(fake_cupy: FakeCupy) -> None:
    """The handle is set to cupy.cuda.get_current_stream() right before every gemmEx, whatever
    stream was current when the CublasGemm was made or last launched."""
    from kernels.gemm_schedules.launch import CublasGemm

    cp = fake_cupy.module
    made_on = cp.cuda.Stream()
    with made_on:
        gemm = CublasGemm(*_operands())
    first, second = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    expected = []
    for stream in (first, second, first, fake_cupy.null, second):
        with stream:
            gemm.launch()
            gemm.launch()
        expected += [("setStream", 0xB1A5, stream.ptr), ("gemmEx", 0xB1A5, stream.ptr)] * 2
    gemm.launch()  # no stream entered: CuPy's current stream is the null stream
    expected += [("setStream", 0xB1A5, 0), ("gemmEx", 0xB1A5, 0)]
    assert fake_cupy.calls == expected
    assert made_on.ptr not in {ptr for _, _, ptr in fake_cupy.calls}


def test_cublas_launch_refuses_a_capturing_stream(fake_cupy: FakeCupy) -> None:
    """What makes the timing engine fall back to events for cuBLAS: no call reaches gemmEx."""
    from kernels.gemm_schedules.launch import CublasGemm

    gemm = CublasGemm(*_operands())
    stream = fake_cupy.module.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        with pytest.raises(NotImplementedError, match="stream capture"):
            gemm.launch()
    assert fake_cupy.calls == []


class _FakeGemmLib:
    """The ctypes surface of a built gemm_sm90.cu, recording the stream of every run."""

    def __init__(self) -> None:
        self.runs: list[int] = []
        self.created_on: list[int] = []

    def gemm_workspace_size(self, m: int, n: int, k: int, swizzle: int, raster: int, size: Any) -> int:
        size._obj.value = 0
        return 0

    def gemm_plan_create(self, *args: Any) -> int:
        self.created_on.append(args[10])
        args[11]._obj.value = 0xC0FFEE
        return 0

    def gemm_plan_run(self, plan: Any, stream: int) -> int:
        assert plan, "run on a null plan"
        self.runs.append(stream)
        return 0

    def gemm_plan_destroy(self, plan: Any) -> None:
        pass


def test_cutlass_plan_launches_on_the_current_stream(fake_cupy: FakeCupy) -> None:
    """gemm_plan_run gets the .ptr of the stream current at each launch(), not the plan's creation stream."""
    from kernels.gemm_schedules.launch import GemmLibrary, GemmPlan

    lib = _FakeGemmLib()
    library = GemmLibrary.__new__(GemmLibrary)
    library.config, library._lib = next(iter(CONFIGS.values())), lib
    cp = fake_cupy.module
    made_on, first, second = (cp.cuda.Stream(non_blocking=True) for _ in range(3))
    with made_on:
        plan = GemmPlan(library, *_operands())
    order = (first, second, fake_cupy.null, first)
    for stream in order:
        with stream:
            plan.launch()
    plan.launch()
    assert lib.created_on == [made_on.ptr]
    assert lib.runs == [s.ptr for s in order] + [0]
    assert isinstance(plan._handle, ctypes.c_void_p)


def test_timing_engine_keeps_uncapturable_cublas_on_its_timing_stream(fake_cupy: FakeCupy) -> None:
    """After prepare() and run_rounds(), nothing the cuBLAS variant launched is left running on a
    stream other than the timing stream (it would overlap the next measurements). Regression test
    for an H200 run: a failed capture swapped the timing stream under prepare()'s `with`."""
    from kernels.gemm_schedules.launch import CublasGemm
    from pytest_gpuperf._timing.device import DeviceInfo
    from pytest_gpuperf._timing.results import Variant
    from pytest_gpuperf._timing.cupy_backend import CupyBackend

    backend = CupyBackend(DeviceInfo("fake H200", (9, 0), 132, 141 << 30, 60 << 20))
    gemm = CublasGemm(*_operands())
    # 400 MiB moved per launch: cold by size, so no L2 flush and the launch alone is timed.
    prepared = backend.prepare(Variant("cublas", gemm.launch, bytes=400 << 20), "cold", 1e-3)
    assert prepared.method == "events"
    escaped = {ptr: n for ptr, n in fake_cupy.pending.items() if n and ptr != backend._stream.ptr}
    assert not escaped, f"after prepare(): launches left on streams other than the timing stream: {escaped}"
    backend.run_rounds([prepared], 3)
    escaped = {ptr: n for ptr, n in fake_cupy.pending.items() if n and ptr != backend._stream.ptr}
    assert not escaped, f"after run_rounds(): launches left on other streams: {escaped}"
