"""``tickwork schedules``: list, fires, trigger, enable, disable, delete, backfill (create,
update, get and preview are in :mod:`tickwork.cli._schedule_edit`)."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from tickwork import _requests as rq
from tickwork.cli import _backfill, _schedule_edit
from tickwork.cli import _output as o
from tickwork.cli._common import EXIT_OK, client_from_args, positive_int
from tickwork.v1.common_pb2 import Trigger
from tickwork.v1.schedule_pb2 import FireOutcome


def add_parsers(sub: argparse._SubParsersAction[Any], net: argparse.ArgumentParser) -> None:
    """Add ``schedules`` and its actions; ``net`` is the parent parser of the connection
    options."""
    schedules = sub.add_parser(
        "schedules",
        help="create, update, list, enable, disable and delete schedules; show their fires",
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
    p = ssub.add_parser(
        "trigger",
        parents=[net],
        help="fire a schedule now (its next run is unchanged)",
        description="Fire a schedule now: all its tasks, as its next fire would, through "
        "its overlap policy, in the manual lane. Recorded as a fire with trigger MANUAL; "
        "its next run is unchanged. A paused or disabled schedule fires too.",
    )
    p.add_argument("name", metavar="NAME", help="schedule name")
    p.set_defaults(func=_trigger)
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
        "delete",
        parents=[net],
        help="delete a schedule and its fire history (its tasks stay)",
    )
    p.add_argument("name", metavar="NAME", help="schedule name")
    p.set_defaults(func=_delete)
    _schedule_edit.add_parsers(ssub, net)
    _backfill.add_parser(ssub, net)


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
            rq.enum_label(Trigger, f.trigger) if f.trigger else "-",
            "; ".join(o.run_text(r) for r in f.runs) or "-",
        ]
        for f in fires
    ]
    o.table(["FIRE TIME (UTC)", "OUTCOME", "TRIGGER", "TASKS"], rows, out)
    return EXIT_OK


def _trigger(args: argparse.Namespace, out: TextIO) -> int:
    with client_from_args(args) as client:
        fire = client.trigger_schedule(args.name, trigger=Trigger.TRIGGER_MANUAL)
    runs = "; ".join(o.run_text(r) for r in fire.runs) or "-"
    outcome = rq.enum_label(FireOutcome, fire.outcome)
    print(
        f"schedule {args.name}: fired at {o.when(fire, 'fire_time')}, {outcome}: {runs}", file=out
    )
    return EXIT_OK


def _enable(args: argparse.Namespace, out: TextIO) -> int:
    with client_from_args(args) as client:
        schedule = client.update_schedule(args.name, enabled=args.enabled)
    state = "enabled" if schedule.enabled else "disabled"
    if schedule.HasField("next_run_time"):
        state += f", next run {o.when(schedule, 'next_run_time')}"
    print(f"schedule {schedule.name}: {state}", file=out)
    return EXIT_OK


def _delete(args: argparse.Namespace, out: TextIO) -> int:
    with client_from_args(args) as client:
        client.delete_schedule(args.name)
    print(f"schedule {args.name}: deleted", file=out)
    return EXIT_OK
