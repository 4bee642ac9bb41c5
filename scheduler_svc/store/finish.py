"""What ends a job: its outcome, fenced by its lease token, and what follows it (the
task's failure count and auto-disable, a retry with backoff, an interval schedule's
anchor, the next claim); and the recovery of jobs whose lease expired."""

from __future__ import annotations

import datetime as dt
import logging
import random
import uuid
from dataclasses import replace
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from scheduler_svc.db import Dialect
from scheduler_svc.pausing import SERVICE, disable_columns
from scheduler_svc.records import FinishResult, JobRecord, TaskRecord
from scheduler_svc.schema import jobs, schedules, slot_lease_name, tasks
from scheduler_svc.store import hot, locks, outbox, queue, rows
from scheduler_svc.store.rows import FinishingTask
from scheduler_svc.values import EventKind, JobStatus, Lane, Trigger

log = logging.getLogger(__name__)

LEASE_LOST = "lease lost: the worker stopped heartbeating"

"""The error of a job recovered after its lease expired."""


def backoff_delay_s(attempt: int, base_s: float, cap_s: float, rng: random.Random) -> float:
    """Delay before the retry that follows failed attempt ``attempt`` (1-based), seconds.

    Exponential backoff with full jitter: uniform in [0, min(cap, base * 2^(attempt-1))],
    and at least one second, so a retry never runs immediately.
    """
    ceiling = min(cap_s, base_s * (2 ** max(0, attempt - 1)))
    return max(1.0, rng.uniform(0.0, ceiling))


def succeed_and_start_next(
    conn: Connection,
    job_id: int,
    token: str,
    error: str,
    output_tail: str,
    now: dt.datetime,
    worker_id: str,
    lease_ttl_s: float,
    *,
    slot: int = 0,
    lease_token: int | None = None,
) -> FinishResult | None:
    """A success and the next claim as the one statement :data:`hot.SUCCEED_AND_START_NEXT`
    (needs :attr:`Dialect.writable_ctes`); None when it recorded nothing (stale token, a
    repeat, or follow-ups to do) and so changed nothing."""
    row = hot.SUCCEED_AND_START_NEXT.first(
        conn,
        {
            "b_job_id": job_id,
            "b_token": token,
            "b_status": JobStatus.SUCCEEDED,
            "b_error": error,
            "b_tail": rows.tail(output_tail),
            "b_now": now,
            "now": now,
            "b_started_at": now,
            "b_worker_id": worker_id,
            "b_slot": slot,
            "b_lease_name": slot_lease_name(slot),
            "b_lease_token": lease_token,
            "b_next_token": uuid.uuid4().hex,
            "b_expires": now + dt.timedelta(seconds=lease_ttl_s),
        },
    )
    assert row is not None  # one row, whatever happened
    if row["finished__id"] is None:
        return None
    finished = rows.prefixed_job(row, "finished__")
    started = None
    if row["id"] is not None:
        started = rows.job(row), rows.prefixed_task(row)
    return FinishResult(accepted=True, job=finished, next_job=started)


def finish(
    conn: Connection,
    dialect: Dialect,
    rng: random.Random,
    job_id: int,
    token: str,
    status: JobStatus,
    error: str,
    output_tail: str,
    now: dt.datetime,
    *,
    auto_disable_count: int,
    claim_next_for: str | None,
    lease_ttl_s: float,
    claim_slot: int = 0,
    claim_lease_token: int | None = None,
) -> FinishResult:
    """:meth:`scheduler_svc.store.Store.finish_job` as one transaction, for every outcome
    and both databases (``error`` already as :func:`rows.job_error` gives it)."""
    values = {"b_status": status, "b_error": error, "b_tail": rows.tail(output_tail), "b_now": now}
    row = hot.FINISH_JOB.first(conn, {"b_job_id": job_id, "b_token": token, **values})
    if row is not None:
        finished, task = rows.finished(row)
        result = after_finish(
            conn, dialect, rng, finished, task, status, error, now, auto_disable_count
        )
        if claim_next_for is None:
            return result
        claimed = queue.claim(
            conn,
            dialect,
            claim_next_for,
            now,
            lease_ttl_s,
            claim_next_for,
            slot=claim_slot,
            lease_token=claim_lease_token,
            guard_conflicts=dialect.row_locks,
        )
        return replace(result, next_job=claimed)
    stored = conn.execute(jobs.select().where(jobs.c.id == job_id)).first()
    if (
        stored is not None
        and stored.lease_token == token
        and (stored.status, stored.error) == (status, error)
    ):
        # This outcome is recorded already: the worker's stream broke before the OutcomeAck
        # and it reports again. Nothing changes.
        return FinishResult(accepted=True, job=rows.job(stored), repeat=True)
    # The lease was lost (or the reaper recovered the job): keep the outcome for people to
    # see, change nothing else.
    late = (f"{status} at {now.isoformat()}" + (f": {error}" if error else ""))[:2000]
    conn.execute(jobs.update().where(jobs.c.id == job_id).values(late_outcome=late))
    log.warning(
        "late outcome ignored: the job's lease was lost", extra={"job_id": job_id, "status": status}
    )
    job = None if stored is None else replace(rows.job(stored), late_outcome=late)
    return FinishResult(accepted=False, job=job)


