"""Putting launches on the timing stream, and the rules that refuse escaped work (CPU only)."""
from __future__ import annotations

import contextlib
import sys
import types
from typing import Any, Iterator

import pytest

from pytest_gpuperf.errors import GpuPerfError
from pytest_gpuperf._timing import graphs, streams
from pytest_gpuperf._timing.audit import StreamTrace, split_by_stream
from pytest_gpuperf._timing.cupy_backend import capture_escape, check_captured_work
from pytest_gpuperf._timing.results import OtherProcess
from pytest_gpuperf._timing.nvml import activity_of


class FakeTorch(types.ModuleType):
    """torch.cuda's stream API as far as the plugin uses it; records the stream made current."""

    def __init__(self, available: bool = True) -> None:
        super().__init__("torch")
        fake = self
        self.current: list[Any] = []
        self.external: list[tuple[int, Any]] = []

        class ExternalStream:
            def __init__(self, handle: int, device: Any = None) -> None:
                self.cuda_stream = handle
                fake.external.append((handle, device))

        @contextlib.contextmanager
        def stream(s: Any) -> Iterator[None]:
            fake.current.append(s)
            try:
                yield
            finally:
                fake.current.pop()

        self.cuda = types.SimpleNamespace(
            is_available=lambda: available,
            ExternalStream=ExternalStream,
            stream=stream,
            device=lambda ordinal: contextlib.nullcontext(),
        )
        self.device = lambda kind, index: (kind, index)


@pytest.fixture
def fake_torch(monkeypatch: pytest.MonkeyPatch) -> FakeTorch:
    torch = FakeTorch()
    monkeypatch.setitem(sys.modules, "torch", torch)
    return torch


def test_torch_launches_run_on_the_timing_stream_when_torch_is_imported(fake_torch: FakeTorch) -> None:
    stream = streams.TimingStream(handle=0x5EED, device=1)
    seen: list[int] = []
    with streams.current(stream):
        seen.append(fake_torch.current[-1].cuda_stream)
    assert seen == [0x5EED]
    assert fake_torch.external == [(0x5EED, ("cuda", 1))]
    assert fake_torch.current == []  # restored on exit
    with streams.current(stream):
        pass
    assert len(fake_torch.external) == 1  # the ExternalStream is made once per timing stream


def test_torch_is_neither_imported_nor_adopted_when_the_test_does_not_use_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    with streams.current(streams.TimingStream(handle=1)):
        assert "torch" not in sys.modules


def test_torch_without_cuda_is_not_adopted(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = FakeTorch(available=False)
    monkeypatch.setitem(sys.modules, "torch", torch)
    with streams.current(streams.TimingStream(handle=1)):
        assert torch.current == []


def test_the_timing_stream_speaks_the_cuda_stream_protocol() -> None:
    stream = streams.TimingStream(handle=0xABC)
    assert stream.__cuda_stream__() == (0, 0xABC)
    assert int(stream) == stream.ptr == 0xABC


def _with_default(stream: Any = None) -> Any:
    return stream


@pytest.mark.parametrize(
    ("launch", "takes"),
    [
        (lambda: None, False),
        (lambda stream: stream, True),
        (lambda stream, extra=1: stream, True),
        (_with_default, False),  # an optional argument is not asked for
        (lambda a, b: None, False),
        (print, False),  # no readable signature: called with no argument
    ],
)
def test_which_launches_are_handed_the_stream(launch: Any, takes: bool) -> None:
    assert streams.takes_stream(launch) is takes


def test_bind_hands_the_stream_only_to_launches_that_take_it() -> None:
    stream = streams.TimingStream(handle=9)
    assert streams.bind(lambda s: int(s), stream)() == 9
    assert streams.bind(lambda: "no stream", stream)() == "no stream"


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("CUDA error: operation would make the legacy stream depend on a capturing blocking stream", "legacy default stream"),
        ("cudaErrorStreamCaptureImplicit: ...", "legacy default stream"),
        ("cudaErrorStreamCaptureUnjoined: capture was not joined", "never joined"),
        ("cudaErrorStreamCaptureUnsupported: operation not permitted when stream is capturing", None),
    ],
)
def test_capture_errors_that_mean_escaped_work(message: str, expected: str | None) -> None:
    found = capture_escape(message)
    assert (found is None) if expected is None else (expected in (found or ""))


def test_empty_capture_is_refused_and_unknown_counts_are_not() -> None:
    with pytest.raises(GpuPerfError, match="holds no kernel, copy or memset"):
        check_captured_work("k", "graph", 0, None)
    check_captured_work("k", "graph", None, None)  # node count unreadable: the floor check remains
    check_captured_work("k", "events", 0, None)  # not graph-timed: no graph to inspect


def test_traced_work_elsewhere_is_refused_only_when_the_graph_lacks_it() -> None:
    side = StreamTrace(on_stream=1, elsewhere={30: ["side_kernel"]})
    with pytest.raises(GpuPerfError, match="1 operation\\(s\\) on 1 other stream\\(s\\): side_kernel; 1 on the timing stream"):
        check_captured_work("k", "graph", 1, side)
    check_captured_work("k", "graph", 2, side)  # forked and joined: the graph holds both operations
    with pytest.raises(GpuPerfError, match="off the timing stream"):
        check_captured_work("k", "events", None, StreamTrace(on_stream=0, elsewhere={30: ["all_elsewhere"]}))


class _Event:
    def __init__(self, name: str, stream: int, start: int, gpu: bool = True) -> None:
        self._name, self._stream, self._start, self._gpu = name, stream, start, gpu

    def name(self) -> str:
        return self._name

    def device_resource_id(self) -> int:
        return self._stream

    def device_type(self) -> str:
        return "DeviceType.CUDA" if self._gpu else "DeviceType.CPU"

    def start_ns(self) -> int:
        return self._start


def test_a_trace_is_split_by_the_marks_stream() -> None:
    trace = split_by_stream([
        _Event("cudaLaunchKernel", 999, 0, gpu=False),
        _Event("Memset (Device)", 13, 1),
        _Event("elementwise_kernel", 13, 2),
        _Event("side_kernel", 30, 3),
    ])
    assert trace == StreamTrace(on_stream=1, elsewhere={30: ["side_kernel"]})
    assert split_by_stream([_Event("kernel", 13, 1)]) is None  # no mark: the stream cannot be named


def test_graph_nodes_cannot_be_counted_without_a_driver() -> None:
    graphs._libcuda.cache_clear()
    assert graphs.count_work_nodes(0) is None


def _name(pid: int) -> str:
    return f"proc{pid}"


def test_other_processes_are_told_apart_by_pid() -> None:
    activity = activity_of({10, 20, 30}, 10, {20: 90, 30: 1}, _name)
    assert activity.self_found
    assert activity.present == (OtherProcess(20, "proc20", 90), OtherProcess(30, "proc30", 1))
    assert activity.busy == (OtherProcess(20, "proc20", 90),)
    assert activity_of({10, 20}, 10, None, _name).busy == ()  # no per-process figures: none judged busy


def test_pids_from_another_namespace_are_not_blamed() -> None:
    assert activity_of({5000}, 10, {5000: 99}, _name).present == ()  # the lone process is this one
    crowded = activity_of({5000, 6000}, 10, {5000: 99}, _name)
    assert not crowded.self_found and len(crowded.present) == 2
