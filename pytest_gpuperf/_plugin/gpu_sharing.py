"""More pytest-xdist workers than GPUs under ``--gpu-perf``: a test that uses a GPU holds it.

Workers that share a GPU (``--gpu-perf-device auto`` gives worker ``gwI`` GPU ``I mod count``)
would otherwise run their correctness tests beside each other's measurements, and those
measurements would be reported as contended: the per-GPU lock kept two *measurements* apart,
not a measurement and another worker's test. So when a timed run has more workers than GPUs, or
gives them all one GPU (``--gpu-perf-device N``), every test that uses a GPU (what
``--gpu-perf-gpu-only`` keeps) holds its GPU's lock from its set-up, once it is known not to be
skipped, to the end of its teardown. The GPU tests then run one at a time per GPU, in whatever
order the workers reach them, while the tests that use no GPU run on every worker beside them.
The lock is the one measurements take (re-entrant in the thread that holds it), so a test's own
measurements go through. A lock that cannot be taken fails that test, with the reason.

With as many workers as GPUs or fewer, each on its own, or without ``--gpu-perf``, nothing is held.

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
    if not isinstance(count, int) or getattr(config.option, "dist", "no") == "no":
        return 0
    most = getattr(config.option, "maxprocesses", None)
    return min(count, most) if isinstance(most, int) and most > 0 else count


def shares_gpus(config: pytest.Config, gpus: int) -> bool:
    """Whether the workers outnumber the ``gpus`` they time on (one when every worker was given the
    same GPU with ``--gpu-perf-device N``, or when the count is unknown)."""
    return worker_count(config) > gpus


def header_line(config: pytest.Config, gpus: int) -> str:
    line = (
        f"gpu-perf: {worker_count(config)} xdist workers share {gpus} GPU(s): each test that uses a GPU "
        "holds it from set-up to teardown, so those run one at a time per GPU and the others beside them"
    )
    if getattr(config.option, "dist", None) == "load":
        line += "; --dist loadfile sets a module's GPU fixtures up once instead of once per worker, inside the hold"
    return line
