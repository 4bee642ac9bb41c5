"""Events of schedules and of the service as a whole: missed fires, missed start
deadlines, and ready jobs waiting with no active worker (and the worker's return).

A missed fire's event is written in the transaction that records the miss
(:func:`insert_missed_fires`, from :mod:`.fires`). The other two are lasting conditions the
sender checks at each pass (:func:`check_start_deadlines`, :func:`check_workers`): a read
first (the usual answer is "nothing due", with no write transaction), then one transaction
that marks what it notifies under a conditional UPDATE or a keyed INSERT, so two replicas
never both notify it and a condition that lasts is notified once.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from scheduler_svc.db import Database, insert_skipping_conflicts
from scheduler_svc.records import FireRequest
from scheduler_svc.schema import jobs, leases, notification_conditions, schedules
from scheduler_svc.store import rows
from scheduler_svc.store.outbox import insert_event
from scheduler_svc.values import EventKind, JobStatus

#: The most fire times one missed_fire event lists (``missed_count`` counts them all).
MAX_LISTED_FIRE_TIMES = 100
#: The notification_conditions row of "ready jobs wait with no active worker".
NO_ACTIVE_WORKER = "no_active_worker"


def _iso(when: dt.datetime | None) -> str | None:
    return None if when is None else when.astimezone(dt.UTC).isoformat()


def insert_missed_fires(
    conn: Connection, claimed: Sequence[FireRequest], now: dt.datetime
) -> list[str]:
    """One missed_fire event per schedule of ``claimed`` (fires recorded for the first
    time, in ``conn``'s transaction) with missed windows: its earlier windows, and the fire
    itself when the catch-up policy did not enqueue it. The new events' ids."""
    missed: dict[int, list[dt.datetime]] = {}
    for r in claimed:
        times = [*r.missed_fire_times, *([r.fire_time] if r.missed else [])]
        if times:
            missed.setdefault(r.schedule_id, []).extend(times)
    if not missed:
        return []
    found = conn.execute(
        sa.select(schedules.c.id, schedules.c.name, schedules.c.catch_up_policy).where(
            schedules.c.id.in_(list(missed))
        )
    ).all()
    out = []
    for schedule_id, name, policy in sorted(found):
        times = sorted(missed[schedule_id])
        out.append(
            insert_event(
                conn,
                EventKind.MISSED_FIRE,
                state_change=True,
                task_id=None,
                task_name="",
                now=now,
                schedule_id=schedule_id,
                details={
                    "schedule": {"id": schedule_id, "name": name},
                    "catch_up_policy": policy,
                    "missed_count": len(times),
                    "fire_times": [_iso(t) for t in times[:MAX_LISTED_FIRE_TIMES]],
                },
            )
        )
    return out


async def check_start_deadlines(db: Database, now: dt.datetime) -> list[str]:
    """Every QUEUED first attempt of a fire whose schedule has a ``start_deadline_seconds``
    (> 0) and whose fire time is at least that long ago gets a start_deadline event, once
    per job (``jobs.start_deadline_notified``). The new events' ids."""
    query = (
        sa.select(
            jobs,
            schedules.c.name.label("schedule_name"),
            schedules.c.start_deadline_seconds.label("deadline"),
        )
        .join(schedules, schedules.c.id == jobs.c.schedule_id)
        .where(
            jobs.c.status == JobStatus.QUEUED,
            jobs.c.attempt == 1,
            jobs.c.start_deadline_notified.is_(False),
            jobs.c.fire_time.is_not(None),
            schedules.c.start_deadline_seconds > 0,
        )
    )
    candidates = await db.read(lambda conn: conn.execute(query).all())
    due = [
        (rows.job(row), row.schedule_name, row.deadline)
        for row in candidates
        if row.fire_time + dt.timedelta(seconds=row.deadline) <= now
    ]
    if not due:
        return []

    def run(conn: Connection) -> list[str]:
        out = []
        for job, schedule_name, deadline in due:
            marked = conn.execute(
                jobs.update()
                .where(
                    jobs.c.id == job.id,
                    jobs.c.status == JobStatus.QUEUED,
                    jobs.c.start_deadline_notified.is_(False),
                )
                .values(start_deadline_notified=True)
            )
            if not marked.rowcount:
                continue  # it started meanwhile, or another replica notified it
            out.append(
                insert_event(
                    conn,
                    EventKind.START_DEADLINE,
                    state_change=True,
                    task_id=job.task_id,
                    task_name=job.task_name,
                    now=now,
                    job=job,
                    details={
                        "schedule": {"id": job.schedule_id, "name": schedule_name},
                        "start_deadline_seconds": deadline,
                    },
                )
            )
        return out

    return await db.write(run)


def _waiting(conn: Connection, cutoff: dt.datetime) -> tuple[int, dt.datetime | None]:
    """How many QUEUED jobs have been ready since ``cutoff`` or earlier, and the earliest
    of their enqueue times."""
    ready_long = sa.and_(
        jobs.c.status == JobStatus.QUEUED,
        jobs.c.enqueued_at <= cutoff,
        sa.or_(jobs.c.not_before.is_(None), jobs.c.not_before <= cutoff),
    )
    count, oldest = conn.execute(
        sa.select(sa.func.count(), sa.func.min(jobs.c.enqueued_at)).where(ready_long)
    ).one()
    return int(count), oldest


def _live_worker(conn: Connection, now: dt.datetime) -> bool:
    """Whether a worker slot lease is held and unexpired at ``now``."""
    held = sa.select(leases.c.name).where(
        sa.or_(leases.c.name == "worker", leases.c.name.like("worker.%")),
        leases.c.holder.is_not(None),
        leases.c.holder != "",
        leases.c.expires_at >= now,
    )
    return conn.execute(held.limit(1)).first() is not None


async def check_workers(db: Database, now: dt.datetime, lease_ttl_s: float) -> list[str]:
    """The no-active-worker check: when QUEUED jobs have been ready longer than
    ``lease_ttl_s`` and no worker slot lease is live, one no_active_worker event, the
    condition then recorded (``notification_conditions``); once a worker's lease is live
    again, one worker_returned event and the record cleared. The new events' ids."""

    def look(conn: Connection) -> tuple[int, dt.datetime | None, bool, dt.datetime | None]:
        count, oldest = _waiting(conn, now - dt.timedelta(seconds=lease_ttl_s))
        since = conn.scalar(
            sa.select(notification_conditions.c.since).where(
                notification_conditions.c.name == NO_ACTIVE_WORKER
            )
        )
        return count, oldest, _live_worker(conn, now), since

    count, oldest, live, since = await db.read(look)
    if since is None and count and not live:

        def begin(conn: Connection) -> list[str]:
            inserted = conn.execute(
                insert_skipping_conflicts(db.dialect, notification_conditions, ["name"]).values(
                    name=NO_ACTIVE_WORKER, since=now
                )
            )
            if not inserted.rowcount:
                return []  # another replica notified it
            return [
                insert_event(
                    conn,
                    EventKind.NO_ACTIVE_WORKER,
                    state_change=True,
                    task_id=None,
                    task_name="",
                    now=now,
                    details={
                        "waiting_jobs": count,
                        "oldest_enqueued_at": _iso(oldest),
                        "lease_ttl_seconds": lease_ttl_s,
                    },
                )
            ]

        return await db.write(begin)
    if since is not None and live:

        def end(conn: Connection) -> list[str]:
            cleared = conn.execute(
                notification_conditions.delete().where(
                    notification_conditions.c.name == NO_ACTIVE_WORKER
                )
            )
            if not cleared.rowcount:
                return []
            return [
                insert_event(
                    conn,
                    EventKind.WORKER_RETURNED,
                    state_change=True,
                    task_id=None,
                    task_name="",
                    now=now,
                    details={"no_active_worker_since": _iso(since)},
                )
            ]

        return await db.write(end)
    return []
