"""The pytest side: what the hook table (``pytest_gpuperf.plugin``) calls.

Settings from markers, command line, environment and ini (``options``), architecture markers
(``arch``), one run's state (``session``), the fixtures' objects (``gpu_perf``, ``gpu_static``,
``gpu_counters``), the hooks a conftest.py implements to replace the device or the timer
(``hookspecs``), the run's results collected from reports and summed up (``run_hooks``), pairing
with another revision (``against``), GPUs shared by xdist workers (``gpu_sharing``), the live
status line (``live_status``), pytest-benchmark's storage (``benchmark_interop``) and the
hypothesis profile (``hypothesis_profile``)."""
