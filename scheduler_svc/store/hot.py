"""The hot statements: what every job and every fire goes through, built once.

Per job: the claim (the ``worker`` lease row, then one UPDATE that starts the next ready
job), the heartbeat's lease renewal, the finish, and on PostgreSQL the one statement that
records a success and starts the next job. They are :class:`~.driver.Prepared` (run on the
driver's cursor) or Core statements built once (SQLAlchemy memoizes a statement object's
cache key, so reusing the object skips building and keying it each time). Per fire: the
multi-row SQL that :class:`~.driver.Bulk` runs. Where the two databases need different
statements, :func:`lease_holder` and :func:`start_next_ready` pick by the capability flags
of :class:`scheduler_svc.db.Dialect`; the rest of the store never chooses.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.sql.dml import ReturningUpdate

from scheduler_svc.db import Dialect
from scheduler_svc.schema import ACTIVE_JOB_PREDICATE, jobs, leases, schedules, tasks
from scheduler_svc.store.driver import Bulk, Prepared
from scheduler_svc.store.rows import FinishingTask
from scheduler_svc.values import JobStatus, Lane, QueuedBehind

# ---------------------------------------------------------------------- the queue's order

_task_of_job = tasks.alias("task_of_job")
_task_of_group = tasks.alias("task_of_group")
_running = jobs.alias("running")
_running_in_group = jobs.alias("running_in_group")
_running_of_task = jobs.alias("running_of_task")


def queue_order(query: sa.Select[Any]) -> sa.Select[Any]:
    """The queue order: lane (manual, then scheduler, then backfill), task_priority
    descending, enqueue time, insertion order; index ix_jobs_queue is in this order."""
    return query.order_by(jobs.c.lane, jobs.c.task_priority.desc(), jobs.c.enqueued_at, jobs.c.id)


def ready(now: Any) -> sa.ColumnElement[bool]:
    """Queued, not held back by a retry's not_before, and not a scheduler-lane or
    backfill-lane job of a disabled task.

    Disabling a task cancels its jobs in those lanes in the same transaction (see
    :func:`scheduler_svc.store.tasks.update_task`), but on PostgreSQL a fire that read the
    task as enabled just before an auto-disable committed may still insert one (its FOR KEY
    SHARE read does not wait for that UPDATE): such a job stays queued, never started, until
    the task is enabled again or a manual run promotes it."""
    task_enabled = (
        sa.select(_task_of_job.c.enabled)
        .where(_task_of_job.c.id == jobs.c.task_id)
        .correlate_except(_task_of_job)
        .scalar_subquery()
    )
    return sa.and_(
        jobs.c.status == JobStatus.QUEUED,
        sa.or_(jobs.c.not_before.is_(None), jobs.c.not_before <= now),
        sa.or_(jobs.c.lane == Lane.MANUAL, task_enabled.is_(True)),
    )


def _group_is_running() -> sa.ColumnElement[bool]:
    """The job's task is in a non-empty concurrency group of which a job is RUNNING."""
    group = (
        sa.select(_task_of_group.c.concurrency_group)
        .where(_task_of_group.c.id == jobs.c.task_id)
        .correlate_except(_task_of_group)
        .scalar_subquery()
    )
    return sa.exists(
        sa.select(_running_in_group.c.id).where(
            _running_in_group.c.status == JobStatus.RUNNING,
            _running_in_group.c.concurrency_group != "",
            _running_in_group.c.concurrency_group == group,
        )
    )


def _task_is_running(running_but: sa.ColumnElement[Any] | None) -> sa.ColumnElement[bool]:
    """The job must wait for its task: it is not an ALLOW job, and a job of its task that
    is not ALLOW (other than ``running_but``, a job id) is RUNNING. Read through
    uq_jobs_running_task, whose rows these are."""
    running = [
        _running_of_task.c.task_id == jobs.c.task_id,
        _running_of_task.c.status == JobStatus.RUNNING,
        _running_of_task.c.overlap != QueuedBehind.ALLOW,
    ]
    if running_but is not None:
        running.append(_running_of_task.c.id != running_but)
    return sa.and_(
        jobs.c.overlap != QueuedBehind.ALLOW,
        sa.exists(sa.select(_running_of_task.c.id).where(*running)),
    )


