"""The notification outbox: events written in the transaction that caused them, their
routing to notifiers, and each delivery's claim, outcome and history.

An event is born in the store transaction of its state change (:func:`insert_event`, from
:mod:`.finish`, and from :mod:`.alerts` for the conditions it checks), so it exists exactly
when the change does. The sender
(:mod:`scheduler_svc.sender`) then, each in its own transaction: routes new events into one
PENDING delivery per notifier (:meth:`Outbox.route`), claims the due deliveries
(:meth:`Outbox.claim_due`: a conditional UPDATE, so two replicas never send the same
attempt), and records each attempt's outcome (:meth:`Outbox.record`): SENT, retried after a
backoff, or GIVEN_UP. A delivery is sent at least once; the event's ``event_id`` lets the
receiver drop a repeat.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from scheduler_svc.db import Database, Dialect
from scheduler_svc.errors import NotFound, Reason, Resource
from scheduler_svc.records import JobRecord
from scheduler_svc.schema import (
    notification_deliveries,
    notification_events,
    notifiers,
    schedules,
    tasks,
)
from scheduler_svc.store import locks
from scheduler_svc.values import DeliveryStatus, EventKind, NotifierType

#: The event kinds a notifier whose route names none receives.
DEFAULT_EVENTS = (
    EventKind.FINAL_FAILURE,
    EventKind.RECOVERY,
    EventKind.AUTO_DISABLED,
    EventKind.NO_SUCCESS,
    EventKind.LONG_RUN,
    EventKind.MISSED_FIRE,
    EventKind.START_DEADLINE,
    EventKind.NO_ACTIVE_WORKER,
    EventKind.WORKER_RETURNED,
)
#: The longest job error an event carries, in characters.
EVENT_ERROR_CHARS = 2000


@dataclass(frozen=True)
class NotifierRecord:
    """A notifier and its route. ``config`` holds its type's settings, secrets included
    (``url``, ``secret``, ``to``, ``timeout_seconds``): never return it whole.

    Route: the event kinds it gets (``events``; empty: :data:`DEFAULT_EVENTS`); ``every``
    False: only changes of state (the first final failure, the recovery, an auto-disable),
    True: every event; ``tasks`` and ``schedules``: only events of these task names and
    of jobs of these schedule names (empty: any).
    """

    name: str
    type: NotifierType
    config: dict[str, Any] = field(default_factory=dict, repr=False)
    events: tuple[str, ...] = ()
    every: bool = False
    tasks: tuple[str, ...] = ()
    schedules: tuple[str, ...] = ()
    created_at: dt.datetime | None = None
    updated_at: dt.datetime | None = None

    def wants(self, event: EventRecord, schedule_name: str | None) -> bool:
        """Whether this notifier's route takes ``event`` (of a job of ``schedule_name``)."""
        if event.kind == EventKind.TEST:
            return event.details.get("notifier") == self.name
        if event.kind not in (self.events or DEFAULT_EVENTS):
            return False
        if not (self.every or event.state_change):
            return False
        if self.tasks and event.task_name not in self.tasks:
            return False
        return not self.schedules or schedule_name in self.schedules


@dataclass(frozen=True)
class EventRecord:
    """One outbox event. ``event_id``: stable across every delivery and retry of it."""

    id: int
    event_id: str
    kind: EventKind
    state_change: bool
    task_id: int | None
    task_name: str
    schedule_id: int | None
    job_id: int | None
    details: dict[str, Any]
    occurred_at: dt.datetime


@dataclass(frozen=True)
class DeliveryRecord:
    """One event's delivery through one notifier, with its event."""

    id: int
    event: EventRecord
    notifier: str
    status: DeliveryStatus
    attempts: int
    next_attempt_at: dt.datetime | None
    last_error: str
    sent_at: dt.datetime | None
    created_at: dt.datetime


# ------------------------------------------------------------------- event birth


def insert_event(
    conn: Connection,
    kind: EventKind,
    *,
    state_change: bool,
    task_id: int | None,
    task_name: str,
    now: dt.datetime,
    job: JobRecord | None = None,
    schedule_id: int | None = None,
    details: dict[str, Any] | None = None,
) -> str:
    """Write one event to the outbox in ``conn``'s transaction; its new event id (32 hex
    digits). ``details`` are the kind's own fields; a ``job`` adds its id, status, attempt,
    trigger, error (first :data:`EVENT_ERROR_CHARS`) and times (ISO 8601, UTC), and its
    schedule (else ``schedule_id``, for an event of a schedule itself)."""
    event_id = uuid.uuid4().hex
    body = dict(details or {})
    if job is not None:
        body["job"] = {
            "id": job.id,
            "status": str(job.status),
            "attempt": job.attempt,
            "trigger": str(job.trigger),
            "error": job.error[:EVENT_ERROR_CHARS],
            "started_at": _iso(job.started_at),
            "finished_at": _iso(job.finished_at),
            "fire_time": _iso(job.fire_time),
        }
    conn.execute(
        notification_events.insert().values(
            event_id=event_id,
            kind=kind,
            state_change=state_change,
            task_id=task_id,
            task_name=task_name,
            schedule_id=job.schedule_id if job is not None else schedule_id,
            job_id=job.id if job is not None else None,
            details=body,
            occurred_at=now,
            routed=False,
        )
    )
    return event_id


