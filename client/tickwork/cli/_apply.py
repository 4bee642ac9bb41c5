"""``tickwork apply -f FILE``: upsert a TOML file's tasks and schedules by name."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from tickwork.apply import apply_config, load_config
from tickwork.cli._common import EXIT_OK, client_from_args
from tickwork.errors import InvalidArgument


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
    p.add_argument(
        "--prune",
        action="store_true",
        help="also delete the stored tasks and schedules that match --selector and that "
        "the file does not name (in the same transaction); needs --selector",
    )
    p.add_argument(
        "--selector",
        default="",
        metavar="K=V[,K=V...]",
        help="with --prune: the labels of what this file owns, e.g. owner=team-a",
    )
    p.set_defaults(func=_apply)


def _apply(args: argparse.Namespace, out: TextIO) -> int:
    if args.prune and not args.selector.strip():
        raise InvalidArgument(
            "--prune needs --selector K=V: the labels of what this file owns (pruning "
            "without one would delete every task and schedule the file does not name)"
        )
    if args.selector and not args.prune:
        raise InvalidArgument("--selector: only with --prune")
    config = load_config(args.file)
    with client_from_args(args) as client:
        report = apply_config(
            client, config, dry_run=args.dry_run, prune_selector=args.selector if args.prune else ""
        )
    print(report, file=out)
    return EXIT_OK