def _next_ready(
    *, running_but: sa.ColumnElement[Any] | None = None, also: Sequence[sa.ColumnElement[bool]] = ()
) -> sa.Select[Any]:
    """The next ready job's id in the queue order, unless a job other than ``running_but``
    (a job id) is RUNNING in slot ``b_slot``, and only if every condition in ``also``
    holds. A job whose task's concurrency group has a running job is passed over, and so
    is one that must wait for its task's running job (:func:`_task_is_running`).

    Not correlated with the UPDATE that takes it: its own scan of the queue, run once
    (PostgreSQL plans an uncorrelated scalar subquery as an InitPlan; as a FROM item joined
    to the updated table it may be rescanned once per candidate row and, skipping locked
    rows, start several)."""
    running = [
        _running.c.status == JobStatus.RUNNING,
        _running.c.slot == sa.bindparam("b_slot", type_=sa.Integer),
    ]
    if running_but is not None:
        running.append(_running.c.id != running_but)
    return (
        queue_order(
            sa.select(jobs.c.id).where(
                ready(sa.bindparam("now")),
                ~sa.exists(sa.select(_running.c.id).where(*running)),
                ~_group_is_running(),
                ~_task_is_running(running_but),
            )
        )
        .where(*also)
        .limit(1)
        .correlate(None)
    )


#: The next ready job's id, unless a job is running in the slot (parameters ``now``,
#: ``b_slot``).
NEXT_READY = _next_ready()

# ------------------------------------------------------------------ a job and its task


def of_the_jobs_task(name: str) -> sa.Label[Any]:
    """Column ``name`` of the job's task, for the RETURNING of a statement on ``jobs``: a
    scalar subquery labelled ``task__<name>`` (NULL when the task is gone)."""
    return (
        sa.select(tasks.c[name])
        .where(tasks.c.id == jobs.c.task_id)
        .scalar_subquery()
        .label(f"task__{name}")
    )


#: A finished job's columns and what follows its outcome of its task (``task__<name>``):
#: the outcome is recorded and its task read in one statement.
FINISHED_JOB_COLUMNS = (*jobs.c, *(of_the_jobs_task(name) for name in FinishingTask._fields))

# ------------------------------------------------------------------------------ claim


def _start_next(
    next_ready: sa.Select[Any], *, join_task: bool, token: str = "b_token"
) -> ReturningUpdate[Any]:
    """The statement that starts the job ``next_ready`` selects, under the lease token in
    parameter ``token``, and returns it with its task (columns ``task__<name>``): joined
    (``join_task``: RETURNING may name the FROM items' columns, a third of the server time
    of one subquery per column) or as scalar subqueries (RETURNING sees only the updated
    table)."""
    started_at = sa.bindparam("b_started_at", type_=jobs.c.started_at.type)
    group = (
        tasks.c.concurrency_group
        if join_task
        else sa.select(tasks.c.concurrency_group)
        .where(tasks.c.id == jobs.c.task_id)
        .scalar_subquery()
    )
    task_columns = (
        [column.label(f"task__{column.name}") for column in tasks.c]
        if join_task
        else [of_the_jobs_task(column.name) for column in tasks.c]
    )
    return (
        jobs.update()
        .where(jobs.c.id == next_ready.scalar_subquery(), jobs.c.status == JobStatus.QUEUED)
        .where(*([tasks.c.id == jobs.c.task_id] if join_task else []))
        .values(
            status=JobStatus.RUNNING,
            # ``b_started_at`` was read before this transaction; an enqueue that committed
            # meanwhile may carry a later instant. A job never starts before it was enqueued.
            started_at=sa.case(
                (jobs.c.enqueued_at > started_at, jobs.c.enqueued_at), else_=started_at
            ),
            worker_id=sa.bindparam("b_worker_id"),
            lease_token=sa.bindparam(token),
            lease_expires_at=sa.bindparam("b_expires"),
            slot=sa.bindparam("b_slot", type_=sa.Integer),
            concurrency_group=group,
        )
        .returning(*jobs.c, *task_columns)
    )


