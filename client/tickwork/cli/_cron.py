"""``tickwork cron EXPR``: describe a cron expression and preview its fire times, offline."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import Any, TextIO
from zoneinfo import ZoneInfo

from tickwork.cli._common import EXIT_OK, count
from tickwork.cron import DST_NOTE_TEXT, CronError, CronSchedule
from tickwork.errors import InvalidArgument


def add_parsers(sub: argparse._SubParsersAction[Any], net: argparse.ArgumentParser) -> None:
    """Add ``cron`` (offline: ``net`` is not used)."""
    p = sub.add_parser(
        "cron",
        help="describe a cron expression and preview its fire times (offline)",
        description="Describe a cron expression and print its next fire times in ISO 8601 "
        "with the zone's offset, strictly after --after, each followed by its DST note if "
        "any. Works without a server.",
    )
    p.add_argument("expression", metavar="EXPR", help='e.g. "0 2 * * *" or "*/10 * * * * *"')
    p.add_argument("--tz", default="UTC", metavar="ZONE", help="IANA time zone (default UTC)")
    p.add_argument(
        "--after",
        metavar="ISO8601",
        help="start instant (default now); without an offset it is read in --tz",
    )
    p.add_argument("--count", type=count, default=5, metavar="N", help="default 5, max 1000")
    p.set_defaults(func=_cron)


def _cron(args: argparse.Namespace, out: TextIO) -> int:
    try:
        schedule = CronSchedule(args.expression, args.tz)
    except CronError as err:
        raise InvalidArgument(str(err)) from None
    after = datetime.now(UTC)
    if args.after is not None:
        try:
            after = datetime.fromisoformat(args.after)
        except ValueError:
            raise InvalidArgument(f"--after: not an ISO 8601 date-time: {args.after!r}") from None
        if after.tzinfo is None:
            after = after.replace(tzinfo=ZoneInfo(args.tz))
    print(schedule.describe(), file=out)
    zone = ZoneInfo(args.tz)
    for preview in schedule.next_fire_times(after, args.count):
        line = preview.fire_time.astimezone(zone).isoformat()
        note = DST_NOTE_TEXT[preview.dst_note]
        print(f"{line}  {note}" if note else line, file=out)
    return EXIT_OK
