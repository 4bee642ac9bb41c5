"""Pauses that end by themselves: the scheduler loop's resume of the schedules whose
``paused_until`` came and enable of the tasks whose ``disabled_until`` came."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from scheduler_svc.db import Dialect
from scheduler_svc.pausing import ENABLED, resume_columns
from scheduler_svc.records import ScheduleRecord
from scheduler_svc.schema import schedules, tasks
from scheduler_svc.store import locks
from scheduler_svc.store.schedules import with_tasks


def resume_due(
    conn: Connection, dialect: Dialect, now: dt.datetime, limit: int
) -> list[ScheduleRecord]:
    """See :meth:`scheduler_svc.store.Store.resume_due_schedules`."""
    query = (
        schedules.select()
        .where(schedules.c.enabled.is_(False), schedules.c.paused_until <= now)
        .order_by(schedules.c.paused_until, schedules.c.id)
        .limit(limit)
    )
    due = with_tasks(conn, conn.execute(locks.for_update(dialect, query)).all())
    out = []
    for schedule in due:
        columns = resume_columns(schedule, now, automatic=True)
        row = conn.execute(
            schedules.update()
            .where(schedules.c.id == schedule.id)
            .values({**columns, "updated_at": now})
            .returning(*schedules.c)
        ).one()
        out.append(with_tasks(conn, [row])[0])
    return out


def enable_due(conn: Connection, now: dt.datetime) -> list[int]:
    """See :meth:`scheduler_svc.store.Store.enable_due_tasks`."""
    return list(
        conn.scalars(
            tasks.update()
            .where(tasks.c.enabled.is_(False), tasks.c.disabled_until <= now)
            .values({**ENABLED, "updated_at": now})
            .returning(tasks.c.id)
        )
    )


def earliest_end(conn: Connection) -> dt.datetime | None:
    """See :meth:`scheduler_svc.store.Store.earliest_pause_end`."""
    paused = (
        sa.select(sa.func.min(schedules.c.paused_until))
        .where(schedules.c.enabled.is_(False))
        .scalar_subquery()
    )
    disabled = (
        sa.select(sa.func.min(tasks.c.disabled_until))
        .where(tasks.c.enabled.is_(False))
        .scalar_subquery()
    )
    found = conn.execute(sa.select(paused, disabled)).one()
    ends = [t for t in found if t is not None]
    return min(ends) if ends else None
