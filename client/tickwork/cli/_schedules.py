"""``tickwork schedules``: list, fires, trigger, enable, disable, pause, resume, label,
delete, backfill (create, update, get and preview are in
:mod:`tickwork.cli._schedule_edit`)."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from tickwork import _requests as rq
from tickwork.cli import _backfill, _schedule_edit
from tickwork.cli import _output as o
from tickwork.cli._common import (
    EXIT_OK,
    client_from_args,
    label_options,
    labels_of,
    labels_text,
    positive_int,
    selector_option,
)
from tickwork.cli._tasks import aware_time
from tickwork.v1.common_pb2 import Trigger
from tickwork.v1.schedule_pb2 import FireOutcome, Schedule


def add_parsers(sub: argparse._SubParsersAction[Any], net: argparse.ArgumentParser) -> None:
    """Add ``schedules`` and its actions; ``net`` is the parent parser of the connection
    options."""
    schedules = sub.add_parser(
        "schedules",
        help="create, update, list, enable, disable and delete schedules; show their fires",
    )
    ssub = schedules.add_subparsers(dest="schedules_command", metavar="ACTION", required=True)
    p = ssub.add_parser("list", parents=[net], help="list schedules with their next run")
    selector_option(p, "schedules")
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
        "pause",
        parents=[net],
        help="pause a schedule, with a note",
        description="Pause a schedule: it does not fire. The note, who paused it (the "
        "token's label) and when are shown by schedules list. Pausing a paused schedule "
        "replaces its note.",
    )
    p.add_argument("name", metavar="NAME", help="schedule name")
    p.add_argument("--note", default="", metavar="TEXT", help="why, for people")
    p.add_argument(
        "--until",
        type=aware_time,
        metavar="TIME",
        help="resume by itself at TIME, ISO 8601 with an offset (2026-12-01T15:00:00Z)",
    )
    p.set_defaults(func=_pause)
    p = ssub.add_parser(
        "resume",
        parents=[net],
        help="resume a paused schedule",
        description="Resume a schedule. The paused windows are not fired, unless the "
        "schedule's catch_up_on_resume is set (then they go through its catch-up policy).",
    )
    p.add_argument("name", metavar="NAME", help="schedule name")
    p.set_defaults(func=_resume)
    p = ssub.add_parser(
        "label",
        parents=[net],
        help="set a schedule's labels",
        description="Replace a schedule's labels with those given (schedules list "
        "--selector K=V picks schedules by them; apply --prune uses them as ownership).",
    )
    p.add_argument("name", metavar="NAME", help="schedule name")
    label_options(p)
    p.set_defaults(func=_label)
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
        schedules = client.list_schedules(selector=args.selector)
    rows = [
        [
            str(s.id),
            s.name,
            s.cron_description or s.cron_expression or f"every {s.interval_seconds} s",
            s.timezone,
            "yes" if s.enabled else "no",
            o.when(s, "next_run_time"),
            ", ".join(s.task_names) or ", ".join(str(i) for i in s.task_ids),
            labels_text(s.labels),
            o.first_line(pause_text(s)) if not s.enabled else "",
        ]
        for s in schedules
    ]
    headers = [
        "ID",
        "NAME",
        "CRON",
        "TIMEZONE",
        "ENABLED",
        "NEXT RUN (UTC)",
        "TASKS",
        "LABELS",
        "NOTE",
    ]
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


def pause_text(schedule: Schedule) -> str:
    """A paused schedule's note, who paused it and until when, e.g.
    ``"db migration (by alice, until 2026-12-01T15:00:00Z)"``."""
    parts = [f"by {schedule.paused_by}"] if schedule.paused_by else []
    if schedule.HasField("paused_until"):
        parts.append(f"until {o.when(schedule, 'paused_until')}")
    extra = f" ({', '.join(parts)})" if parts else ""
    return f"{schedule.pause_note or 'paused'}{extra}"


def _pause(args: argparse.Namespace, out: TextIO) -> int:
    with client_from_args(args) as client:
        schedule = client.pause_schedule(args.name, note=args.note, until=args.until)
    print(f"schedule {schedule.name}: paused: {pause_text(schedule)}", file=out)
    return EXIT_OK


def _resume(args: argparse.Namespace, out: TextIO) -> int:
    with client_from_args(args) as client:
        schedule = client.resume_schedule(args.name)
    state = "resumed"
    if schedule.HasField("next_run_time"):
        state += f", next run {o.when(schedule, 'next_run_time')}"
    print(f"schedule {schedule.name}: {state}", file=out)
    return EXIT_OK


def _label(args: argparse.Namespace, out: TextIO) -> int:
    labels = labels_of(args)
    with client_from_args(args) as client:
        schedule = client.update_schedule(args.name, labels=labels)
    print(f"schedule {schedule.name}: labels {labels_text(schedule.labels)}", file=out)
    return EXIT_OK


def _delete(args: argparse.Namespace, out: TextIO) -> int:
    with client_from_args(args) as client:
        client.delete_schedule(args.name)
    print(f"schedule {args.name}: deleted", file=out)
    return EXIT_OK
