"""``tickwork schedules``: list, fires, enable, disable, update, delete."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from tickwork import _requests as rq
from tickwork.cli import _output as o
from tickwork.cli._common import EXIT_OK, client_from_args, positive_int
from tickwork.v1.schedule_pb2 import FireOutcome


def add_parsers(sub: argparse._SubParsersAction[Any], net: argparse.ArgumentParser) -> None:
    """Add ``schedules`` and its actions; ``net`` is the parent parser of the connection
    options."""
    schedules = sub.add_parser(
        "schedules", help="list, enable, disable and delete schedules; show their fires"
    )
    ssub = schedules.add_subparsers(dest="schedules_command", metavar="ACTION", required=True)
    p = ssub.add_parser("list", parents=[net], help="list schedules with their next run")
    p.set_defaults(func=_list)
    p = ssub.add_parser(
        "fires", parents=[net], help="what came of a schedule's fire times, newest first"
    )
    p.add_argument("name", metavar="NAME", help="schedule name")
    p.add_argument("--limit", type=positive_int, default=20, metavar="N", help="default 20")
    p.set_defaults(func=_fires)
    for action, enabled in (("enable", True), ("disable", False)):
        p = ssub.add_parser(
            action,
            parents=[net],
            help=f"{action} a schedule",
            description="Enable or disable a schedule. Its next run is computed from now: "
            "enabling never catches up the time it was disabled.",
        )
        p.add_argument("name", metavar="NAME", help="schedule name")
        p.set_defaults(func=_enable, enabled=enabled)
    p = ssub.add_parser(
        "update",
        parents=[net],
        help="change a schedule's settings",
        description="Change the given settings of a schedule; the others stay.",
    )
    p.add_argument("name", metavar="NAME", help="schedule name")
    p.add_argument(
        "--start-deadline",
        type=float,
        metavar="S",
        help="notify (start_deadline) when a fire's job has not started S seconds after "
        "the fire time; 0: never",
    )
    p.set_defaults(func=_update)
    p = ssub.add_parser(
        "delete",
        parents=[net],
        help="delete a schedule and its fire history (its tasks stay)",
    )
    p.add_argument("name", metavar="NAME", help="schedule name")
    p.set_defaults(func=_delete)


def _list(args: argparse.Namespace, out: TextIO) -> int:
    with client_from_args(args) as client:
        schedules = client.list_schedules()
    rows = [
        [
            str(s.id),
            s.name,
            s.cron_description or s.cron_expression or f"every {s.interval_seconds} s",
            s.timezone,
            "yes" if s.enabled else "no",
            o.when(s, "next_run_time"),
            ", ".join(s.task_names) or ", ".join(str(i) for i in s.task_ids),
        ]
        for s in schedules
    ]
    headers = ["ID", "NAME", "CRON", "TIMEZONE", "ENABLED", "NEXT RUN (UTC)", "TASKS"]
    o.table(headers, rows, out)
    return EXIT_OK


def _fires(args: argparse.Namespace, out: TextIO) -> int:
    with client_from_args(args) as client:
        fires = client.list_fires(args.name, limit=args.limit)
    rows = [
        [
            o.when(f, "fire_time"),
            rq.enum_label(FireOutcome, f.outcome),
            "; ".join(o.run_text(r) for r in f.runs) or "-",
        ]
        for f in fires
    ]
    o.table(["FIRE TIME (UTC)", "OUTCOME", "TASKS"], rows, out)
    return EXIT_OK


def _enable(args: argparse.Namespace, out: TextIO) -> int:
    with client_from_args(args) as client:
        schedule = client.update_schedule(args.name, enabled=args.enabled)
    state = "enabled" if schedule.enabled else "disabled"
    if schedule.HasField("next_run_time"):
        state += f", next run {o.when(schedule, 'next_run_time')}"
    print(f"schedule {schedule.name}: {state}", file=out)
    return EXIT_OK


def _update(args: argparse.Namespace, out: TextIO) -> int:
    fields: rq.ScheduleFields = {}
    if args.start_deadline is not None:
        fields["start_deadline_seconds"] = args.start_deadline
    with client_from_args(args) as client:
        schedule = client.update_schedule(args.name, **fields)
    deadline = schedule.start_deadline_seconds
    print(
        f"schedule {schedule.name}: updated, start deadline "
        + (f"{deadline:g} s" if deadline else "none"),
        file=out,
    )
    return EXIT_OK


def _delete(args: argparse.Namespace, out: TextIO) -> int:
    with client_from_args(args) as client:
        client.delete_schedule(args.name)
    print(f"schedule {args.name}: deleted", file=out)
    return EXIT_OK
