"""The ``gpuperf`` command: inspect, check and maintain stored baselines, render saved reports.

    gpuperf list [DIR]                    devices, files, entry counts and recording dates
    gpuperf check [DIR]                   validate every baseline, budget and report file under DIR
    gpuperf diff OLD NEW                  two baseline folders, two device folders or two files
    gpuperf diff --git REV [DIR]          the working tree's baselines against those at REV
    gpuperf prune [DIR] [--dry-run] [--keep-tests-from PATH]... [--node-ids FILE] [--remove-uncollected]
    gpuperf report FILE [--markdown | --text | --annotations] [--failures-first] [--max-chars N]
    gpuperf export --format github-action-benchmark FILE [-o OUT]
    gpuperf plots REPORT OUT_DIR          charts of a saved report and an index.html
    gpuperf migrate PATH... [--dry-run]   rewrite files of an older schema version as the current one
    gpuperf margins [REPORT...] [--file MARGINS [--write] [--only GLOB]... [--reset]] [--commit SHA] [--markdown]
    gpuperf levels REPORT... [--dir DIR] [--band FRACTION] [--min-runs N] [--only GLOB]... [--write]
    gpuperf --version

One module per subcommand, each with ``add_parser`` and ``run``; ``main`` assembles them.
Exit status: 0 done, 1 a file or folder is missing, corrupt or misplaced (the message names
the file and the field) or a step failed (git, test collection), 2 bad arguments.
"""
