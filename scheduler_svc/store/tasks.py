"""Operations on ``tasks``: create, read, list, update (enable, disable), delete."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from scheduler_svc.db import Dialect
from scheduler_svc.errors import AlreadyExists, FailedPrecondition, NotFound, Reason, Resource
from scheduler_svc.pausing import ENABLED, disable_columns
from scheduler_svc.records import TaskRecord
from scheduler_svc.schema import jobs, schedule_tasks, schedules, tasks
from scheduler_svc.store import locks, rows
from scheduler_svc.store.labels import label_terms
from scheduler_svc.values import FIRED_LANES, JobStatus

TASK_DISABLED = "task disabled"
"""The error of a scheduler job cancelled because its task was disabled."""


def _name_taken(values: dict[str, Any]) -> AlreadyExists:
    name = str(values.get("name"))
    return AlreadyExists(
        f"a task named {name!r} already exists",
        field="task.name",
        reason=Reason.TASK_NAME_TAKEN,
        resource=Resource.task(name),
    )


def create_task(conn: Connection, values: dict[str, Any], now: dt.datetime) -> TaskRecord:
    """See :meth:`scheduler_svc.store.Store.create_task`."""
    row = {**values, "created_at": now, "updated_at": now}
    try:
        return rows.task(conn.execute(tasks.insert().values(row).returning(*tasks.c)).one())
    except IntegrityError:
        raise _name_taken(values) from None


def get_task(conn: Connection, task_id: int) -> TaskRecord:
    """See :meth:`scheduler_svc.store.Store.get_task`."""
    row = conn.execute(tasks.select().where(tasks.c.id == task_id)).first()
    if row is None:
        raise NotFound(
            f"no task with id {task_id}",
            field="task_id",
            reason=Reason.TASK_NOT_FOUND,
            resource=Resource.task(task_id),
        )
    return rows.task(row)


def get_task_by_name(conn: Connection, name: str, field: str = "name") -> TaskRecord:
    """See :meth:`scheduler_svc.store.Store.get_task_by_name`."""
    row = conn.execute(tasks.select().where(tasks.c.name == name)).first()
    if row is None:
        raise NotFound(
            f"no task named {name!r}",
            field=field,
            reason=Reason.TASK_NOT_FOUND,
            resource=Resource.task(name),
        )
    return rows.task(row)


def _newest_finish(status: JobStatus) -> sa.ScalarSelect[Any]:
    """When the task's newest job in ``status`` finished: the ix_jobs_task index read
    backwards from the newest job until one is in ``status`` (not every job of the task)."""
    return (
        sa.select(jobs.c.finished_at)
        .where(jobs.c.task_id == tasks.c.id, jobs.c.status == status)
        .order_by(jobs.c.id.desc())
        .limit(1)
        .correlate(tasks)
        .scalar_subquery()
    )


def outcome_times(
    conn: Connection, task_ids: Sequence[int]
) -> dict[int, tuple[dt.datetime | None, dt.datetime | None]]:
    """See :meth:`scheduler_svc.store.Store.task_outcome_times`."""
    if not task_ids:
        return {}
    query = sa.select(
        tasks.c.id,
        _newest_finish(JobStatus.SUCCEEDED).label("last_success"),
        _newest_finish(JobStatus.FAILED).label("last_failure"),
    ).where(tasks.c.id.in_(list(task_ids)))
    return {row.id: (row.last_success, row.last_failure) for row in conn.execute(query)}


def list_tasks(
    conn: Connection, limit: int, after_name: str, selector: dict[str, str]
) -> list[TaskRecord]:
    """See :meth:`scheduler_svc.store.Store.list_tasks`."""
    query = (
        tasks.select()
        .where(tasks.c.name > after_name, *label_terms(tasks.c.labels, selector))
        .order_by(tasks.c.name)
    )
    return [rows.task(r) for r in conn.execute(query.limit(limit)).all()]


def update_task(
    conn: Connection,
    dialect: Dialect,
    task_id: int,
    values: dict[str, Any],
    now: dt.datetime,
    by: str = "",
) -> tuple[TaskRecord, list[int]]:
    """See :meth:`scheduler_svc.store.Store.update_task`."""
    disabling = values.get("enabled") is False
    query = tasks.select().where(tasks.c.id == task_id)
    if disabling:
        # FOR UPDATE, before the jobs (LOCK_ORDER): a fire, run or retry that read the task
        # FOR KEY SHARE commits first (its job is then seen and cancelled below); one that
        # comes after waits for this and reads the task disabled.
        query = locks.for_update(dialect, query)
    try:
        current = conn.execute(query).first()
        if current is None:
            raise NotFound(
                f"no task with id {task_id}",
                field="task.id",
                reason=Reason.TASK_NOT_FOUND,
                resource=Resource.task(task_id),
            )
        row = dict(values)
        if row.get("enabled") is True and not current._mapping["enabled"]:
            row = {**ENABLED, **row}
        if row.get("enabled") is False:
            row.setdefault("disabled_reason", "")
            if current._mapping["enabled"]:  # who and when: a disable without a note
                row = {**disable_columns(by, now), **row}
        row["updated_at"] = now
        result = conn.execute(
            tasks.update().where(tasks.c.id == task_id).values(row).returning(*tasks.c)
        )
        task = rows.task(result.one())
    except IntegrityError:
        raise _name_taken(values) from None
    group = values.get("concurrency_group")
    if group is not None and group != current._mapping["concurrency_group"]:
        _move_running_jobs(conn, task, group)
    cancelled: list[int] = []
    if disabling:
        cancelled = list(
            conn.scalars(
                jobs.update()
                .where(
                    jobs.c.task_id == task_id,
                    jobs.c.status == JobStatus.QUEUED,
                    jobs.c.lane.in_(FIRED_LANES),
                )
                .values(status=JobStatus.CANCELLED, finished_at=now, error=TASK_DISABLED)
                .returning(jobs.c.id)
            )
        )
    return task, cancelled


def delete_task(conn: Connection, dialect: Dialect, task_id: int) -> None:
    """See :meth:`scheduler_svc.store.Store.delete_task`."""
    # The task first, then its schedules (LOCK_ORDER, kept by every writer): a delete
    # racing a run, a fire or a schedule update neither deadlocks nor lets the other insert
    # a row naming a task gone (a foreign-key error).
    found_query = locks.for_update(dialect, sa.select(tasks.c.id).where(tasks.c.id == task_id))
    if conn.scalar(found_query) is None:
        raise NotFound(
            f"no task with id {task_id}",
            field="task_id",
            reason=Reason.TASK_NOT_FOUND,
            resource=Resource.task(task_id),
        )
    running_query = sa.select(jobs.c.id).where(
        jobs.c.task_id == task_id, jobs.c.status == JobStatus.RUNNING
    )
    _refuse_running(conn.scalar(running_query), task_id)
    _check_not_a_schedules_last_task(conn, task_id)
    # Never a running job: a claim that committed since the read above (it waited for no
    # lock of ours) made one, which this DELETE, waiting for the claim's row lock, re-checks
    # and leaves; it is then seen below and the delete refused.
    conn.execute(jobs.delete().where(jobs.c.task_id == task_id, jobs.c.status != JobStatus.RUNNING))
    _refuse_running(conn.scalar(running_query), task_id)
    conn.execute(schedule_tasks.delete().where(schedule_tasks.c.task_id == task_id))
    if conn.execute(tasks.delete().where(tasks.c.id == task_id)).rowcount != 1:
        # Deleted by a concurrent call since the read above: that call succeeded.
        raise NotFound(
            f"no task with id {task_id}",
            field="task_id",
            reason=Reason.TASK_NOT_FOUND,
            resource=Resource.task(task_id),
        )


def _move_running_jobs(conn: Connection, task: TaskRecord, group: str) -> None:
    """Carry the task's running jobs into its new concurrency group ``group`` ("" for
    none), so that a job of the group claimed from now on waits for them as for any job
    of the group (the claim checks the running jobs' group, set when each was claimed).

    Raises:
        FailedPrecondition(field="task.concurrency_group"): a job of the task runs while
            another job of ``group`` runs, or two of the task's jobs run (overlap ALLOW):
            in one group they would run at once, which a group never allows. The update
            is then not made; it can be made once one of them has ended (or is aborted).
    """
    running = list(
        conn.scalars(
            sa.select(jobs.c.id).where(
                jobs.c.task_id == task.id, jobs.c.status == JobStatus.RUNNING
            )
        )
    )
    if not running:
        return
    if group:
        others = list(
            conn.scalars(
                sa.select(jobs.c.id).where(
                    jobs.c.status == JobStatus.RUNNING,
                    jobs.c.concurrency_group == group,
                    jobs.c.task_id != task.id,
                )
            )
        )
        if others or len(running) > 1:
            with_it = f"job {others[0]} of group {group!r}" if others else f"job {running[1]}"
            raise _cannot_join(
                task,
                group,
                f"its job {running[0]} runs, and so does {with_it}; jobs of one group never "
                "run at once. Try again once one of them has ended, or abort it",
            )
    try:
        conn.execute(
            jobs.update()
            .where(jobs.c.task_id == task.id, jobs.c.status == JobStatus.RUNNING)
            .values(concurrency_group=group)
        )
    except IntegrityError:  # a job of the group was claimed since the read above
        raise _cannot_join(
            task,
            group,
            "a job of the group has just started beside its running job; try again once "
            "one of them has ended",
        ) from None


def _cannot_join(task: TaskRecord, group: str, why: str) -> FailedPrecondition:
    """The error of a concurrency-group move refused because of running jobs."""
    return FailedPrecondition(
        f"task {task.name!r} cannot join concurrency group {group!r} now: {why}",
        field="task.concurrency_group",
        reason=Reason.TASK_RUNNING,
        resource=Resource.task(task.id),
    )


def _refuse_running(running: int | None, task_id: int) -> None:
    """Raise FailedPrecondition when ``running`` (a running job of the task) is set."""
    if running is not None:
        raise FailedPrecondition(
            f"task {task_id} has a running job ({running}); abort it first",
            field="task_id",
            reason=Reason.TASK_RUNNING,
            resource=Resource.task(task_id),
        )


def _check_not_a_schedules_last_task(conn: Connection, task_id: int) -> None:
    """Raise FailedPrecondition naming the schedules ``task_id`` is the only task of.

    The schedules it is in are locked first (FOR UPDATE on PostgreSQL, in id order), so two
    deletes of a schedule's last two tasks cannot both see the other one remain.
    """
    linked = sa.select(schedule_tasks.c.schedule_id).where(schedule_tasks.c.task_id == task_id)
    ids = list(
        conn.scalars(
            sa.select(schedules.c.id)
            .where(schedules.c.id.in_(linked))
            .order_by(schedules.c.id)
            .with_for_update()
        )
    )
    if not ids:
        return
    counts = (
        sa.select(schedule_tasks.c.schedule_id)
        .where(schedule_tasks.c.schedule_id.in_(ids))
        .group_by(schedule_tasks.c.schedule_id)
        .having(sa.func.count() == 1)
    )
    alone = list(
        conn.scalars(
            sa.select(schedules.c.name).where(schedules.c.id.in_(counts)).order_by(schedules.c.name)
        )
    )
    if alone:
        shown = ", ".join(repr(name) for name in alone[:5])
        more = f" and {len(alone) - 5} more" if len(alone) > 5 else ""
        raise FailedPrecondition(
            f"task {task_id} is the only task of schedule {shown}{more}; delete the "
            "schedule or give it another task first",
            field="task_id",
            reason=Reason.TASK_IN_USE,
            resource=Resource.task(task_id),
        )


def consecutive_failures(conn: Connection) -> dict[str, int]:
    """See :meth:`scheduler_svc.store.Store.consecutive_failures`."""
    query = sa.select(tasks.c.name, tasks.c.consecutive_failure_count)
    return {str(name): int(count) for name, count in conn.execute(query).all()}
