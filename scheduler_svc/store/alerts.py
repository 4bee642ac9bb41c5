"""Events of conditions rather than of a job's outcome: a task's missing success (the
dead-man), a long run, missed fires, missed start deadlines, and ready jobs waiting with no
active worker (and the worker's return).

A missed fire's event is written in the transaction that records the miss
(:func:`insert_missed_fires`, from :mod:`.fires`). The others are lasting conditions the
sender checks at each pass (:func:`check_overdue`, :func:`check_long_runs`,
:func:`check_start_deadlines`, :func:`check_workers`): a read
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
from scheduler_svc.schema import jobs, leases, notification_conditions, schedules, tasks
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


async def check_overdue(db: Database, now: dt.datetime) -> list[str]:
    """The dead-man check: every enabled task with an ``expect_success_within_seconds``
    whose newest success (or, when none is kept, its last change) is older than that,
    and not yet notified, is marked overdue and gets a no_success event, in one
    transaction; a conditional UPDATE, so two replicas never both notify it. The new
    events' ids. The next success clears the mark (:mod:`.finish`)."""
    last_success = (
        sa.select(jobs.c.finished_at)
        .where(jobs.c.task_id == tasks.c.id, jobs.c.status == JobStatus.SUCCEEDED)
        .order_by(jobs.c.id.desc())
        .limit(1)
        .correlate(tasks)
        .scalar_subquery()
    )
    query = sa.select(
        tasks.c.id,
        tasks.c.name,
        tasks.c.updated_at,
        tasks.c.expect_success_within_seconds,
        last_success.label("last_success"),
    ).where(
        tasks.c.expect_success_within_seconds > 0,
        tasks.c.enabled.is_(True),
        tasks.c.overdue_since.is_(None),
    )

    candidates = await db.read(lambda conn: conn.execute(query).all())
    due = [
        row
        for row in candidates
        if (row.last_success or row.updated_at)
        + dt.timedelta(seconds=row.expect_success_within_seconds)
        <= now
    ]
    if not due:
        return []  # the usual case: a read, no write transaction

    def run(conn: Connection) -> list[str]:
        out = []
        for row in due:
            window = dt.timedelta(seconds=row.expect_success_within_seconds)
            succeeded_meanwhile = sa.exists(
                sa.select(jobs.c.id).where(
                    jobs.c.task_id == row.id,
                    jobs.c.status == JobStatus.SUCCEEDED,
                    jobs.c.finished_at > now - window,
                )
            )
            marked = conn.execute(
                tasks.update()
                .where(
                    tasks.c.id == row.id,
                    tasks.c.overdue_since.is_(None),
                    ~succeeded_meanwhile,
                )
                .values(overdue_since=now)
            )
            if not marked.rowcount:
                continue  # another replica notified it, or a success came meanwhile
            out.append(
                insert_event(
                    conn,
                    EventKind.NO_SUCCESS,
                    state_change=True,
                    task_id=row.id,
                    task_name=row.name,
                    now=now,
                    details={
                        "expect_success_within_seconds": row.expect_success_within_seconds,
                        "last_success_at": _iso(row.last_success),
                    },
                )
            )
        return out

    return await db.write(run)


async def check_long_runs(db: Database, now: dt.datetime) -> list[str]:
    """Every RUNNING job started at least its task's ``warn_after_seconds`` ago (> 0)
    and not yet notified gets a long_run event, once: a read, then (only when one is
    due) one transaction that marks each job under a conditional UPDATE and writes its
    event. The new events' ids. The job goes on running."""
    query = (
        sa.select(jobs, tasks.c.warn_after_seconds.label("warn_after"))
        .join(tasks, tasks.c.id == jobs.c.task_id)
        .where(
            jobs.c.status == JobStatus.RUNNING,
            jobs.c.long_run_notified.is_(False),
            tasks.c.warn_after_seconds > 0,
        )
    )
    candidates = await db.read(lambda conn: conn.execute(query).all())
    due = [
        (rows.job(row), row.warn_after)
        for row in candidates
        if row.started_at is not None
        and row.started_at + dt.timedelta(seconds=row.warn_after) <= now
    ]
    if not due:
        return []

    def run(conn: Connection) -> list[str]:
        out = []
        for job, warn_after in due:
            marked = conn.execute(
                jobs.update()
                .where(
                    jobs.c.id == job.id,
                    jobs.c.status == JobStatus.RUNNING,
                    jobs.c.long_run_notified.is_(False),
                )
                .values(long_run_notified=True)
            )
            if not marked.rowcount:
                continue  # it ended meanwhile, or another replica notified it
            out.append(
                insert_event(
                    conn,
                    EventKind.LONG_RUN,
                    state_change=True,
                    task_id=job.task_id,
                    task_name=job.task_name,
                    now=now,
                    job=job,
                    details={"warn_after_seconds": warn_after},
                )
            )
        return out

    return await db.write(run)


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
