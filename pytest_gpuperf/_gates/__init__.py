"""Judging numbers: the statistics behind every interval (``stats``), the pass/fail rules of
speedup and regression claims (``verdict``), kernels that sit at one of a few levels (``levels``)
and a measurement judged against its stored baseline (``regression``). Pure computation: nothing
here times a GPU, reads a file or knows pytest."""