def _iso(when: dt.datetime | None) -> str | None:
    return None if when is None else when.astimezone(dt.UTC).isoformat()


def _event(m: Any) -> EventRecord:
    return EventRecord(
        id=m["id"],
        event_id=m["event_id"],
        kind=EventKind(m["kind"]),
        state_change=bool(m["state_change"]),
        task_id=m["task_id"],
        task_name=m["task_name"],
        schedule_id=m["schedule_id"],
        job_id=m["job_id"],
        details=dict(m["details"] or {}),
        occurred_at=m["occurred_at"],
    )


def _notifier(m: Any) -> NotifierRecord:
    return NotifierRecord(
        name=m["name"],
        type=NotifierType(m["type"]),
        config=dict(m["config"] or {}),
        events=tuple(m["events"] or ()),
        every=bool(m["every"]),
        tasks=tuple(m["tasks"] or ()),
        schedules=tuple(m["schedules"] or ()),
        created_at=m["created_at"],
        updated_at=m["updated_at"],
    )


_EVENT_COLUMNS = [c.label(f"event__{c.name}") for c in notification_events.c]


def _delivery(row: sa.Row[Any]) -> DeliveryRecord:
    m = row._mapping
    event = _event({c.name: m[f"event__{c.name}"] for c in notification_events.c})
    return DeliveryRecord(
        id=m["id"],
        event=event,
        notifier=m["notifier"],
        status=DeliveryStatus(m["status"]),
        attempts=m["attempts"],
        next_attempt_at=m["next_attempt_at"],
        last_error=m["last_error"],
        sent_at=m["sent_at"],
        created_at=m["created_at"],
    )


def _deliveries_query() -> sa.Select[Any]:
    return sa.select(notification_deliveries, *_EVENT_COLUMNS).join(
        notification_events, notification_events.c.id == notification_deliveries.c.event
    )


def route_takes(route: dict[str, Any], event: EventRecord) -> bool:
    """Whether a task's or a schedule's stored route sends ``event``: its kind is one the
    route names (none named: :data:`DEFAULT_EVENTS`), and it is a change of state or the
    route asks for every event."""
    kinds = route.get("events") or DEFAULT_EVENTS
    return event.kind in kinds and (bool(route.get("every")) or event.state_change)


def _targets(
    event: EventRecord,
    own_routes: Sequence[dict[str, Any]],
    every: Sequence[NotifierRecord],
    builtin: Sequence[NotifierRecord],
    schedule_name: str | None,
) -> list[str]:
    """The notifiers (names) ``event`` goes to: with routes of its task or schedule
    (``own_routes``), the notifiers those that take it name, and the built-in ones whose
    own route takes it; without, every notifier whose own route takes it."""
    if not own_routes:
        return [n.name for n in every if n.wants(event, schedule_name)]
    named = {name for r in own_routes if route_takes(r, event) for name in r["notifiers"]}
    named |= {n.name for n in builtin if n.wants(event, schedule_name)}
    return sorted(named)


#: The notifier columns a put compares, as the Notifier fields they hold.
_NOTIFIER_FIELDS = ("type", "events", "every", "tasks", "schedules")
_CONFIG_FIELDS = ("url", "secret", "to", "timeout_seconds")


def put_notifier_row(
    conn: Connection, dialect: Dialect, notifier: NotifierRecord, now: dt.datetime
) -> tuple[NotifierRecord, bool, tuple[str, ...]]:
    """Create the notifier, or replace the one of that name (its ``created_at`` kept;
    nothing written when every field, secrets included, is the same), in ``conn``'s
    transaction. The notifier as stored, whether it was created, and the Notifier fields
    that differed (sorted; empty when created or unchanged)."""
    values = {
        "type": notifier.type,
        "config": notifier.config,
        "events": list(notifier.events),
        "every": notifier.every,
        "tasks": list(notifier.tasks),
        "schedules": list(notifier.schedules),
    }
    select = notifiers.select().where(notifiers.c.name == notifier.name)
    old = conn.execute(locks.for_update(dialect, select)).first()
    if old is None:
        conn.execute(
            notifiers.insert().values(name=notifier.name, created_at=now, updated_at=now, **values)
        )
        return _notifier(conn.execute(select).one()._mapping), True, ()
    before = old._mapping
    changed = [f for f in _NOTIFIER_FIELDS if before[f] != values[f]]
    old_config = dict(before["config"] or {})
    changed += [f for f in _CONFIG_FIELDS if old_config.get(f) != notifier.config.get(f)]
    if not changed:
        return _notifier(before), False, ()
    conn.execute(
        notifiers.update().where(notifiers.c.name == notifier.name).values(updated_at=now, **values)
    )
    return _notifier(conn.execute(select).one()._mapping), False, tuple(sorted(changed))


