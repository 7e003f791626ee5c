"""``python -m pytest_gpuperf``: the ``gpuperf`` command."""

from pytest_gpuperf._cli.main import main

raise SystemExit(main())