_WORKER_LEASE_HOLDER = sa.select(leases.c.holder, leases.c.token).where(
    leases.c.name == sa.bindparam("b_lease_name", type_=leases.c.name.type)
)

# Taking the next job is one statement after the slot's worker lease row (locked where rows
# can be, so that the claim's snapshot is taken once any other claim of the slot has
# committed).
LEASE_HOLDER = Prepared(_WORKER_LEASE_HOLDER)
LEASE_HOLDER_LOCKED = Prepared(_WORKER_LEASE_HOLDER.with_for_update())
START_NEXT_READY = Prepared(_start_next(NEXT_READY, join_task=False))
START_NEXT_READY_LOCKED = Prepared(
    _start_next(NEXT_READY.with_for_update(skip_locked=True), join_task=True)
)


def lease_holder(dialect: Dialect) -> Prepared:
    """A slot's ``worker`` lease (columns ``holder``, ``token``; parameter
    ``b_lease_name``, see :func:`scheduler_svc.schema.slot_lease_name`), its row locked where
    :attr:`Dialect.row_locks`."""
    return LEASE_HOLDER_LOCKED if dialect.row_locks else LEASE_HOLDER


def start_next_ready(dialect: Dialect) -> Prepared:
    """The claim: starts the next ready job in slot ``b_slot`` (free of RUNNING jobs),
    returns it and its task (``task__<name>``). Parameters ``now``, ``b_slot``,
    ``b_started_at``, ``b_worker_id``, ``b_token``, ``b_expires``.
    Where :attr:`Dialect.skip_locked`, rows other claims hold are passed over."""
    return START_NEXT_READY_LOCKED if dialect.skip_locked else START_NEXT_READY


# ---------------------------------------------------------------- heartbeat and finish

#: The job ``b_job_id`` while it is RUNNING under lease token ``b_token``.
RUNNING_UNDER_TOKEN = sa.and_(
    jobs.c.id == sa.bindparam("b_job_id"),
    jobs.c.lease_token == sa.bindparam("b_token"),
    jobs.c.status == JobStatus.RUNNING,
)
#: A heartbeat: the lease of ``b_job_id`` under ``b_token`` now expires at ``b_expires``.
RENEW_JOB_LEASE = (
    jobs.update().where(RUNNING_UNDER_TOKEN).values(lease_expires_at=sa.bindparam("b_expires"))
)
#: What an outcome sets: ``b_status``, ``b_error``, ``b_tail`` (empty keeps the tail the
#: job's LogLines stored), finished at ``b_now``, the lease cleared.
FINISH_VALUES: dict[str, Any] = {
    "status": sa.bindparam("b_status"),
    "error": sa.bindparam("b_error"),
    "output_tail": sa.case(
        (sa.bindparam("b_tail", type_=sa.Text) == "", jobs.c.output_tail),
        else_=sa.bindparam("b_tail", type_=sa.Text),
    ),
    "finished_at": sa.bindparam("b_now", type_=jobs.c.finished_at.type),
    "lease_expires_at": None,
}
#: Records an outcome under the lease token; returns :data:`FINISHED_JOB_COLUMNS`.
FINISH_JOB = Prepared(
    jobs.update().where(RUNNING_UNDER_TOKEN).values(FINISH_VALUES).returning(*FINISHED_JOB_COLUMNS)
)


def _has_no_follow_ups() -> sa.ColumnElement[bool]:
    """True for a running job whose success has nothing to follow it (the rules of
    :func:`scheduler_svc.store.finish.after_finish`, which this must match): its task's
    consecutive_failure_count is already 0, it is neither failing nor overdue
    (``failing_since`` and ``overdue_since`` NULL: no recovery to notify, nothing to
    clear) and it was not started by an enabled interval schedule (whose next run is
    anchored to the finish). Scalar subqueries on the primary
    keys, not EXISTS: PostgreSQL may turn an EXISTS into a join that reads every enabled
    schedule for the one job."""
    failures = (
        sa.select(
            sa.case(
                (
                    sa.and_(tasks.c.failing_since.is_(None), tasks.c.overdue_since.is_(None)),
                    tasks.c.consecutive_failure_count,
                ),
                else_=1,
            )
        )
        .where(tasks.c.id == jobs.c.task_id)
        .scalar_subquery()
    )
    interval = (
        sa.select(
            sa.and_(
                schedules.c.enabled.is_(True),
                schedules.c.cron_expression == "",
                schedules.c.interval_seconds > 0,
            )
        )
        .where(schedules.c.id == jobs.c.schedule_id)
        .scalar_subquery()
    )
    return sa.and_(sa.func.coalesce(failures, 0) == 0, sa.func.coalesce(interval, False).is_(False))


