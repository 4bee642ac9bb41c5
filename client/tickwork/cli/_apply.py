"""``tickwork apply -f FILE``: upsert a TOML file's tasks and schedules by name."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from tickwork.apply import apply_config, load_config
from tickwork.cli._common import EXIT_OK, client_from_args


def add_parsers(sub: argparse._SubParsersAction[Any], net: argparse.ArgumentParser) -> None:
    """Add ``apply``; ``net`` is the parent parser of the connection options."""
    p = sub.add_parser(
        "apply",
        parents=[net],
        help="create or update tasks and schedules from a TOML file",
        description=(
            "Upsert the file's tasks and schedules by name, in one transaction: all or "
            "nothing (idempotent). Prints what was created, updated and left alone."
        ),
    )
    p.add_argument("-f", "--file", metavar="FILE", required=True, help="TOML config file")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print what would be created, updated and left alone (with a changed "
        "schedule's next three fire times before and after) and write nothing",
    )
    p.set_defaults(func=_apply)


def _apply(args: argparse.Namespace, out: TextIO) -> int:
    config = load_config(args.file)
    with client_from_args(args) as client:
        report = apply_config(client, config, dry_run=args.dry_run)
    print(report, file=out)
    return EXIT_OK
