"""Planning the GPU time of a suite: per-test budgets that reach a target detectable slowdown
(``checks``: how each check narrows with its budget; ``allocate``: the budgets within a total)."""
