"""``tickwork notifiers list|test NAME`` and ``tickwork notifications list``."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from tickwork import _requests as rq
from tickwork.cli import _output as o
from tickwork.cli._common import EXIT_FAILED, EXIT_OK, client_from_args, positive_int
from tickwork.v1.notifier_pb2 import (
    NotificationEvent,
    NotificationStatus,
    Notifier,
    NotifierType,
)

_STATUSES = {
    "pending": NotificationStatus.NOTIFICATION_STATUS_PENDING,
    "sent": NotificationStatus.NOTIFICATION_STATUS_SENT,
    "given-up": NotificationStatus.NOTIFICATION_STATUS_GIVEN_UP,
}


def add_parsers(sub: argparse._SubParsersAction[Any], net: argparse.ArgumentParser) -> None:
    """Add ``notifiers`` and ``notifications``; ``net`` is the parent parser of the
    connection options."""
    notifiers = sub.add_parser("notifiers", help="list notifiers; send a test through one")
    nsub = notifiers.add_subparsers(dest="notifiers_command", metavar="ACTION", required=True)
    p = nsub.add_parser("list", parents=[net], help="list notifiers and their routes")
    p.set_defaults(func=_list)
    p = nsub.add_parser(
        "test",
        parents=[net],
        help="send a test event through a notifier now",
        description="Send a test event through the notifier now and report whether its "
        "receiver took it (exit 1 when not). Nothing is retried or recorded.",
    )
    p.add_argument("name", metavar="NAME", help="notifier name")
    p.set_defaults(func=_test)

    notifications = sub.add_parser("notifications", help="what was notified, when, what failed")
    asub = notifications.add_subparsers(
        dest="notifications_command", metavar="ACTION", required=True
    )
    p = asub.add_parser("list", parents=[net], help="notifications, newest first")
    p.add_argument("--notifier", default="", metavar="NAME", help="only this notifier's")
    p.add_argument("--status", choices=sorted(_STATUSES), default=None, help="only in this status")
    p.add_argument("--limit", type=positive_int, default=50, metavar="N", help="default 50")
    p.set_defaults(func=_notifications)


def _route(n: Notifier) -> str:
    events = ", ".join(rq.enum_label(NotificationEvent, e).lower() for e in n.events)
    text = events or "every kind"
    text += "; every event" if n.every else "; changes of state"
    if n.tasks:
        text += f"; tasks {', '.join(n.tasks)}"
    if n.schedules:
        text += f"; schedules {', '.join(n.schedules)}"
    return text


def _target(n: Notifier) -> str:
    if n.type == NotifierType.NOTIFIER_TYPE_EMAIL:
        return ", ".join(n.to) or "SMTP_TO"
    return "url set" + (", signed" if n.has_secret else "") if n.has_url else "-"


def _list(args: argparse.Namespace, out: TextIO) -> int:
    with client_from_args(args) as client:
        notifiers = client.list_notifiers()
    rows = [
        [
            n.name + (" (SMTP_*)" if n.builtin else ""),
            rq.enum_label(NotifierType, n.type).lower(),
            _target(n),
            _route(n),
        ]
        for n in notifiers
    ]
    o.table(["NAME", "TYPE", "TO", "ROUTE"], rows, out)
    return EXIT_OK


def _test(args: argparse.Namespace, out: TextIO) -> int:
    with client_from_args(args) as client:
        result = client.test_notifier(args.name)
    if result.delivered:
        print(f"notifier {args.name}: test event {result.event_id} delivered", file=out)
        return EXIT_OK
    print(f"notifier {args.name}: test event not delivered: {result.error}", file=out)
    return EXIT_FAILED


def _notifications(args: argparse.Namespace, out: TextIO) -> int:
    status = _STATUSES[args.status] if args.status else None
    with client_from_args(args) as client:
        notes = client.list_notifications(limit=args.limit, notifier=args.notifier, status=status)
    rows = [
        [
            str(n.id),
            o.when(n, "event_time"),
            rq.enum_label(NotificationEvent, n.event).lower(),
            n.task_name or "-",
            n.notifier,
            rq.enum_label(NotificationStatus, n.status).lower().replace("_", "-"),
            str(n.attempts),
            o.when(n, "sent_time")
            if n.HasField("sent_time")
            else o.when(n, "next_attempt_time")
            if n.HasField("next_attempt_time")
            else "-",
            n.last_error or "-",
        ]
        for n in notes
    ]
    headers = ["ID", "EVENT TIME (UTC)", "EVENT", "TASK", "NOTIFIER", "STATUS", "ATTEMPTS"]
    o.table([*headers, "SENT / NEXT (UTC)", "LAST ERROR"], rows, out)
    return EXIT_OK
