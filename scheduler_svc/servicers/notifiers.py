"""NotifierService: declare notifiers and their routes, test one, list what was sent.

A notifier read back never carries its secrets (url, secret): only ``has_url`` and
``has_secret`` say they were written.
"""

from __future__ import annotations

import asyncio
import re
import urllib.parse
import uuid
from typing import Any

import grpc

from scheduler_svc import notify, validation
from scheduler_svc.app import App
from scheduler_svc.errors import InvalidArgument, NotFound, Reason, Resource
from scheduler_svc.servicers import _convert as cv
from scheduler_svc.servicers._errors import rpc_errors
from scheduler_svc.servicers._routes import EVENT_VALUES, EVENTS
from scheduler_svc.store.outbox import DeliveryRecord, EventRecord, NotifierRecord
from scheduler_svc.values import DeliveryStatus, EventKind, NotifierType
from tickwork.v1 import notifier_pb2, notifier_pb2_grpc

Ctx = grpc.aio.ServicerContext[Any, Any]

_TYPES = {
    notifier_pb2.NOTIFIER_TYPE_EMAIL: NotifierType.EMAIL,
    notifier_pb2.NOTIFIER_TYPE_WEBHOOK: NotifierType.WEBHOOK,
    notifier_pb2.NOTIFIER_TYPE_SLACK: NotifierType.SLACK,
}
_TYPE_VALUES = {v: k for k, v in _TYPES.items()}
_STATUSES = {
    notifier_pb2.NOTIFICATION_STATUS_PENDING: DeliveryStatus.PENDING,
    notifier_pb2.NOTIFICATION_STATUS_SENT: DeliveryStatus.SENT,
    notifier_pb2.NOTIFICATION_STATUS_GIVEN_UP: DeliveryStatus.GIVEN_UP,
}
_STATUS_VALUES = {v: k for k, v in _STATUSES.items()}
#: The longest wait of TestNotifier beyond the notifier's own timeout, seconds.
_TEST_MARGIN_S = 5.0


#: One plain address (``local@domain``): no display name, no list, no white space or
#: control characters (an address becomes a mail header).
_EMAIL_ADDRESS = re.compile(
    r"[^@\s,;<>()\[\]\\\"\x00-\x1f\x7f]+@[^@\s,;<>()\[\]\\\"\x00-\x1f\x7f]+"
)


def _email_address(address: str, field: str) -> str:
    """``address`` if it is one plain address. Raises InvalidArgument naming ``field``."""
    if not _EMAIL_ADDRESS.fullmatch(address):
        raise InvalidArgument(
            f"not one plain email address (name@domain, no spaces, commas or control "
            f"characters): {address!r:.100}",
            field=field,
        )
    return address


def _http_url(text: str, field: str) -> str:
    """``text`` if it is an http(s) URL with a host (and a valid port), with no white space
    or control characters. Raises InvalidArgument naming ``field`` (never the URL, which
    may hold credentials)."""
    url = urllib.parse.urlsplit(text)
    try:
        port_ok = url.port is None or url.port > 0
    except ValueError:  # out of range, or not a number
        port_ok = False
    bad_chars = any(c.isspace() or not c.isprintable() for c in text)
    if url.scheme not in ("http", "https") or not url.hostname or not port_ok or bad_chars:
        raise InvalidArgument(
            "must be an http:// or https:// URL with a host (a port from 1 to 65535 if "
            "any), without spaces or control characters",
            field=field,
        )
    return text


def notifier_record(msg: notifier_pb2.Notifier) -> NotifierRecord:
    """A Notifier message as a record, checked. Raises InvalidArgument naming the field."""
    name = validation.name(msg.name, "notifier.name")
    kind = _TYPES.get(msg.type)
    if kind is None:
        raise InvalidArgument("must be EMAIL, WEBHOOK or SLACK", field="notifier.type")
    if not msg.timeout_seconds >= 0 or msg.timeout_seconds > 300:
        raise InvalidArgument("must be from 0 to 300 seconds", field="notifier.timeout_seconds")
    config: dict[str, Any] = {}
    if kind == NotifierType.EMAIL:
        if msg.url or msg.secret:
            raise InvalidArgument("an email notifier takes no url or secret", field="notifier.url")
        config["to"] = [
            _email_address(address, f"notifier.to[{i}]") for i, address in enumerate(msg.to)
        ]
    else:
        config["url"] = _http_url(msg.url, "notifier.url")
        if msg.to:
            raise InvalidArgument(f"a {kind} notifier takes no recipients", field="notifier.to")
        if msg.secret and kind == NotifierType.SLACK:
            raise InvalidArgument(
                "a slack notifier takes no secret (its url is the secret)",
                field="notifier.secret",
            )
        if msg.secret:
            config["secret"] = validation.free_text(msg.secret, "notifier.secret")
        if msg.timeout_seconds:
            config["timeout_seconds"] = msg.timeout_seconds
    events = []
    for i, value in enumerate(msg.events):
        if value not in EVENTS:
            raise InvalidArgument(
                f"must be one of {', '.join(str(event).upper() for event in EVENTS.values())}",
                field=f"notifier.events[{i}]",
            )
        events.append(str(EVENTS[value]))
    return NotifierRecord(
        name=name,
        type=kind,
        config=config,
        events=tuple(dict.fromkeys(events)),
        every=msg.every,
        tasks=tuple(
            validation.free_text(t, f"notifier.tasks[{i}]") for i, t in enumerate(msg.tasks)
        ),
        schedules=tuple(
            validation.free_text(s, f"notifier.schedules[{i}]") for i, s in enumerate(msg.schedules)
        ),
    )


