"""What a run tells its reader: the records a test attaches to its report (``records``), the
terminal summary, failure messages and the JSON report (``summary``), why a result stayed
undecided (``undecided``), where a result came from (``provenance``), writing the run's files at
its end (``outputs``), a saved report as markdown or text (``render``), two sets of baselines side
by side (``baseline_diff``), charts (``plots``), other tools' formats (``export``), and the one
table renderer (``table``) and markdown quoting (``markdown``) every one of them prints through."""
