"""What a run tells its reader: the terminal summary and the JSON report (``summary``), where a
result came from (``provenance``), writing the run's files at its end (``outputs``), a saved
report as markdown or text (``render``), two sets of baselines side by side (``baseline_diff``),
charts (``plots``) and github-action-benchmark's format (``export``)."""