# ----------------------------------------------------------------------- the outbox


class Outbox:
    """The notification tables behind one async interface (each method one transaction;
    ``now`` aware UTC from the caller)."""

    def __init__(self, database: Database) -> None:
        self.db = database

    # ---------------------------------------------------------------- notifiers

    async def put_notifier(
        self, notifier: NotifierRecord, now: dt.datetime, *, validate_only: bool = False
    ) -> tuple[NotifierRecord, bool, bool]:
        """Create the notifier, or replace the one of that name (its ``created_at`` kept;
        nothing written when every field, secrets included, is the same). The notifier as
        stored, whether it was created, and whether anything was written.
        ``validate_only``: the same answer, with nothing written (a dry run)."""

        def run(conn: Connection) -> tuple[NotifierRecord, bool, bool]:
            stored, created, changed = put_notifier_row(conn, self.db.dialect, notifier, now)
            return stored, created, created or bool(changed)

        return await (self.db.rehearse(run) if validate_only else self.db.write(run))

    async def delete_notifier(self, name: str) -> None:
        """Delete the notifier ``name``; its deliveries stay in the history.
        Raises NotFound(field="name")."""

        def run(conn: Connection) -> None:
            if not conn.execute(notifiers.delete().where(notifiers.c.name == name)).rowcount:
                raise NotFound(
                    f"no notifier named {name!r}",
                    field="name",
                    reason=Reason.NOTIFIER_NOT_FOUND,
                    resource=Resource("tickwork.v1.Notifier", name, "name"),
                )

        await self.db.write(run)

    async def list_notifiers(self) -> list[NotifierRecord]:
        """Every declared notifier, by name."""
        return await self.db.read(
            lambda conn: [
                _notifier(r._mapping)
                for r in conn.execute(notifiers.select().order_by(notifiers.c.name))
            ]
        )

    # ------------------------------------------------------------- the sender's side

    async def add_event(
        self, kind: EventKind, now: dt.datetime, *, task_name: str = "", details: dict[str, Any]
    ) -> str:
        """Write an event that no state change caused (a test event); its event id."""
        return await self.db.write(
            lambda conn: insert_event(
                conn,
                kind,
                state_change=True,
                task_id=None,
                task_name=task_name,
                now=now,
                details=details,
            )
        )

    async def route(
        self,
        now: dt.datetime,
        routes: Callable[[], Sequence[NotifierRecord]],
        *,
        limit: int = 500,
    ) -> int:
        """Route up to ``limit`` new events, oldest first, each once whatever other senders
        do at the same time: one PENDING delivery, due now, per notifier it goes to
        (:func:`_targets`: the routes of its task and schedule, else each notifier's own),
        of the declared ones (read in the same transaction) and ``routes()`` (a name in
        both is the declared one); the events are then marked routed. The number of events
        routed."""

        def run(conn: Connection) -> int:
            unrouted = (
                notification_events.select()
                .where(notification_events.c.routed.is_(False))
                .order_by(notification_events.c.id)
                .limit(limit)
            )
            if self.db.dialect.skip_locked:
                # Another sender routing now holds its events: they are passed over, not
                # routed twice. (SQLite's writers are serialized already.)
                unrouted = unrouted.with_for_update(skip_locked=True)
            events = [_event(r._mapping) for r in conn.execute(unrouted)]
            if not events:
                return 0
            declared = [_notifier(r._mapping) for r in conn.execute(notifiers.select())]
            names = {n.name for n in declared}
            builtin = [n for n in routes() if n.name not in names]
            every = declared + builtin
            schedule_ids = {e.schedule_id for e in events if e.schedule_id is not None}
            task_ids = {e.task_id for e in events if e.task_id is not None}
            schedule_rows = (
                conn.execute(
                    sa.select(schedules.c.id, schedules.c.name, schedules.c.notify).where(
                        schedules.c.id.in_(schedule_ids)
                    )
                ).all()
                if schedule_ids
                else []
            )
            schedule_names = {r.id: r.name for r in schedule_rows}
            own: dict[tuple[str, int], list[dict[str, Any]]] = {
                ("schedule", r.id): r.notify for r in schedule_rows if r.notify
            }
            if task_ids:
                found = sa.select(tasks.c.id, tasks.c.notify).where(tasks.c.id.in_(task_ids))
                own.update({("task", r.id): r.notify for r in conn.execute(found) if r.notify})
            deliveries = [
                {
                    "event": event.id,
                    "notifier": name,
                    "status": DeliveryStatus.PENDING,
                    "attempts": 0,
                    "next_attempt_at": now,
                    "last_error": "",
                    "sent_at": None,
                    "created_at": now,
                }
                for event in events
                for name in _targets(
                    event,
                    own.get(("task", event.task_id or 0), [])
                    + own.get(("schedule", event.schedule_id or 0), []),
                    every,
                    builtin,
                    schedule_names.get(event.schedule_id or 0),
                )
            ]
            if deliveries:
                conn.execute(notification_deliveries.insert(), deliveries)
            conn.execute(
                notification_events.update()
                .where(notification_events.c.id.in_([e.id for e in events]))
                .values(routed=True)
            )
            return len(events)

        return await self.db.write(run)

    async def claim_due(
        self, now: dt.datetime, claim_s: float, *, limit: int = 50, exclude: Sequence[int] = ()
    ) -> list[DeliveryRecord]:
        """Claim up to ``limit`` PENDING deliveries due by ``now`` (oldest first, not in
        ``exclude``): each is moved ``claim_s`` seconds on by a conditional UPDATE, so no
        other sender takes it meanwhile, and comes back if this one dies mid-send."""

        def run(conn: Connection) -> list[DeliveryRecord]:
            due = (
                _deliveries_query()
                .where(
                    notification_deliveries.c.status == DeliveryStatus.PENDING,
                    notification_deliveries.c.next_attempt_at <= now,
                )
                .order_by(notification_deliveries.c.next_attempt_at, notification_deliveries.c.id)
                .limit(limit)
            )
            if exclude:
                due = due.where(notification_deliveries.c.id.not_in(list(exclude)))
            out = []
            until = now + dt.timedelta(seconds=claim_s)
            for row in conn.execute(due).all():
                claimed = conn.execute(
                    notification_deliveries.update()
                    .where(
                        notification_deliveries.c.id == row.id,
                        notification_deliveries.c.status == DeliveryStatus.PENDING,
                        notification_deliveries.c.next_attempt_at <= now,
                    )
                    .values(next_attempt_at=until)
                )
                if claimed.rowcount:
                    out.append(_delivery(row))
            return out

        return await self.db.write(run)

    async def record(
        self,
        delivery_id: int,
        now: dt.datetime,
        *,
        error: str,
        retry_at: dt.datetime | None,
    ) -> DeliveryStatus:
        """Record one attempt of a claimed delivery: ``error`` empty is SENT; otherwise it
        is retried at ``retry_at``, or GIVEN_UP when that is None. The new status."""
        if not error:
            status, values = DeliveryStatus.SENT, {"sent_at": now, "next_attempt_at": None}
        elif retry_at is None:
            status, values = DeliveryStatus.GIVEN_UP, {"next_attempt_at": None}
        else:
            status, values = DeliveryStatus.PENDING, {"next_attempt_at": retry_at}
        statement = (
            notification_deliveries.update()
            .where(notification_deliveries.c.id == delivery_id)
            .values(
                status=status,
                attempts=notification_deliveries.c.attempts + 1,
                last_error=error[:2000],
                **values,
            )
        )
        await self.db.write(lambda conn: conn.execute(statement))
        return status

    async def list_deliveries(
        self, *, limit: int = 50, notifier: str = "", status: DeliveryStatus | None = None
    ) -> list[DeliveryRecord]:
        """The newest ``limit`` deliveries first, of ``notifier`` (empty: any) in
        ``status`` (None: any)."""
        query = _deliveries_query().order_by(notification_deliveries.c.id.desc()).limit(limit)
        if notifier:
            query = query.where(notification_deliveries.c.notifier == notifier)
        if status is not None:
            query = query.where(notification_deliveries.c.status == status)
        return await self.db.read(lambda conn: [_delivery(r) for r in conn.execute(query)])

    async def list_events(self, *, limit: int = 100) -> list[EventRecord]:
        """The newest ``limit`` events first, routed or not."""
        query = notification_events.select().order_by(notification_events.c.id.desc()).limit(limit)
        return await self.db.read(lambda conn: [_event(r._mapping) for r in conn.execute(query)])
