"""Operations on ``schedules`` and their task lists (``schedule_tasks``): create (one or a
batch), read, list, update, delete, and the scheduler's reads and moves of next runs."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from scheduler_svc.db import Dialect
from scheduler_svc.errors import AlreadyExists, NotFound, Reason, Resource
from scheduler_svc.records import ScheduleRecord
from scheduler_svc.schema import schedule_tasks, schedules, tasks
from scheduler_svc.store import hot, locks, rows
from scheduler_svc.store.driver import Bulk
from scheduler_svc.store.labels import label_terms

_INSERT_SCHEDULE = schedules.insert().returning(*schedules.c)
# Executed many at once, RETURNING rows in the order of the parameter sets.
_INSERT_SCHEDULES_IN_ORDER = schedules.insert().returning(
    *schedules.c, sort_by_parameter_order=True
)
_TAKEN_SCHEDULE_NAMES = sa.select(schedules.c.name).where(
    schedules.c.name.in_(sa.bindparam("b_names", expanding=True))
)
_INSERT_SCHEDULE_TASK = schedule_tasks.insert()


def _name_taken(values: dict[str, Any]) -> AlreadyExists:
    return _schedule_taken(str(values.get("name")), "schedule.name")


def _schedule_taken(name: str, field: str) -> AlreadyExists:
    return AlreadyExists(
        f"a schedule named {name!r} already exists",
        field=field,
        reason=Reason.SCHEDULE_NAME_TAKEN,
        resource=Resource.schedule(name),
    )


def due_schedules_query(now: dt.datetime, limit: int) -> sa.Select[Any]:
    """Enabled schedules due at ``now``, earliest first; served by ix_schedules_due."""
    return (
        schedules.select()
        .where(schedules.c.enabled.is_(True), schedules.c.next_run_at <= now)
        .order_by(schedules.c.next_run_at, schedules.c.id)
        .limit(limit)
    )


def with_tasks(conn: Connection, found: Sequence[sa.Row[Any]]) -> list[ScheduleRecord]:
    """The schedules of rows ``found``, in that order, each with its tasks (one read)."""
    ids = [r._mapping["id"] for r in found]
    links: dict[int, list[tuple[int, str]]] = {sid: [] for sid in ids}
    if ids:
        query = (
            sa.select(schedule_tasks.c.schedule_id, tasks.c.id, tasks.c.name)
            .join(tasks, tasks.c.id == schedule_tasks.c.task_id)
            .where(schedule_tasks.c.schedule_id.in_(ids))
            .order_by(schedule_tasks.c.schedule_id, schedule_tasks.c.position)
        )
        for sid, tid, name in conn.execute(query).all():
            links[sid].append((tid, name))
    return [rows.schedule(r, links[r._mapping["id"]]) for r in found]


def _lock_tasks(conn: Connection, task_ids: Sequence[int]) -> dict[int, str]:
    """The names of ``task_ids``, their rows locked FOR KEY SHARE (LOCK_ORDER: before the
    schedule's row is written). Raises NotFound(field="schedule.task_ids")."""
    found = conn.execute(locks.TASK_NAMES, {"b_task_ids": sorted(set(task_ids))}).all()
    names: dict[int, str] = {row.id: row.name for row in found}
    missing = [t for t in task_ids if t not in names]
    if missing:
        raise NotFound(
            f"no task with id {missing[0]}",
            field=f"schedule.task_ids[{list(task_ids).index(missing[0])}]",
            reason=Reason.TASK_NOT_FOUND,
            resource=Resource.task(missing[0]),
        )
    return names


def _link_tasks(
    conn: Connection, schedule_id: int, task_ids: Sequence[int], *, replace: bool
) -> None:
    """Make ``task_ids`` (in order) the schedule's tasks, replacing its current ones when
    ``replace``."""
    if replace:
        conn.execute(schedule_tasks.delete().where(schedule_tasks.c.schedule_id == schedule_id))
    conn.execute(
        _INSERT_SCHEDULE_TASK,
        [{"schedule_id": schedule_id, "task_id": t, "position": i} for i, t in enumerate(task_ids)],
    )


def create_schedule(
    conn: Connection, values: dict[str, Any], task_ids: Sequence[int], now: dt.datetime
) -> ScheduleRecord:
    """See :meth:`scheduler_svc.store.Store.create_schedule`."""
    names = _lock_tasks(conn, task_ids)
    try:
        created = conn.execute(_INSERT_SCHEDULE, {**values, "created_at": now, "updated_at": now})
        row = created.one()
        _link_tasks(conn, row.id, task_ids, replace=False)
    except IntegrityError:
        raise _name_taken(values) from None
    return rows.schedule(row, [(t, names[t]) for t in task_ids])


def create_schedules(
    conn: Connection, items: Sequence[tuple[dict[str, Any], Sequence[int]]], now: dt.datetime
) -> list[ScheduleRecord]:
    """See :meth:`scheduler_svc.store.Store.create_schedules`."""
    names = [values["name"] for values, _ in items]
    taken = set(conn.execute(_TAKEN_SCHEDULE_NAMES, {"b_names": names}).scalars())
    for i, name in enumerate(names):
        if name in taken:
            raise _schedule_taken(name, f"requests[{i}].schedule.name")
    wanted = sorted({t for _, task_ids in items for t in task_ids})
    found = conn.execute(locks.TASK_NAMES, {"b_task_ids": wanted}).all()
    task_names: dict[int, str] = {row.id: row.name for row in found}
    for i, (_, task_ids) in enumerate(items):
        missing = [t for t in task_ids if t not in task_names]
        if missing:
            raise NotFound(
                f"no task with id {missing[0]}",
                field=f"requests[{i}].schedule.task_ids[{task_ids.index(missing[0])}]",
                reason=Reason.TASK_NOT_FOUND,
                resource=Resource.task(missing[0]),
            )
    try:
        created = conn.execute(
            _INSERT_SCHEDULES_IN_ORDER,
            [{**values, "created_at": now, "updated_at": now} for values, _ in items],
        ).all()
    except IntegrityError:  # a name taken by another transaction since the check
        raise AlreadyExists(
            "a schedule name in this batch was taken meanwhile; nothing was created",
            field="requests",
            reason=Reason.SCHEDULE_NAME_TAKEN,
        ) from None
    pairs = list(zip(created, (task_ids for _, task_ids in items), strict=True))
    conn.execute(
        _INSERT_SCHEDULE_TASK,
        [
            {"schedule_id": row.id, "task_id": t, "position": p}
            for row, task_ids in pairs
            for p, t in enumerate(task_ids)
        ],
    )
    return [rows.schedule(row, [(t, task_names[t]) for t in task_ids]) for row, task_ids in pairs]


def get_schedule(conn: Connection, schedule_id: int) -> ScheduleRecord:
    """See :meth:`scheduler_svc.store.Store.get_schedule`."""
    row = conn.execute(schedules.select().where(schedules.c.id == schedule_id)).first()
    if row is None:
        raise NotFound(
            f"no schedule with id {schedule_id}",
            field="schedule_id",
            reason=Reason.SCHEDULE_NOT_FOUND,
            resource=Resource.schedule(schedule_id),
        )
    return with_tasks(conn, [row])[0]


def get_schedule_by_name(conn: Connection, name: str) -> ScheduleRecord:
    """See :meth:`scheduler_svc.store.Store.get_schedule_by_name`."""
    row = conn.execute(schedules.select().where(schedules.c.name == name)).first()
    if row is None:
        raise NotFound(
            f"no schedule named {name!r}",
            field="name",
            reason=Reason.SCHEDULE_NOT_FOUND,
            resource=Resource.schedule(name),
        )
    return with_tasks(conn, [row])[0]


def list_schedules(
    conn: Connection, limit: int, after_name: str, selector: dict[str, str]
) -> list[ScheduleRecord]:
    """See :meth:`scheduler_svc.store.Store.list_schedules`."""
    query = (
        schedules.select()
        .where(schedules.c.name > after_name, *label_terms(schedules.c.labels, selector))
        .order_by(schedules.c.name)
    )
    return with_tasks(conn, conn.execute(query.limit(limit)).all())


def update_schedule(
    conn: Connection,
    dialect: Dialect,
    schedule_id: int,
    values: dict[str, Any],
    task_ids: Sequence[int] | None,
    now: dt.datetime,
    complete: Callable[[ScheduleRecord], dict[str, Any]] | None,
) -> ScheduleRecord:
    """See :meth:`scheduler_svc.store.Store.update_schedule`."""
    if task_ids is not None:
        _lock_tasks(conn, task_ids)
    if complete is not None:
        query = schedules.select().where(schedules.c.id == schedule_id)
        current = conn.execute(locks.for_update(dialect, query)).first()
        if current is None:
            raise NotFound(
                f"no schedule with id {schedule_id}",
                field="schedule_id",
                reason=Reason.SCHEDULE_NOT_FOUND,
                resource=Resource.schedule(schedule_id),
            )
        values = {**values, **complete(with_tasks(conn, [current])[0])}
    try:
        result = conn.execute(
            schedules.update()
            .where(schedules.c.id == schedule_id)
            .values({**values, "updated_at": now})
            .returning(*schedules.c)
        )
        row = result.first()
        if row is None:
            raise NotFound(
                f"no schedule with id {schedule_id}",
                field="schedule.id",
                reason=Reason.SCHEDULE_NOT_FOUND,
                resource=Resource.schedule(schedule_id),
            )
        if task_ids is not None:
            _link_tasks(conn, schedule_id, task_ids, replace=True)
        return with_tasks(conn, [row])[0]
    except IntegrityError:
        raise _name_taken(values) from None


def delete_schedule(conn: Connection, schedule_id: int) -> None:
    """See :meth:`scheduler_svc.store.Store.delete_schedule`."""
    result = conn.execute(schedules.delete().where(schedules.c.id == schedule_id))
    if result.rowcount == 0:
        raise NotFound(
            f"no schedule with id {schedule_id}",
            field="schedule_id",
            reason=Reason.SCHEDULE_NOT_FOUND,
            resource=Resource.schedule(schedule_id),
        )


def due_schedules(conn: Connection, now: dt.datetime, limit: int) -> list[ScheduleRecord]:
    """See :meth:`scheduler_svc.store.Store.due_schedules`."""
    return with_tasks(conn, conn.execute(due_schedules_query(now, limit)).all())


def schedules_without_next_run(
    conn: Connection, limit: int, now: dt.datetime | None = None
) -> list[ScheduleRecord]:
    """See :meth:`scheduler_svc.store.Store.schedules_without_next_run`."""
    query = schedules.select().where(
        schedules.c.enabled.is_(True), schedules.c.next_run_at.is_(None)
    )
    if now is not None:  # one past its end_time has no next run, rightly
        query = query.where(sa.or_(schedules.c.end_at.is_(None), schedules.c.end_at > now))
    query = query.order_by(schedules.c.id).limit(limit)
    return with_tasks(conn, conn.execute(query).all())


def earliest_next_run(conn: Connection) -> dt.datetime | None:
    """See :meth:`scheduler_svc.store.Store.earliest_next_run`."""
    query = sa.select(sa.func.min(schedules.c.next_run_at)).where(schedules.c.enabled.is_(True))
    value: dt.datetime | None = conn.scalar(query)
    return value


def _move(
    conn: Connection,
    schedule_id: int,
    expected: dt.datetime | None,
    next_run_at: dt.datetime | None,
    last_run_at: dt.datetime | None,
) -> bool:
    cond = (
        schedules.c.next_run_at.is_(None)
        if expected is None
        else schedules.c.next_run_at == expected
    )
    values: dict[str, Any] = {"next_run_at": next_run_at}
    if last_run_at is not None:
        values["last_run_at"] = last_run_at
    result = conn.execute(
        schedules.update().where(schedules.c.id == schedule_id, cond).values(values)
    )
    return bool(result.rowcount == 1)


def set_next_run(
    conn: Connection,
    schedule_id: int,
    expected: dt.datetime | None,
    next_run_at: dt.datetime | None,
    last_run_at: dt.datetime | None,
) -> bool:
    """See :meth:`scheduler_svc.store.Store.set_next_run`."""
    return _move(conn, schedule_id, expected, next_run_at, last_run_at)


def set_next_runs(
    conn: Connection,
    moves: Sequence[tuple[int, dt.datetime | None, dt.datetime | None, dt.datetime | None]],
) -> None:
    """See :meth:`scheduler_svc.store.Store.set_next_runs`."""
    with_last = []
    others = []
    for sid, expected, nxt, last in moves:
        if expected is not None and last is not None:
            with_last.append((sid, expected, nxt, last))
        else:
            others.append((sid, expected, nxt, last))
    if with_last:  # the scheduler's moves after a fire: one executemany
        hot.move_schedules(Bulk(conn), with_last)
    for schedule_id, expected, next_run_at, last_run_at in others:
        _move(conn, schedule_id, expected, next_run_at, last_run_at)
