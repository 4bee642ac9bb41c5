"""Applying a configuration: tasks and schedules upserted by name in one transaction."""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from scheduler_svc import pausing
from scheduler_svc.db import Dialect
from scheduler_svc.errors import FailedPrecondition, NotFound, Reason, Resource
from scheduler_svc.records import ScheduleRecord, TaskRecord
from scheduler_svc.schema import schedule_tasks, schedules, tasks
from scheduler_svc.store import locks, outbox, rows
from scheduler_svc.store import schedules as schedule_ops
from scheduler_svc.store import tasks as task_ops
from scheduler_svc.store.labels import label_terms
from scheduler_svc.store.outbox import NotifierRecord

#: The schedule columns whose change moves its next run.
TIMING = ("cron_expression", "interval_seconds", "timezone", "enabled", "start_at", "end_at")


class Action(enum.StrEnum):
    """What applying did to one item."""

    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"
    DELETED = "deleted"


@dataclass(frozen=True)
class ScheduleItem:
    """A schedule to apply: validated column ``values`` (``enabled`` only when managed) and
    its tasks by name; ``field`` is its request position, e.g. ``schedules[2]``."""

    values: dict[str, Any]
    task_names: tuple[str, ...]
    field: str


@dataclass(frozen=True)
class Change:
    """One item's outcome: ``fields`` are the columns that differed (for UPDATED);
    ``before``/``after`` the schedule as stored before and after (None when absent)."""

    kind: str
    name: str
    action: Action
    id: int
    fields: tuple[str, ...] = ()
    before: ScheduleRecord | None = None
    after: ScheduleRecord | None = None


@dataclass
class Applied:
    """The changes in request order (tasks, then schedules) and the jobs cancelled because
    their task was disabled."""

    changes: list[Change] = field(default_factory=list)
    cancelled_jobs: list[int] = field(default_factory=list)


#: Column values of a new task for the columns an apply leaves unmanaged.
_NEW_TASK = {"enabled": True}
_NEW_SCHEDULE = {"enabled": True}


def _differs(stored: Any, wanted: Any) -> bool:
    if isinstance(stored, float | int) and isinstance(wanted, float | int):
        return float(stored) != float(wanted)
    return bool(stored != wanted)


def _diff(record: Any, values: dict[str, Any]) -> tuple[str, ...]:
    return tuple(sorted(k for k, v in values.items() if _differs(getattr(record, k), v)))


def apply_config(
    conn: Connection,
    dialect: Dialect,
    task_items: Sequence[dict[str, Any]],
    schedule_items: Sequence[ScheduleItem],
    now: dt.datetime,
    next_run: Callable[[ScheduleRecord], dt.datetime | None],
    by: str = "",
    prune: dict[str, str] | None = None,
    notifier_items: Sequence[NotifierRecord] = (),
) -> Applied:
    """See :meth:`scheduler_svc.store.Store.apply_config`."""
    out = Applied()
    task_ids: dict[str, int] = {}
    names = [values["name"] for values in task_items]
    # LOCK_ORDER: the tasks first (those to prune too, in id order), then the schedules.
    pruned_tasks: list[TaskRecord] = []
    if prune:
        query = (
            tasks.select()
            .where(tasks.c.name.not_in(names), *label_terms(tasks.c.labels, prune))
            .order_by(tasks.c.id)
        )
        pruned_tasks = [rows.task(r) for r in conn.execute(locks.for_update(dialect, query))]
    stored_tasks: dict[str, TaskRecord] = {}
    if names:
        query = locks.for_update(dialect, tasks.select().where(tasks.c.name.in_(names)))
        stored_tasks = {r.name: rows.task(r) for r in conn.execute(query).all()}
    for values in task_items:
        name = values["name"]
        current = stored_tasks.get(name)
        if current is None:
            created = task_ops.create_task(conn, {**_NEW_TASK, **values}, now)
            task_ids[name] = created.id
            out.changes.append(Change("task", name, Action.CREATED, created.id))
            continue
        task_ids[name] = current.id
        diff = _diff(current, values)
        if not diff:
            out.changes.append(Change("task", name, Action.UNCHANGED, current.id))
            continue
        _, cancelled = task_ops.update_task(
            conn, dialect, current.id, {k: values[k] for k in diff}, now, by
        )
        out.cancelled_jobs.extend(cancelled)
        out.changes.append(Change("task", name, Action.UPDATED, current.id, diff))
    _resolve_task_names(conn, schedule_items, task_ids)
    snames = [item.values["name"] for item in schedule_items]
    stored: dict[str, ScheduleRecord] = {}
    if snames:
        query = locks.for_update(dialect, schedules.select().where(schedules.c.name.in_(snames)))
        stored = {r.name: r for r in schedule_ops.with_tasks(conn, conn.execute(query).all())}
    for item in schedule_items:
        out.changes.append(
            _apply_schedule(conn, dialect, item, stored, task_ids, now, next_run, by)
        )
    for notifier in notifier_items:
        _, is_new, differed = outbox.put_notifier_row(conn, dialect, notifier, now)
        action = Action.CREATED if is_new else Action.UPDATED if differed else Action.UNCHANGED
        out.changes.append(Change("notifier", notifier.name, action, 0, differed))
    if prune:
        out.changes.extend(_prune(conn, dialect, prune, set(snames), pruned_tasks))
    return out


