"""Hardware counters of single kernel launches through Nsight Compute (``ncu``).

Counters say *why* a kernel is fast: sectors fetched per load request, L1<->L2 bytes against
the ideal, bank conflicts, instructions per inner-loop iteration. They are counts, not times,
so they hardly move from run to run, and a test can gate the mechanism of an optimisation
("the rearranged weights need at most 4 sectors per request") instead of only its speed.

``ncu`` finds and runs ncu on a target function in a subprocess; ``metrics`` reads its CSV and
derives the figures a test gates on (``CounterResult``). The ``gpu_counters`` fixture's object
is ``_plugin.gpu_counters``.
"""
