"""More pytest-xdist workers than GPUs under ``--gpu-perf``: a test that uses a GPU holds it.

Workers that share a GPU (``--gpu-perf-device auto`` gives worker ``gwI`` GPU ``I mod count``)
would otherwise run their correctness tests beside each other's measurements, and those
measurements would be reported as contended: the per-GPU lock kept two *measurements* apart,
not a measurement and another worker's test. So when a timed run has more workers than GPUs,
every test that uses a GPU (what ``--gpu-perf-gpu-only`` keeps) holds its GPU's lock from
set-up to teardown. The GPU tests then run one at a time per GPU, in whatever order the workers
reach them, while the tests that use no GPU run on every worker beside them. The lock is the
one measurements take (re-entrant within a process), so a test's own measurements go through.

With as many workers as GPUs or fewer, or without ``--gpu-perf``, nothing is held.

Under ``--dist load`` (xdist's default) the tests of one module land on many workers, and each
worker sets up the module's fixtures again, inside the hold where they touch the GPU (a model
loaded, kernels compiled); ``--dist loadfile`` keeps a module on one worker. xdist's
``loadgroup`` is not used: with pytest 9.2 its groups are silently ignored (pytest-xdist
issue 1386).
"""

from __future__ import annotations

import pytest

WORKER_COUNT_KEY = "workercount"


def worker_count(config: pytest.Config) -> int:
    """The run's xdist workers: from ``workerinput`` on a worker, from ``-n`` on the controller; 0 without xdist."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        return int(workerinput.get(WORKER_COUNT_KEY, 0))
    count = getattr(config.option, "numprocesses", None)
    return count if isinstance(count, int) and getattr(config.option, "dist", "no") != "no" else 0


def shares_gpus(config: pytest.Config, gpu_count: int | None) -> bool:
    """Whether workers outnumber the GPUs (``gpu_count`` None, unknown, counts as one)."""
    return worker_count(config) > (gpu_count or 1)


def header_line(config: pytest.Config, gpu_count: int | None) -> str:
    line = (
        f"gpu-perf: {worker_count(config)} xdist workers share {gpu_count or 1} GPU(s): each test that uses a GPU "
        "holds it from set-up to teardown, so those run one at a time per GPU and the others beside them"
    )
    if getattr(config.option, "dist", None) == "load":
        line += "; --dist loadfile sets a module's GPU fixtures up once instead of once per worker, inside the hold"
    return line