def after_finish(
    conn: Connection,
    dialect: Dialect,
    rng: random.Random,
    job: JobRecord,
    task: FinishingTask | None,
    status: str,
    error: str,
    now: dt.datetime,
    auto_disable_count: int,
    *,
    retry_not_before: dt.datetime | None = None,
) -> FinishResult:
    """What follows a job's outcome, once ``job`` (as updated) is stored, by what its
    ``task`` was then: the task's failure count and auto-disable, a retry (not ready before
    ``retry_not_before`` either, when given), an interval schedule's anchor, and the
    notification events (:func:`_notify`).
    :func:`hot._has_no_follow_ups` must match these rules."""
    if task is None:
        return FinishResult(accepted=True, job=job)
    retry: JobRecord | None = None
    disabled: TaskRecord | None = None
    final_failure = False
    if status == JobStatus.SUCCEEDED:
        if task.consecutive_failure_count or task.failing_since or task.overdue_since:
            conn.execute(
                tasks.update()
                .where(tasks.c.id == task.id)
                .values(consecutive_failure_count=0, failing_since=None, overdue_since=None)
            )
    elif status == JobStatus.FAILED and job.attempt < task.max_attempts:
        if _retries(conn, dialect, job, task):
            retry = _queue_retry(conn, rng, job, task, now, retry_not_before)
        else:
            final_failure = True  # a scheduled run of a task disabled meanwhile
            _start_failing(conn, task, now)
    elif status == JobStatus.FAILED and job.trigger == Trigger.SCHEDULER:
        final_failure = True
        count = task.consecutive_failure_count + 1
        values: dict[str, Any] = {"consecutive_failure_count": count}
        if task.failing_since is None:
            values["failing_since"] = now
        if auto_disable_count > 0 and count >= auto_disable_count and task.enabled:
            values["enabled"] = False
            values["updated_at"] = now  # a change of the task's definition, by the service
            values["disabled_reason"] = (
                f"disabled after {count} consecutive failures; last error: {error[:500]}"
            )
            values.update(disable_columns(SERVICE, now))
        updated = conn.execute(
            tasks.update().where(tasks.c.id == task.id).values(values).returning(*tasks.c)
        ).one()
        if "enabled" in values:
            disabled = rows.task(updated)
    elif status == JobStatus.FAILED:
        final_failure = True
        _start_failing(conn, task, now)
    events = _notify(conn, job, task, status, now, final_failure=final_failure, disabled=disabled)
    anchored = None
    if retry is None and job.schedule_id is not None:
        anchored = _anchor_interval(conn, job.schedule_id, now)
    return FinishResult(
        accepted=True,
        job=job,
        retry=retry,
        disabled_task=disabled,
        anchored_next_run=anchored,
        events=events,
    )


def _start_failing(conn: Connection, task: FinishingTask, now: dt.datetime) -> None:
    """A final failure of a task not counted toward auto-disable: mark it failing since
    ``now`` unless it already is."""
    if task.failing_since is None:
        conn.execute(tasks.update().where(tasks.c.id == task.id).values(failing_since=now))


def _notify(
    conn: Connection,
    job: JobRecord,
    task: FinishingTask,
    status: str,
    now: dt.datetime,
    *,
    final_failure: bool,
    disabled: TaskRecord | None,
) -> tuple[str, ...]:
    """Write the outcome's notification events to the outbox, in its transaction: a
    recovery (a success of a failing task), a final failure (a change of state when the
    task was not failing), an auto-disable. Their event ids; nothing is written otherwise,
    so a success of a healthy task costs nothing here."""
    events: list[str] = []

    def emit(kind: EventKind, state_change: bool, details: dict[str, Any]) -> None:
        events.append(
            outbox.insert_event(
                conn,
                kind,
                state_change=state_change,
                task_id=task.id,
                task_name=task.name,
                now=now,
                job=job,
                details=details,
            )
        )

    since = task.failing_since.isoformat() if task.failing_since is not None else None
    if status == JobStatus.SUCCEEDED and task.failing_since is not None:
        emit(EventKind.RECOVERY, True, {"failing_since": since})
    if final_failure:
        count = task.consecutive_failure_count + (job.trigger == Trigger.SCHEDULER)
        details = {"consecutive_failures": count, "failing_since": since or now.isoformat()}
        emit(EventKind.FINAL_FAILURE, task.failing_since is None, details)
    if disabled is not None:
        details = {
            "consecutive_failures": disabled.consecutive_failure_count,
            "reason": disabled.disabled_reason,
        }
        emit(EventKind.AUTO_DISABLED, True, details)
    return tuple(events)