def _prune(
    conn: Connection,
    dialect: Dialect,
    selector: dict[str, str],
    kept_schedules: set[str],
    pruned_tasks: list[TaskRecord],
) -> list[Change]:
    """Delete the stored schedules matching ``selector`` whose names are not in
    ``kept_schedules``, then ``pruned_tasks``; their DELETED changes (schedules, then tasks,
    by name). Raises FailedPrecondition(field="prune_selector") for a task to prune that a
    schedule left in place still runs, or that has a running job."""
    query = (
        sa.select(schedules.c.id, schedules.c.name)
        .where(schedules.c.name.not_in(kept_schedules), *label_terms(schedules.c.labels, selector))
        .order_by(schedules.c.name)
    )
    gone = conn.execute(locks.for_update(dialect, query)).all()
    changes = []
    for sid, name in gone:
        schedule_ops.delete_schedule(conn, sid)
        changes.append(Change("schedule", name, Action.DELETED, sid))
    ids = [t.id for t in pruned_tasks]
    if ids:
        used = conn.execute(
            sa.select(tasks.c.name, schedules.c.name)
            .select_from(schedule_tasks.join(schedules).join(tasks))
            .where(schedule_tasks.c.task_id.in_(ids))
            .order_by(tasks.c.name, schedules.c.name)
        ).first()
        if used is not None:
            raise FailedPrecondition(
                f"task {used[0]!r} matches the prune selector but schedule {used[1]!r}, "
                "which stays, runs it; add the task to the file, or remove it from the "
                "schedule (or prune the schedule too)",
                field="prune_selector",
                reason=Reason.TASK_IN_USE,
                resource=Resource.task(used[0]),
            )
    for task in sorted(pruned_tasks, key=lambda t: t.name):
        try:
            task_ops.delete_task(conn, dialect, task.id)
        except FailedPrecondition as err:
            raise FailedPrecondition(
                f"cannot prune task {task.name!r}: {err.text}",
                field="prune_selector",
                reason=err.reason,
                resource=err.resource,
            ) from None
        changes.append(Change("task", task.name, Action.DELETED, task.id))
    return changes


def _resolve_task_names(
    conn: Connection, items: Sequence[ScheduleItem], task_ids: dict[str, int]
) -> None:
    """Add to ``task_ids`` the stored tasks the schedules name (locked FOR KEY SHARE).
    Raises NotFound naming ``schedules[i].task_names[j]``."""
    wanted = sorted({n for item in items for n in item.task_names if n not in task_ids})
    if wanted:
        query = sa.select(tasks.c.id, tasks.c.name).where(tasks.c.name.in_(wanted))
        for tid, name in conn.execute(query).all():
            task_ids[name] = tid
    for item in items:
        for j, name in enumerate(item.task_names):
            if name not in task_ids:
                raise NotFound(
                    f"no task named {name!r} in the request or stored",
                    field=f"{item.field}.task_names[{j}]",
                    reason=Reason.TASK_NOT_FOUND,
                    resource=Resource.task(name),
                )


def _apply_schedule(
    conn: Connection,
    dialect: Dialect,
    item: ScheduleItem,
    stored: dict[str, ScheduleRecord],
    task_ids: dict[str, int],
    now: dt.datetime,
    next_run: Callable[[ScheduleRecord], dt.datetime | None],
    by: str,
) -> Change:
    name = item.values["name"]
    ids = [task_ids[n] for n in item.task_names]
    current = stored.get(name)
    if current is None:
        values = {**_NEW_SCHEDULE, **item.values}
        draft = ScheduleRecord(
            id=0, next_run_at=None, last_run_at=None, created_at=now, updated_at=now, **values
        )
        values["next_run_at"] = next_run(draft)
        created = schedule_ops.create_schedule(conn, values, ids, now)
        return Change("schedule", name, Action.CREATED, created.id, after=created)
    diff = list(_diff(current, item.values))
    if sorted(current.task_ids) != sorted(ids):
        diff.append("task_ids")
    if not diff:
        return Change("schedule", name, Action.UNCHANGED, current.id, before=current, after=current)
    values = {k: item.values[k] for k in diff if k != "task_ids"}
    merged = replace(current, **values)
    if any(k in TIMING for k in values):
        values["next_run_at"] = next_run(merged)
    if merged.enabled and not current.enabled:
        values.update(pausing.resume_columns(merged, now))
    elif current.enabled and not merged.enabled:
        values.update(pausing.pause_columns(by, now))
    updated = schedule_ops.update_schedule(
        conn, dialect, current.id, values, ids if "task_ids" in diff else None, now, None
    )
    return Change(
        "schedule",
        name,
        Action.UPDATED,
        current.id,
        tuple(sorted(diff)),
        before=current,
        after=updated,
    )
