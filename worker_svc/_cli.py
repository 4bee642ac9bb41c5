"""The worker's command of the ``tickwork`` command line, ``tickwork worker``, added through
the entry point group ``tickwork.commands`` (see :mod:`tickwork.cli._plugins`)."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from tickwork.cli import tls_from_args
from tickwork.logs import LOG_FORMATS

__all__ = ["add_worker"]


def add_worker(sub: argparse._SubParsersAction[Any], net: argparse.ArgumentParser) -> None:
    """Add ``tickwork worker``; it takes the connection options of ``net``."""
    p = sub.add_parser(
        "worker",
        parents=[net],
        help="run a dedicated worker",
        description="Run a worker that takes jobs from the scheduler service at --server.",
    )
    p.add_argument(
        "--log-format", choices=LOG_FORMATS, help="log lines (default $TICKWORK_LOG_FORMAT)"
    )
    p.add_argument(
        "--slots",
        type=int,
        metavar="N",
        help="jobs this worker runs at once, one stream each (default $WORKER_SLOTS, else 1; "
        "the service's TICKWORK_MAX_RUNNING_JOBS caps them across workers)",
    )
    p.set_defaults(func=_worker)


def _worker(args: argparse.Namespace, out: TextIO) -> int:
    from worker_svc._main import main

    return main(
        args.server,
        token=args.token,
        tls=tls_from_args(args),
        log_format=args.log_format,
        slots=args.slots,
    )