def _retries(conn: Connection, dialect: Dialect, job: JobRecord, task: FinishingTask) -> bool:
    """Whether a failed ``job`` with attempts left is retried: always, unless it is a
    scheduler-lane or backfill-lane job (a fired run, not promoted by a manual run) and its
    task is disabled now. The task is read FOR KEY SHARE where rows are locked, so a DisableTask
    under way (FOR UPDATE) is waited for and seen, and one after it sees (and cancels) the
    retry."""
    if job.lane == Lane.MANUAL:
        return True
    query = locks.key_share(dialect, sa.select(tasks.c.enabled).where(tasks.c.id == task.id))
    return bool(conn.scalar(query))


def _queue_retry(
    conn: Connection,
    rng: random.Random,
    job: JobRecord,
    task: FinishingTask,
    now: dt.datetime,
    floor: dt.datetime | None = None,
) -> JobRecord | None:
    """Queue the retry of failed ``job``, not ready before now + backoff (nor ``floor``);
    None when a manual run queued the task meanwhile (that job is the retry)."""
    delay = backoff_delay_s(job.attempt, task.backoff_base_seconds, task.backoff_cap_seconds, rng)
    not_before = now + dt.timedelta(seconds=delay)
    if floor is not None:
        not_before = max(not_before, floor)
    retry_row = rows.job_row(
        task,
        trigger=job.trigger,
        lane=job.lane,
        now=now,
        attempt=job.attempt + 1,
        not_before=not_before,
        schedule_id=job.schedule_id,
        fire_time=job.fire_time,
        retry_of_job_id=job.id,
    ) | {
        # A retry is the same run: it keeps the run's options and who asked for it.
        "params_override": job.params_override,
        "labels": job.labels,
        "requested_by": job.requested_by,
    }
    try:
        with conn.begin_nested():
            inserted = conn.execute(jobs.insert().values(retry_row).returning(*jobs.c))
            return rows.job(inserted.one())
    except IntegrityError:
        return None


def _anchor_interval(
    conn: Connection, schedule_id: int, finished_at: dt.datetime
) -> dt.datetime | None:
    """Interval schedules fire interval seconds after their previous run finished.

    Returns the schedule's new next run, or None when it is not an enabled interval
    schedule or the next run would be at or after its end_time (then it has none).
    """
    row = conn.execute(
        sa.select(
            schedules.c.interval_seconds, schedules.c.cron_expression, schedules.c.end_at
        ).where(schedules.c.id == schedule_id, schedules.c.enabled.is_(True))
    ).first()
    if row is None or row.cron_expression or row.interval_seconds <= 0:
        return None
    next_run: dt.datetime | None = finished_at + dt.timedelta(seconds=row.interval_seconds)
    if row.end_at is not None and next_run is not None and next_run >= row.end_at:
        next_run = None  # no fire at or after its end_time
    conn.execute(
        schedules.update().where(schedules.c.id == schedule_id).values(next_run_at=next_run)
    )
    return next_run


# Fails a job still RUNNING under its token whose lease expired before ``b_before``: not
# renewed meanwhile, nor finished or reaped by someone else.
_REAP = (
    jobs.update()
    .where(hot.RUNNING_UNDER_TOKEN, jobs.c.lease_expires_at < sa.bindparam("b_before"))
    .values(hot.FINISH_VALUES)
    .returning(*hot.FINISHED_JOB_COLUMNS)
)


def _extend_running_leases(
    conn: Connection, now: dt.datetime, grace_s: float, lease_ttl_s: float
) -> None:
    """After ``grace_s`` seconds of storage outage ending about ``now``: every running
    job's lease that was still valid when the outage began (expiring at or after now -
    grace_s) is moved ``grace_s`` later, but to no later than a whole TTL from now
    (``now + lease_ttl_s``), and never earlier. A lease renewed just before the outage
    expired at most a TTL after it began, so the bound takes nothing from it; and the
    replicas that each saw the same outage, and each extend, together give at most that
    TTL from its end, not one outage's length each."""
    fresh = now + dt.timedelta(seconds=lease_ttl_s)
    shift = dt.timedelta(seconds=grace_s)
    running = conn.execute(
        sa.select(jobs.c.id, jobs.c.lease_token, jobs.c.lease_expires_at).where(
            jobs.c.status == JobStatus.RUNNING,
            jobs.c.lease_expires_at >= now - shift,
            jobs.c.lease_expires_at < fresh,
        )
    ).all()
    for row in running:
        later = min(row.lease_expires_at + shift, fresh)
        conn.execute(
            jobs.update()
            .where(
                jobs.c.id == row.id,
                jobs.c.lease_token == row.lease_token,
                jobs.c.status == JobStatus.RUNNING,
                jobs.c.lease_expires_at < later,
            )
            .values(lease_expires_at=later)
        )
    if running:
        log.warning(
            "the database was unavailable: running jobs' leases extended",
            extra={"grace_s": round(grace_s, 3), "jobs": len(running)},
        )


