"""The order in which write transactions lock rows, and the reads that take those locks.

LOCK_ORDER: tasks (in id order), then schedules, then jobs (in id order). Every write
transaction on a database with :attr:`~scheduler_svc.db.Dialect.row_locks` takes its row
locks in this order, so two never wait for each other (a deadlock, which PostgreSQL breaks
after a second by failing one). DeleteTask locks its task FOR UPDATE, then the schedules it
is in; whatever inserts rows that name a task (a schedule's task list, a fire's jobs, a
run's job) first reads the task FOR KEY SHARE, which also makes a task deleted meanwhile
NOT_FOUND instead of a foreign-key error. Without row locks (SQLite) one write transaction
runs at a time and the locking clauses are left out.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from scheduler_svc.db import Dialect
from scheduler_svc.schema import jobs, tasks
from scheduler_svc.store.rows import FiringTask
from scheduler_svc.values import ACTIVE_STATES, JobStatus, QueuedBehind

LOCK_ORDER = "tasks (in id order), then schedules, then jobs (in id order)"
"""The order of every write transaction's row locks (see the module docstring)."""

#: The ids and names of the tasks ``b_task_ids``, FOR KEY SHARE, in id order: read before
#: a schedule's row is written.
TASK_NAMES = (
    sa.select(tasks.c.id, tasks.c.name)
    .where(tasks.c.id.in_(sa.bindparam("b_task_ids", expanding=True)))
    .order_by(tasks.c.id)
    .with_for_update(read=True, key_share=True)
)

#: What recording fires reads of the tasks ``b_task_ids`` (:class:`FiringTask`), FOR KEY
#: SHARE, in id order: read before the fires are written.
FIRING_TASKS = (
    sa.select(*(tasks.c[name] for name in FiringTask._fields))
    .where(tasks.c.id.in_(sa.bindparam("b_task_ids", expanding=True)))
    .order_by(tasks.c.id)
    .with_for_update(read=True, key_share=True)
)


def all_active_jobs(
    conn: Connection, dialect: Dialect, task_ids: Iterable[int]
) -> dict[int, list[Any]]:
    """Every queued or running job of each of ``task_ids`` that has one, by task id, in job
    id order: rows of (id, task_id, status, lane, not_before, attempt, overlap), locked FOR
    UPDATE in job id order until the transaction ends where rows are locked."""
    query = (
        sa.select(
            jobs.c.id,
            jobs.c.task_id,
            jobs.c.status,
            jobs.c.lane,
            jobs.c.not_before,
            jobs.c.attempt,
            jobs.c.overlap,
        )
        .where(jobs.c.status.in_(ACTIVE_STATES), jobs.c.task_id.in_(list(task_ids)))
        .order_by(jobs.c.id)
    )
    if dialect.row_locks:
        query = query.with_for_update()
    out: dict[int, list[Any]] = {}
    for row in conn.execute(query).all():
        out.setdefault(row.task_id, []).append(row)
    return out


def active_jobs(conn: Connection, dialect: Dialect, task_ids: Iterable[int]) -> dict[int, Any]:
    """The active job of each of ``task_ids`` that has one, by task id, as
    :func:`all_active_jobs` reads (and locks) them: of several (a fire's job waiting behind
    another, or running alongside), a running one that is not ALLOW, else the plain one,
    else the oldest."""
    return active_jobs_of(all_active_jobs(conn, dialect, task_ids))


def active_jobs_of(found: dict[int, list[Any]]) -> dict[int, Any]:
    """The job :func:`active_jobs` names for each task, of the jobs
    :func:`all_active_jobs` found."""
    return {task_id: min(rows, key=_precedence) for task_id, rows in found.items()}


def _precedence(row: Any) -> tuple[int, int, int]:
    running = row.status == JobStatus.RUNNING and row.overlap != QueuedBehind.ALLOW
    return (not running, row.overlap != QueuedBehind.PLAIN, row.id)


def for_update(dialect: Dialect, query: sa.Select[Any]) -> sa.Select[Any]:
    """``query`` locking its rows FOR UPDATE, where rows are locked: what changes a task's
    or a schedule's definition, or deletes a task, reads it this way first."""
    return query.with_for_update() if dialect.row_locks else query


def key_share(dialect: Dialect, query: sa.Select[Any]) -> sa.Select[Any]:
    """``query`` locking its rows FOR KEY SHARE, where rows are locked: what inserts a row
    naming a task or schedule holds off that row's deletion until it commits."""
    return query.with_for_update(read=True, key_share=True) if dialect.row_locks else query
