"""Timing: the GPU under test (``device``, ``nvml``), the value types a measurement produces
(``results``, ``summaries``), the backends that produce per-launch GPU times (``backend``,
``cupy_backend``, with ``graphs``, ``streams``, ``audit``), whether the GPU could be trusted
(``health``), the sampler that judges them (``sampler``), and timing outside pytest (``bench``,
``roofline``). Nothing here knows pytest."""
