"""The timing stream, made current in every framework a launch may use.

Events time only the work enqueued on the stream they are recorded on, and stream capture
records only that stream's work. So every launch the plugin times runs while its timing
stream is the *current* stream of each framework that has one:

- CuPy: ``with cupy_stream`` (CuPy kernels, cuBLAS through CuPy, ``RawKernel``);
- PyTorch: ``torch.cuda.stream(torch.cuda.ExternalStream(handle))``, which also covers Triton
  (it launches on torch's current stream), ``torch.compile``d functions and C++ extensions that
  launch on ``at::cuda::getCurrentCUDAStream()``.

A framework is adopted only when the test process has already imported it: none is a
dependency, and none is imported on the user's behalf. Launchers without a current-stream
notion (cuda-python / cuda.core, numba, ctypes) take the stream as their one argument: a
``TimingStream``, which speaks the ``__cuda_stream__`` protocol and converts to an int handle.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

Launch = Callable[..., Any]


@dataclass
class TimingStream:
    """The CUDA stream the plugin times on. Pass it to launchers that take a stream:

    - cuda.core: ``launch(timing_stream, config, kernel, *args)`` (``__cuda_stream__``);
    - numba: ``kernel[grid, block, numba.cuda.external_stream(int(timing_stream))](...)``;
    - ctypes / cuda-python bindings: ``int(timing_stream)`` is the ``cudaStream_t``.
    """

    handle: int
    device: int = 0
    cupy_stream: Any = field(default=None, repr=False)
    _torch_stream: Any = field(default=None, repr=False)

    def __cuda_stream__(self) -> tuple[int, int]:
        """The CUDA stream protocol: (protocol version, cudaStream_t as an int)."""
        return (0, self.handle)

    def __int__(self) -> int:
        return self.handle

    @property
    def ptr(self) -> int:
        """The ``cudaStream_t`` as an int (CuPy's and torch's spelling: ``.ptr``, ``.cuda_stream``)."""
        return self.handle

    def torch(self) -> Any:
        """This stream as a ``torch.cuda.Stream`` (an ``ExternalStream``; created once)."""
        if self._torch_stream is None:
            import torch

            self._torch_stream = torch.cuda.ExternalStream(self.handle, device=torch.device("cuda", self.device))  # type: ignore[no-untyped-call]
        return self._torch_stream


def torch_in_use() -> bool:
    """True when the test process imported torch and it can use CUDA."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        return bool(torch.cuda.is_available())
    except Exception:
        return False


@contextlib.contextmanager
def current(stream: TimingStream) -> Iterator[None]:
    """Make ``stream`` the current stream of every imported framework that has one."""
    with contextlib.ExitStack() as stack:
        if stream.cupy_stream is not None:
            stack.enter_context(stream.cupy_stream)
        if torch_in_use():
            import torch

            stack.enter_context(torch.cuda.device(stream.device))
            stack.enter_context(torch.cuda.stream(stream.torch()))
        yield


def takes_stream(launch: Launch) -> bool:
    """Whether ``launch`` wants the timing stream as its one positional argument.

    ``lambda: ...`` launches on the current stream; ``lambda stream: ...`` is handed the
    ``TimingStream``. Callables whose signature cannot be read are called with no argument.
    """
    try:
        params = inspect.signature(launch).parameters.values()
    except (TypeError, ValueError):
        return False
    required = [
        p
        for p in params
        if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    return len(required) == 1


def bind(launch: Launch, stream: TimingStream) -> Callable[[], Any]:
    """A no-argument call of ``launch``: it is given ``stream`` when it takes one."""
    if takes_stream(launch):
        return lambda: launch(stream)
    return launch
