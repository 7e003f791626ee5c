"""Judging numbers: the statistics behind every interval (``stats``) and the pass/fail rules of
speedup and regression claims (``verdict``). Pure computation: nothing here times a GPU, reads a
file or knows pytest."""