def _succeed_and_start_next() -> sa.Select[Any]:
    """One statement that records a running job's success and starts the next ready job
    for the same worker in slot ``b_slot``, when that success has no follow-ups
    (:func:`_has_no_follow_ups`) and the worker holds the slot's ``worker`` lease
    (``b_lease_name``, under token ``b_lease_token`` unless that is NULL). Needs
    :attr:`Dialect.writable_ctes` and :attr:`Dialect.skip_locked`.

    Columns: the finished job's, prefixed ``finished__`` (all NULL when nothing was
    finished: stale token, a repeat, or follow-ups to do), then the started job and its
    task as :data:`START_NEXT_READY_LOCKED` returns them (all NULL when none started).
    Parameters: those of :data:`FINISH_JOB` and of :data:`START_NEXT_READY_LOCKED`, the
    started job's lease token in ``b_next_token``.

    Why no second job can start in the slot: only the holder of the slot's lease claims in
    it, and its claims are serialized on the lease row's lock (FOR UPDATE re-reads the
    holder and token once the lock is held, so a session that lost the lease starts
    nothing); the claim excludes only the job it finishes, which it finishes only under its
    lease token (a concurrent repeat of the same outcome re-checks the token after the row
    lock and finishes, and so starts, nothing). Whatever else happens, uq_jobs_running_slot
    and uq_jobs_running_group refuse a second running job in a slot or a group: the
    statement then fails whole (nothing recorded) and the caller records the outcome on
    its own.
    """
    finished = (
        jobs.update()
        .where(RUNNING_UNDER_TOKEN, _has_no_follow_ups())
        .values(FINISH_VALUES)
        .returning(*jobs.c)
        .cte("finished")
    )
    lease_token = sa.bindparam("b_lease_token", type_=leases.c.token.type)
    lease = (
        sa.select(leases.c.holder)
        .where(
            leases.c.name == sa.bindparam("b_lease_name", type_=leases.c.name.type),
            leases.c.holder == sa.bindparam("b_worker_id"),
            sa.or_(lease_token.is_(None), leases.c.token == lease_token),
        )
        .with_for_update()
        .cte("worker_lease")
    )
    next_ready = _next_ready(
        running_but=sa.bindparam("b_job_id"),
        also=[sa.exists(sa.select(finished.c.id)), sa.exists(sa.select(lease.c.holder))],
    ).with_for_update(skip_locked=True)
    started = _start_next(next_ready, join_task=True, token="b_next_token").cte("started")
    one = sa.select(sa.literal(1).label("one")).subquery("one")
    return sa.select(
        *(column.label(f"finished__{column.key}") for column in finished.c),
        *(column for column in started.c),
    ).select_from(one.outerjoin(finished, sa.true()).outerjoin(started, sa.true()))


SUCCEED_AND_START_NEXT = Prepared(_succeed_and_start_next())

# ------------------------------------------------------------------ fires, as driver SQL

#: The columns of a new job row (:func:`scheduler_svc.store.rows.job_row`), in its order.
JOB_COLUMNS = (
    "task_id",
    "task_name",
    "status",
    "trigger",
    "lane",
    "task_priority",
    "attempt",
    "enqueued_at",
    "not_before",
    "schedule_id",
    "fire_time",
    "retry_of_job_id",
    "error",
    "output_tail",
    "abort_requested",
    "late_outcome",
    "overlap",
)
#: A job whose task already has an active one is left out (uq_jobs_one_active_per_task).
_ACTIVE_JOB_CONFLICT = f"ON CONFLICT (task_id) WHERE {ACTIVE_JOB_PREDICATE.text} DO NOTHING"
FIRE_COLUMNS = (
    "schedule_id",
    "fire_time",
    "outcome",
    "runs",
    "recorded_at",
    "start_at",
    "trigger",
)
#: A fire already recorded for its (schedule, fire time) is left out.
_FIRE_CONFLICT = "ON CONFLICT (schedule_id, fire_time) DO NOTHING"