def notifier_message(r: NotifierRecord, *, builtin: bool = False) -> notifier_pb2.Notifier:
    """A record as a Notifier message, its secrets left out."""
    msg = notifier_pb2.Notifier(
        name=r.name,
        type=_TYPE_VALUES[r.type],
        to=list(r.config.get("to") or ()),
        timeout_seconds=float(r.config.get("timeout_seconds") or 0),
        events=[EVENT_VALUES[EventKind(e)] for e in r.events],
        every=r.every,
        tasks=list(r.tasks),
        schedules=list(r.schedules),
        has_url=bool(r.config.get("url")),
        has_secret=bool(r.config.get("secret")),
        builtin=builtin,
        create_time=cv.ts(r.created_at) if r.created_at is not None else None,
        update_time=cv.ts(r.updated_at) if r.updated_at is not None else None,
    )
    return msg


def notification_message(d: DeliveryRecord) -> notifier_pb2.Notification:
    """A delivery as a Notification message."""
    msg = notifier_pb2.Notification(
        id=d.id,
        event_id=d.event.event_id,
        event=EVENT_VALUES[d.event.kind],
        notifier=d.notifier,
        status=_STATUS_VALUES[d.status],
        attempts=d.attempts,
        last_error=d.last_error,
        task_name=d.event.task_name,
        job_id=d.event.job_id or 0,
        state_change=d.event.state_change,
        event_time=cv.ts(d.event.occurred_at),
        sent_time=cv.ts(d.sent_at) if d.status == DeliveryStatus.SENT else None,
        next_attempt_time=cv.ts(d.next_attempt_at) if d.status == DeliveryStatus.PENDING else None,
    )
    return msg


class NotifierServicer(notifier_pb2_grpc.NotifierServiceServicer):
    """tickwork.v1.NotifierService."""

    def __init__(self, app: App) -> None:
        self.app = app

    def _builtin(self) -> NotifierRecord | None:
        return notify.smtp_notifier(self.app.settings.smtp)

    async def _all(self) -> list[tuple[NotifierRecord, bool]]:
        declared = await self.app.store.outbox.list_notifiers()
        out = [(n, False) for n in declared]
        builtin = self._builtin()
        if builtin is not None and builtin.name not in {n.name for n in declared}:
            out.append((builtin, True))
        return sorted(out, key=lambda pair: pair[0].name)

    @rpc_errors
    async def PutNotifier(
        self, request: notifier_pb2.PutNotifierRequest, context: Ctx
    ) -> notifier_pb2.PutNotifierResponse:
        record = notifier_record(request.notifier)
        stored, created, changed = await self.app.store.outbox.put_notifier(
            record, self.app.clock(), validate_only=request.validate_only
        )
        return notifier_pb2.PutNotifierResponse(
            notifier=notifier_message(stored), created=created, changed=changed
        )

    @rpc_errors
    async def ListNotifiers(
        self, request: notifier_pb2.ListNotifiersRequest, context: Ctx
    ) -> notifier_pb2.ListNotifiersResponse:
        return notifier_pb2.ListNotifiersResponse(
            notifiers=[notifier_message(n, builtin=b) for n, b in await self._all()]
        )

    @rpc_errors
    async def DeleteNotifier(
        self, request: notifier_pb2.DeleteNotifierRequest, context: Ctx
    ) -> notifier_pb2.DeleteNotifierResponse:
        await self.app.store.outbox.delete_notifier(request.name)
        return notifier_pb2.DeleteNotifierResponse()

    @rpc_errors
    async def TestNotifier(
        self, request: notifier_pb2.TestNotifierRequest, context: Ctx
    ) -> notifier_pb2.TestNotifierResponse:
        found = {n.name: n for n, _ in await self._all()}.get(request.name)
        if found is None:
            raise NotFound(
                f"no notifier named {request.name!r}",
                field="name",
                reason=Reason.NOTIFIER_NOT_FOUND,
                resource=Resource("tickwork.v1.Notifier", request.name, "name"),
            )
        now = self.app.clock()
        event = EventRecord(
            id=0,
            event_id=uuid.uuid4().hex,
            kind=EventKind.TEST,
            state_change=True,
            task_id=None,
            task_name="",
            schedule_id=None,
            job_id=None,
            details={"notifier": found.name},
            occurred_at=now,
        )
        timeout = float(found.config.get("timeout_seconds") or notify.DEFAULT_TIMEOUT_S)
        smtp = self.app.settings.smtp
        try:
            error = await asyncio.wait_for(
                notify.deliver(found, event, smtp),
                max(timeout, smtp.timeout_s) + _TEST_MARGIN_S,
            )
        except TimeoutError:
            error = "no answer in time"
        return notifier_pb2.TestNotifierResponse(
            delivered=not error, error=error, event_id=event.event_id
        )

    @rpc_errors
    async def ListNotifications(
        self, request: notifier_pb2.ListNotificationsRequest, context: Ctx
    ) -> notifier_pb2.ListNotificationsResponse:
        limit = request.limit or 50
        if not 1 <= limit <= 1000:
            raise InvalidArgument("must be from 1 to 1000 (0: 50)", field="limit")
        status = None
        if request.status:
            if request.status not in _STATUSES:
                raise InvalidArgument("unknown status", field="status")
            status = _STATUSES[request.status]
        rows = await self.app.store.outbox.list_deliveries(
            limit=limit, notifier=request.notifier, status=status
        )
        return notifier_pb2.ListNotificationsResponse(
            notifications=[notification_message(d) for d in rows]
        )
