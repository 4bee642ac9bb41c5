"""``tickwork schedules backfill``: run a schedule's past windows (BackfillSchedule)."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from tickwork.cli import _output as o
from tickwork.cli._common import EXIT_OK, client_from_args
from tickwork.cli._tasks import aware_time
from tickwork.v1.schedule_pb2 import BackfillWindow


def add_parser(ssub: argparse._SubParsersAction[Any], net: argparse.ArgumentParser) -> None:
    """Add ``schedules backfill`` to the ``schedules`` actions ``ssub``."""
    p = ssub.add_parser(
        "backfill",
        parents=[net],
        help="run a schedule's past windows in a range (backfill lane)",
        description="Run the windows the schedule's cron expression had in its time zone "
        "from --from (inclusive) to --to (exclusive), oldest first, each as a fire of its "
        "own whose jobs carry that window as their fire time, in the backfill lane (after "
        "manual and scheduled jobs). A window that already fired is not run again. At most "
        "10,000 windows; --to not after now.",
    )
    p.add_argument("name", metavar="NAME", help="schedule name")
    p.add_argument(
        "--from",
        dest="start",
        type=aware_time,
        required=True,
        metavar="TIME",
        help="first instant, ISO 8601 with an offset (2026-10-01T00:00:00Z), inclusive",
    )
    p.add_argument(
        "--to",
        dest="end",
        type=aware_time,
        required=True,
        metavar="TIME",
        help="end of the range, ISO 8601 with an offset, exclusive",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="list the windows and which already fired"
    )
    p.set_defaults(func=_backfill)


def outcome(window: BackfillWindow, dry_run: bool) -> str:
    """What came of one window, in words."""
    if window.already_fired:
        return "already fired"
    if dry_run:
        return "would run"
    return "enqueued" if any(not r.skipped for r in window.runs) else "skipped"


def _backfill(args: argparse.Namespace, out: TextIO) -> int:
    with client_from_args(args) as client:
        answer = client.backfill_schedule(args.name, args.start, args.end, dry_run=args.dry_run)
    rows = [
        [
            o.when(w, "fire_time"),
            outcome(w, args.dry_run),
            "; ".join(o.run_text(r) for r in w.runs) or "-",
        ]
        for w in answer.windows
    ]
    o.table(["FIRE TIME (UTC)", "OUTCOME", "TASKS"], rows, out)
    counts = {"already fired": 0}
    for row in rows:
        counts[row[1]] = counts.get(row[1], 0) + 1
    summary = ", ".join(f"{n} {what}" for what, n in counts.items() if n)
    print(f"{len(rows)} windows" + (f": {summary}" if summary else ""), file=out)
    return EXIT_OK