_JOB_DATETIME_COLUMNS = tuple(
    i for i, c in enumerate(JOB_COLUMNS) if c in ("enqueued_at", "not_before", "fire_time")
)
_JOB_FLAG_COLUMN = JOB_COLUMNS.index("abort_requested")


def driver_row(bulk: Bulk, row: dict[str, Any]) -> tuple[Any, ...]:
    """A :func:`~scheduler_svc.store.rows.job_row` as driver values in :data:`JOB_COLUMNS`
    order (its datetime columns as UTCDateTime stores them, its flag as Boolean does)."""
    out = [row[column] for column in JOB_COLUMNS]
    for i in _JOB_DATETIME_COLUMNS:
        out[i] = bulk.when(out[i])
    out[_JOB_FLAG_COLUMN] = bulk.flag(out[_JOB_FLAG_COLUMN])
    return tuple(out)


def insert_fires(
    bulk: Bulk, fire_rows: Sequence[tuple[Any, ...]], *, ids: bool = True
) -> dict[tuple[int, dt.datetime], int]:
    """Insert fire rows (driver values in :data:`FIRE_COLUMNS` order), leaving out a
    (schedule, fire time) already recorded; with ``ids``, the new rows' ids by (schedule,
    fire time), else nothing is returned (an empty dict)."""
    returning = ("id", "schedule_id", "fire_time") if ids else ()
    returned = bulk.insert(
        "fires", FIRE_COLUMNS, fire_rows, suffix=_FIRE_CONFLICT, returning=returning
    )
    out: dict[tuple[int, dt.datetime], int] = {}
    for fire_id, schedule_id, fire_time in returned:
        when = bulk.read_when(fire_time)
        assert when is not None  # fires.fire_time is NOT NULL
        out[(schedule_id, when)] = fire_id
    return out


#: A new fire job's key: (task id, schedule id, fire time); unique among the jobs one
#: call inserts, as a fire is unique on (schedule, fire time) and names a task once.
JobKey = tuple[int, int | None, dt.datetime | None]


def insert_jobs(bulk: Bulk, job_rows: Sequence[dict[str, Any]]) -> dict[JobKey, int]:
    """Insert new jobs (:func:`~scheduler_svc.store.rows.job_row`), leaving out a plain one
    whose task already has a plain active job; the new jobs' ids by :data:`JobKey`."""
    returned = bulk.insert(
        "jobs",
        JOB_COLUMNS,
        [driver_row(bulk, row) for row in job_rows],
        suffix=_ACTIVE_JOB_CONFLICT,
        returning=("id", "task_id", "schedule_id", "fire_time"),
    )
    return {
        (task_id, schedule_id, bulk.read_when(fire_time)): job_id
        for job_id, task_id, schedule_id, fire_time in returned
    }


def set_fire_outcomes(bulk: Bulk, updates: Sequence[tuple[str, str, int]]) -> None:
    """Store each (outcome, runs as JSON text, fire id)."""
    bulk.execute_many("UPDATE fires SET outcome = {}, runs = {} WHERE id = {}", updates)


def move_schedules(
    bulk: Bulk, moves: Sequence[tuple[int, dt.datetime, dt.datetime | None, dt.datetime]]
) -> None:
    """For each (schedule id, expected, next_run_at, last_run_at): set next_run_at and
    last_run_at where next_run_at is still ``expected``."""
    bulk.execute_many(
        "UPDATE schedules SET next_run_at = {}, last_run_at = {}"
        " WHERE id = {} AND next_run_at = {}",
        [(bulk.when(nxt), bulk.when(last), sid, bulk.when(exp)) for sid, exp, nxt, last in moves],
    )
