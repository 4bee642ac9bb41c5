"""``python -m tickwork.cli``: the ``tickwork`` command line."""

from tickwork.cli import main

raise SystemExit(main())