def reap_expired_leases(
    conn: Connection,
    dialect: Dialect,
    rng: random.Random,
    now: dt.datetime,
    auto_disable_count: int,
    kill_deadline_s: float = 0.0,
    grace_s: float = 0.0,
    lease_ttl_s: float = 0.0,
) -> list[FinishResult]:
    """See :meth:`scheduler_svc.store.Store.reap_expired_leases`."""
    if grace_s > 0:
        if lease_ttl_s <= 0:
            raise ValueError("lease_ttl_s: the leases' TTL (> 0) bounds the grace_s given")
        _extend_running_leases(conn, now, grace_s, lease_ttl_s)
    expired = conn.execute(
        jobs.select().where(jobs.c.status == JobStatus.RUNNING, jobs.c.lease_expires_at < now)
    ).all()
    out = []
    for row in expired:
        job = rows.job(row)
        # The old run's processes kill themselves (their guard's watchdog) within the kill
        # deadline of the lease's expiry: its retry is not ready before that.
        killed_by = None
        if job.lease_expires_at is not None:
            killed_by = job.lease_expires_at + dt.timedelta(seconds=kill_deadline_s)
        result = _reap(conn, dialect, rng, job, now, now, auto_disable_count, killed_by)
        if result is not None:
            out.append(result)
    return out


def reap_jobs_of_dead_workers(
    conn: Connection,
    dialect: Dialect,
    rng: random.Random,
    now: dt.datetime,
    auto_disable_count: int,
    workers: list[tuple[str, int]],
) -> list[FinishResult]:
    """Fail as lease lost, whatever their lease's expiry, the RUNNING jobs of the workers
    that ran in the dead processes ``workers`` ((host, pid): a service's embedded worker,
    whose worker id is ``host:pid:...``). Their processes died with their worker (its guard
    killed them), so their retries wait only for their backoff."""
    out = []
    for host, pid in workers:
        running = conn.execute(
            jobs.select().where(
                jobs.c.status == JobStatus.RUNNING,
                jobs.c.worker_id.startswith(f"{host}:{pid}:", autoescape=True),
            )
        ).all()
        for row in running:
            job = rows.job(row)
            forever = now + dt.timedelta(days=36500)
            result = _reap(conn, dialect, rng, job, now, forever, auto_disable_count, None)
            if result is not None:
                out.append(result)
    return out


def _reap(
    conn: Connection,
    dialect: Dialect,
    rng: random.Random,
    job: JobRecord,
    now: dt.datetime,
    before: dt.datetime,
    auto_disable_count: int,
    killed_by: dt.datetime | None,
) -> FinishResult | None:
    """Fail ``job`` as lease lost if it is still RUNNING under its token with a lease
    expiring before ``before``; its retry is not ready before ``killed_by`` either. A job
    whose abort was asked for ends ABORTED instead (the reason, then the lease lost): the
    abort is what was wanted, and an aborted job is not retried. None when it was
    finished, renewed or reaped by someone else meanwhile."""
    status, error = JobStatus.FAILED, LEASE_LOST
    if job.abort_requested:
        # A running job's error holds why its abort was asked for when it was not a person.
        status, error = JobStatus.ABORTED, f"{job.error or rows.ABORTED_BY_OPERATOR}; {LEASE_LOST}"
    done = conn.execute(
        _REAP,
        {
            "b_job_id": job.id,
            "b_token": job.lease_token,
            "b_before": before,
            "b_status": status,
            "b_error": error,
            "b_tail": "",
            "b_now": now,
        },
    ).first()
    if done is None:
        return None
    reaped, task = rows.finished(done)
    log.warning(
        "lease lost; job aborted" if job.abort_requested else "lease lost; job failed",
        extra={"job_id": job.id, "task_id": job.task_id, "worker_id": job.worker_id},
    )
    return after_finish(
        conn,
        dialect,
        rng,
        reaped,
        task,
        status,
        error,
        now,
        auto_disable_count,
        retry_not_before=killed_by,
    )
