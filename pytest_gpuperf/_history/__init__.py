"""``gpuperf history``: every ingested run in one SQLite file, series per test variant and GPU model,
and the change points found in them, each labelled *code* or *environment* (docs/history.md).

``database`` owns the file and its schema, ``ingest`` turns reports into rows, ``series`` reads a
series back, ``shift`` holds the rank statistics, ``changes`` finds and confirms change points,
``labels`` says what moved across a change, ``render`` and ``plot`` show the results.
"""
