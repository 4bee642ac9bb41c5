"""``python -m worker_svc [--server HOST:PORT]``: run a dedicated worker."""

from __future__ import annotations

import argparse

from worker_svc import main
from worker_svc.settings import DEFAULT_SERVER


def _parse_args() -> argparse.Namespace:
    """Parse the command line.

    Returns:
        argparse.Namespace: ``server`` (str | None).
    """
    parser = argparse.ArgumentParser(
        prog="python -m worker_svc",
        description="Run a tickwork worker: take jobs from the scheduler service and run them.",
    )
    parser.add_argument(
        "--server",
        metavar="HOST:PORT",
        default=None,
        help=f"scheduler service address (default: $TICKWORK_SERVER or {DEFAULT_SERVER})",
    )
    return parser.parse_args()


if __name__ == "__main__":
    raise SystemExit(main(_parse_args().server))
