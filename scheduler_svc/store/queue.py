"""The queue: manual and API runs in, jobs out to workers (claim, heartbeat, output),
cancel and abort, and the reads of ``jobs``. Fires are in :mod:`.fires`; outcomes,
retries and recovery in :mod:`.finish`."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from dataclasses import replace

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from scheduler_svc.db import Dialect, insert_skipping_conflicts
from scheduler_svc.errors import FailedPrecondition, NotFound, Reason, Resource
from scheduler_svc.records import (
    NO_OPTIONS,
    EnqueueResult,
    JobRecord,
    RunOptions,
    TaskRecord,
    TaskRunResult,
)
from scheduler_svc.schema import ACTIVE_JOB_PREDICATE, jobs, slot_lease_name, tasks
from scheduler_svc.store import hot, locks, rows
from scheduler_svc.store.labels import label_terms
from scheduler_svc.values import FIRED_LANES, AbortAction, JobStatus, Lane, SkipReason, Trigger

#: Rounds of a manual enqueue before it gives up on tasks another transaction keeps
#: queueing meanwhile (each round re-reads the tasks' active jobs).
ENQUEUE_ROUNDS = 3


def _no_task(task_ids: Sequence[int], missing: int) -> NotFound:
    """NotFound for the task id ``missing``, naming its place in ``task_ids``."""
    return NotFound(
        f"no task with id {missing}",
        field=f"task_ids[{list(task_ids).index(missing)}]",
        reason=Reason.TASK_NOT_FOUND,
        resource=Resource.task(missing),
    )


def enqueue(
    conn: Connection,
    dialect: Dialect,
    task_ids: Sequence[int],
    trigger: Trigger,
    now: dt.datetime,
    options: RunOptions = NO_OPTIONS,
) -> EnqueueResult:
    """See :meth:`scheduler_svc.store.Store.enqueue`."""
    # FOR KEY SHARE holds off a concurrent DeleteTask (which locks the task FOR UPDATE
    # first) until this commits; a task it deleted meanwhile is simply not found.
    query = locks.key_share(dialect, tasks.select().where(tasks.c.id.in_(task_ids)))
    by_id = {r._mapping["id"]: rows.task(r) for r in conn.execute(query).all()}
    missing = [t for t in task_ids if t not in by_id]
    if missing:
        raise _no_task(task_ids, missing[0])
    ordered = [by_id[t] for t in dict.fromkeys(task_ids)]
    distinct = _enqueue_distinct(conn, dialect, ordered, trigger, now, options)
    first = {r.task_id: r for r in distinct}
    runs: list[TaskRunResult] = []
    seen: set[int] = set()
    for task_id in task_ids:
        run = first[task_id]
        if task_id in seen:
            # A repeat of a task asked for earlier in the same request: that entry enqueued
            # (or found) its job, so this one finds it queued (or running).
            running = run.skip_reason == SkipReason.ALREADY_RUNNING
            reason = SkipReason.ALREADY_RUNNING if running else SkipReason.ALREADY_QUEUED
            run = TaskRunResult(run.task_id, run.task_name, run.job_id, reason)
        seen.add(task_id)
        runs.append(run)
    return EnqueueResult(tuple(runs))


def _enqueue_distinct(
    conn: Connection,
    dialect: Dialect,
    ordered: Sequence[TaskRecord],
    trigger: Trigger,
    now: dt.datetime,
    options: RunOptions,
) -> list[TaskRunResult]:
    """Enqueue a manual or API run of each of ``ordered`` (distinct tasks), set-based: one
    read of their active jobs, one UPDATE for the queued ones, one multi-row INSERT (in
    request order, so the jobs run in that order) that skips a task whose job another
    transaction inserted meanwhile; those are decided again, up to :data:`ENQUEUE_ROUNDS`.

    A queued job is asked to run now: it moves to the manual lane (promoted, when the
    scheduler queued it) and a retry's not_before still ahead becomes ``now``. Its trigger
    is kept: a scheduler job's chain still counts toward consecutive_failure_count when it
    finally fails. A first attempt queued with a not_before (a run's not_before_time) keeps
    it. With run options that shape new jobs only (:attr:`RunOptions.shape_new_jobs_only`)
    a queued job is left as it is (ALREADY_QUEUED). New jobs carry ``options``' columns and
    a future ``options.not_before``. Raises FailedPrecondition(field="task_ids") when the
    rounds run out."""
    results: dict[int, TaskRunResult] = {}
    pending = list(ordered)
    later = options.not_before if options.not_before and options.not_before > now else None
    extra = options.columns()
    for _ in range(ENQUEUE_ROUNDS):
        active = locks.active_jobs(conn, dialect, (t.id for t in pending))
        run_now: list[int] = []
        new: list[TaskRecord] = []
        for task in pending:
            row = active.get(task.id)
            if row is None:
                new.append(task)
            elif row.status == JobStatus.RUNNING:
                results[task.id] = TaskRunResult(
                    task.id, task.name, row.id, SkipReason.ALREADY_RUNNING
                )
            elif options.shape_new_jobs_only:
                results[task.id] = TaskRunResult(
                    task.id, task.name, row.id, SkipReason.ALREADY_QUEUED
                )
            else:
                # A retry's backoff gives way to a run now; a first attempt's not_before
                # was asked for (not_before_time) and stays.
                held_back = row.not_before is not None and row.not_before > now
                held_back = held_back and row.attempt > 1
                if row.lane in FIRED_LANES or held_back:
                    run_now.append(row.id)
                if row.lane in FIRED_LANES:
                    result = TaskRunResult(task.id, task.name, row.id, promoted=True)
                else:
                    result = TaskRunResult(task.id, task.name, row.id, SkipReason.ALREADY_QUEUED)
                results[task.id] = replace(result, made_ready=held_back)
        if run_now:
            at = sa.bindparam("b_now", now, type_=jobs.c.not_before.type)
            conn.execute(
                jobs.update()
                .where(jobs.c.id.in_(run_now))
                .values(
                    lane=Lane.MANUAL,
                    not_before=sa.case((jobs.c.not_before > at, at), else_=jobs.c.not_before),
                )
            )
        inserted: dict[int, int] = {}
        if new:
            insert = insert_skipping_conflicts(
                dialect,
                jobs,
                ["task_id"],
                index_where=ACTIVE_JOB_PREDICATE,  # type: ignore[arg-type]
            )
            values = [
                rows.job_row(t, trigger=trigger, lane=Lane.MANUAL, now=now, not_before=later)
                | extra
                for t in new
            ]
            returned = conn.execute(insert.returning(jobs.c.id, jobs.c.task_id), values)
            inserted = {row.task_id: row.id for row in returned.all()}
        for task in new:
            if task.id in inserted:
                results[task.id] = TaskRunResult(task.id, task.name, inserted[task.id])
        pending = [t for t in new if t.id not in inserted]
        if not pending:
            return [results[t.id] for t in ordered]
    raise FailedPrecondition(
        f"task {pending[0].id}: could not enqueue, try again",
        field="task_ids",
        reason=Reason.QUEUE_CONTENDED,
        resource=Resource.task(pending[0].id),
    )


def claim(
    conn: Connection,
    dialect: Dialect,
    worker_id: str,
    now: dt.datetime,
    lease_ttl_s: float,
    worker_lease_holder: str | None,
    *,
    slot: int = 0,
    lease_token: int | None = None,
    guard_conflicts: bool = False,
) -> tuple[JobRecord, TaskRecord] | None:
    """See :meth:`scheduler_svc.store.Store.claim_next_job`. ``guard_conflicts``: run the
    claim in a savepoint, so that a claim refused by uq_jobs_running_slot or
    uq_jobs_running_group (another transaction's claim committed first) returns None and
    leaves the rest of the caller's transaction (an outcome) intact."""
    lease = hot.lease_holder(dialect).first(conn, {"b_lease_name": slot_lease_name(slot)})
    if worker_lease_holder is not None and (
        lease is None
        or lease["holder"] != worker_lease_holder
        or (lease_token is not None and lease["token"] != lease_token)
    ):
        return None
    params = {
        "now": now,
        "b_slot": slot,
        "b_started_at": now,
        "b_worker_id": worker_id,
        "b_token": uuid.uuid4().hex,
        "b_expires": now + dt.timedelta(seconds=lease_ttl_s),
    }
    if guard_conflicts:
        try:
            with conn.begin_nested():
                row = hot.start_next_ready(dialect).first(conn, params)
        except sa.exc.IntegrityError:
            return None
    else:
        row = hot.start_next_ready(dialect).first(conn, params)
    if row is None:
        return None
    return rows.job(row), rows.prefixed_task(row)


def next_ready_time(conn: Connection, now: dt.datetime) -> dt.datetime | None:
    """See :meth:`scheduler_svc.store.Store.next_ready_time`."""
    if conn.scalar(sa.select(jobs.c.id).where(hot.ready(now)).limit(1)) is not None:
        return now
    value: dt.datetime | None = conn.scalar(
        sa.select(sa.func.min(jobs.c.not_before)).where(jobs.c.status == JobStatus.QUEUED)
    )
    return value


def renew_job_lease(
    conn: Connection, job_id: int, token: str, now: dt.datetime, lease_ttl_s: float
) -> bool:
    """See :meth:`scheduler_svc.store.Store.renew_job_lease`."""
    expires = now + dt.timedelta(seconds=lease_ttl_s)
    result = conn.execute(
        hot.RENEW_JOB_LEASE, {"b_job_id": job_id, "b_token": token, "b_expires": expires}
    )
    return bool(result.rowcount == 1)


def append_output(conn: Connection, job_id: int, token: str, text: str) -> bool:
    """See :meth:`scheduler_svc.store.Store.append_output`."""
    current = conn.scalar(
        sa.select(jobs.c.output_tail).where(
            jobs.c.id == job_id, jobs.c.lease_token == token, jobs.c.status == JobStatus.RUNNING
        )
    )
    if current is None:
        return False
    conn.execute(
        jobs.update().where(jobs.c.id == job_id).values(output_tail=rows.tail(current + text))
    )
    return True


def cancel_job(conn: Connection, job_id: int, now: dt.datetime, stopped_by: str) -> JobRecord:
    """See :meth:`scheduler_svc.store.Store.cancel_job`."""
    result = conn.execute(
        jobs.update()
        .where(jobs.c.id == job_id, jobs.c.status == JobStatus.QUEUED)
        .values(
            status=JobStatus.CANCELLED, finished_at=now, error="cancelled", stopped_by=stopped_by
        )
        .returning(*jobs.c)
    )
    row = result.first()
    if row is not None:
        return rows.job(row)
    status = conn.scalar(sa.select(jobs.c.status).where(jobs.c.id == job_id))
    if status is None:
        raise NotFound(
            f"no job with id {job_id}",
            field="job_id",
            reason=Reason.JOB_NOT_FOUND,
            resource=Resource.job(job_id),
        )
    raise FailedPrecondition(
        f"job {job_id} is {status}, not QUEUED; abort a running job with AbortTasks",
        field="job_id",
        reason=Reason.JOB_NOT_QUEUED,
        resource=Resource.job(job_id),
    )


def abort_tasks(
    conn: Connection,
    dialect: Dialect,
    task_ids: Sequence[int],
    now: dt.datetime,
    stopped_by: str,
) -> list[tuple[int, int, AbortAction, int]]:
    """See :meth:`scheduler_svc.store.Store.abort_tasks`."""
    out: list[tuple[int, int, AbortAction, int]] = []
    found = set(conn.execute(sa.select(tasks.c.id).where(tasks.c.id.in_(task_ids))).scalars())
    missing = [t for t in task_ids if t not in found]
    if missing:
        raise _no_task(task_ids, missing[0])
    # Every active job locked at once, in job id order (LOCK_ORDER): two aborts naming the
    # same tasks in other orders never wait for each other.
    found_jobs = locks.all_active_jobs(conn, dialect, set(task_ids))
    active = locks.active_jobs_of(found_jobs)
    done: set[int] = set()
    for task_id in task_ids:
        row = active.get(task_id)
        if row is None or task_id in done:
            out.append((task_id, 0, AbortAction.NONE, 0))
            continue
        done.add(task_id)
        # Every job of the task stops (a fire's jobs waiting behind the running one, or
        # running alongside); the answer names the one the task runs or runs next.
        queued = [j.id for j in found_jobs[task_id] if j.status == JobStatus.QUEUED]
        running = [j.id for j in found_jobs[task_id] if j.status == JobStatus.RUNNING]
        if queued:
            conn.execute(
                jobs.update()
                .where(jobs.c.id.in_(queued))
                .values(
                    status=JobStatus.CANCELLED,
                    finished_at=now,
                    error=rows.ABORTED_BY_OPERATOR,
                    stopped_by=stopped_by,
                )
            )
        if running:
            conn.execute(
                jobs.update()
                .where(jobs.c.id.in_(running))
                .values(abort_requested=True, stopped_by=stopped_by)
            )
        action = (
            AbortAction.CANCELLED if row.status == JobStatus.QUEUED else AbortAction.ABORT_REQUESTED
        )
        out.append((task_id, row.id, action, len(queued)))
    return out


def get_job(conn: Connection, job_id: int) -> JobRecord:
    """See :meth:`scheduler_svc.store.Store.get_job`."""
    row = conn.execute(jobs.select().where(jobs.c.id == job_id)).first()
    if row is None:
        raise NotFound(
            f"no job with id {job_id}",
            field="job_id",
            reason=Reason.JOB_NOT_FOUND,
            resource=Resource.job(job_id),
        )
    return rows.job(row)


def list_jobs(
    conn: Connection,
    limit: int,
    before_id: int | None,
    task_id: int | None,
    statuses: Sequence[str],
    schedule_id: int | None,
    selector: dict[str, str],
) -> list[JobRecord]:
    """See :meth:`scheduler_svc.store.Store.list_jobs`."""
    query = jobs.select().where(*label_terms(jobs.c.labels, selector))
    if before_id is not None:
        query = query.where(jobs.c.id < before_id)
    if task_id is not None:
        query = query.where(jobs.c.task_id == task_id)
    if statuses:
        query = query.where(jobs.c.status.in_(statuses))
    if schedule_id is not None:
        query = query.where(jobs.c.schedule_id == schedule_id)
    return [rows.job(r) for r in conn.execute(query.order_by(jobs.c.id.desc()).limit(limit))]


def queued_jobs_in_order(conn: Connection, now: dt.datetime) -> list[JobRecord]:
    """See :meth:`scheduler_svc.store.Store.queued_jobs_in_order`."""
    query = hot.queue_order(jobs.select().where(hot.ready(now)))
    return [rows.job(r) for r in conn.execute(query).all()]


def queue_depth_by_lane(conn: Connection) -> dict[int, int]:
    """See :meth:`scheduler_svc.store.Store.queue_depth_by_lane`."""
    query = (
        sa.select(jobs.c.lane, sa.func.count())
        .where(jobs.c.status == JobStatus.QUEUED)
        .group_by(jobs.c.lane)
    )
    return {int(lane): int(count) for lane, count in conn.execute(query).all()}


def running_job_task(conn: Connection, job_id: int, token: str) -> TaskRecord | None:
    """See :meth:`scheduler_svc.store.Store.running_job_task`."""
    query = (
        tasks.select()
        .join(jobs, jobs.c.task_id == tasks.c.id)
        .where(jobs.c.id == job_id, jobs.c.lease_token == token, jobs.c.status == JobStatus.RUNNING)
    )
    row = conn.execute(query).first()
    return None if row is None else rows.task(row)
