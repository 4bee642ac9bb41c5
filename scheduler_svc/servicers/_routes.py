"""Task.notify and Schedule.notify: notification routes between their messages and their
stored form (a JSON list of ``{"notifiers": [...], "events": [...], "every": bool}``, the
events as :class:`~scheduler_svc.values.EventKind` values; None when there are none)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scheduler_svc.errors import InvalidArgument
from scheduler_svc.values import EventKind
from tickwork.v1 import notifier_pb2

#: The events a route (a notifier's or a task's) may name, by NotificationEvent value.
EVENTS = {
    notifier_pb2.NOTIFICATION_EVENT_FINAL_FAILURE: EventKind.FINAL_FAILURE,
    notifier_pb2.NOTIFICATION_EVENT_RECOVERY: EventKind.RECOVERY,
    notifier_pb2.NOTIFICATION_EVENT_AUTO_DISABLED: EventKind.AUTO_DISABLED,
    notifier_pb2.NOTIFICATION_EVENT_NO_SUCCESS: EventKind.NO_SUCCESS,
    notifier_pb2.NOTIFICATION_EVENT_LONG_RUN: EventKind.LONG_RUN,
    notifier_pb2.NOTIFICATION_EVENT_MISSED_FIRE: EventKind.MISSED_FIRE,
    notifier_pb2.NOTIFICATION_EVENT_START_DEADLINE: EventKind.START_DEADLINE,
    notifier_pb2.NOTIFICATION_EVENT_NO_ACTIVE_WORKER: EventKind.NO_ACTIVE_WORKER,
    notifier_pb2.NOTIFICATION_EVENT_WORKER_RETURNED: EventKind.WORKER_RETURNED,
}
#: Every stored event kind as its NotificationEvent value (TEST included).
EVENT_VALUES = {v: k for k, v in EVENTS.items()} | {
    EventKind.TEST: notifier_pb2.NOTIFICATION_EVENT_TEST
}

#: The most routes one task or schedule has.
MAX_ROUTES = 20
#: The most notifiers one route names.
MAX_ROUTE_NOTIFIERS = 50


def stored_routes(
    routes: Sequence[notifier_pb2.NotifyRoute], field: str
) -> list[dict[str, Any]] | None:
    """The stored form of ``routes`` (``field``: ``task.notify`` or ``schedule.notify``),
    None when empty. Raises InvalidArgument naming ``field[i].<field>``."""
    if len(routes) > MAX_ROUTES:
        raise InvalidArgument(f"at most {MAX_ROUTES} routes", field=field)
    out = []
    for i, route in enumerate(routes):
        prefix = f"{field}[{i}]"
        if not route.notifiers:
            raise InvalidArgument("name at least one notifier", field=f"{prefix}.notifiers")
        if len(route.notifiers) > MAX_ROUTE_NOTIFIERS:
            raise InvalidArgument(
                f"at most {MAX_ROUTE_NOTIFIERS} notifiers", field=f"{prefix}.notifiers"
            )
        names = []
        for j, name in enumerate(route.notifiers):
            if not name.strip() or len(name) > 200:
                raise InvalidArgument(
                    "must be 1 to 200 characters", field=f"{prefix}.notifiers[{j}]"
                )
            names.append(name.strip())
        events = []
        for j, value in enumerate(route.events):
            if value not in EVENTS:
                raise InvalidArgument(
                    "not an event a route may name", field=f"{prefix}.events[{j}]"
                )
            events.append(str(EVENTS[value]))
        out.append({"notifiers": names, "events": events, "every": route.every})
    return out or None


def route_messages(stored: list[dict[str, Any]] | None) -> list[notifier_pb2.NotifyRoute]:
    """The NotifyRoute messages of a stored value."""
    return [
        notifier_pb2.NotifyRoute(
            notifiers=list(r.get("notifiers", ())),
            events=[EVENT_VALUES[EventKind(e)] for e in r.get("events", ())],
            every=bool(r.get("every", False)),
        )
        for r in stored or ()
    ]
