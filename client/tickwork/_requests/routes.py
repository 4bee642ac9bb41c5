"""Notification routes of tasks and schedules (``notify=``): NotifyRoute messages from
messages or mappings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from tickwork.errors import InvalidArgument
from tickwork.v1.notifier_pb2 import NotificationEvent, NotifyRoute

#: A route as the SDK takes it: a NotifyRoute, or a mapping with ``notifiers`` (names),
#: optional ``events`` (names such as ``"final_failure"``, or NotificationEvent values)
#: and optional ``every`` (bool).
Route = NotifyRoute | Mapping[str, Any]


def _event(value: object, where: str) -> NotificationEvent:
    if isinstance(value, int) and not isinstance(value, bool):
        return cast(NotificationEvent, value)
    if isinstance(value, str):
        name = "NOTIFICATION_EVENT_" + value.upper().removeprefix("NOTIFICATION_EVENT_")
        if name in NotificationEvent.DESCRIPTOR.values_by_name:
            return cast(NotificationEvent, NotificationEvent.Value(name))
    raise InvalidArgument(f"{where}: unknown event {value!r:.80}")


def notify_routes(routes: Sequence[Route]) -> list[NotifyRoute]:
    """The NotifyRoute messages of ``routes``. Raises InvalidArgument naming
    ``notify[i]`` for a route of the wrong shape or an unknown event name."""
    if isinstance(routes, str | bytes | Mapping) or not isinstance(routes, Sequence):
        raise InvalidArgument(f"notify: expected a list of routes, got {routes!r:.80}")
    out = []
    for i, route in enumerate(routes):
        if isinstance(route, NotifyRoute):
            out.append(route)
            continue
        if not isinstance(route, Mapping) or set(route) - {"notifiers", "events", "every"}:
            raise InvalidArgument(
                f"notify[{i}]: expected notifiers, events and every, got {route!r:.80}"
            )
        notifiers = route.get("notifiers", ())
        if isinstance(notifiers, str) or not all(isinstance(n, str) for n in notifiers):
            raise InvalidArgument(f"notify[{i}].notifiers: expected a list of names")
        every = route.get("every", False)
        if not isinstance(every, bool):
            raise InvalidArgument(f"notify[{i}].every: expected true or false")
        events = [
            _event(e, f"notify[{i}].events[{j}]") for j, e in enumerate(route.get("events", ()))
        ]
        out.append(NotifyRoute(notifiers=list(notifiers), events=events, every=every))
    return out
