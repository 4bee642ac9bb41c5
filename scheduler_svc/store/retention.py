"""Retention: deleting ended jobs, old fires and old notifications in small batches."""

from __future__ import annotations

import datetime as dt
import functools

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from scheduler_svc.db import Database
from scheduler_svc.schema import fires, jobs, notification_deliveries, notification_events
from scheduler_svc.values import FINAL_STATES, DeliveryStatus


def _purge_batch(
    table: sa.Table, cond: sa.ColumnElement[bool], batch: int, conn: Connection
) -> list[int]:
    """Delete up to ``batch`` rows of ``table`` matching ``cond``; their ids."""
    ids = list(conn.execute(sa.select(table.c.id).where(cond).limit(batch)).scalars())
    if ids:
        conn.execute(table.delete().where(table.c.id.in_(ids)))
    return ids


async def purge_history(database: Database, before: dt.datetime, batch: int) -> tuple[int, int]:
    """See :meth:`scheduler_svc.store.Store.purge_history`."""
    deleted = [0, 0]
    targets = (
        (jobs, sa.and_(jobs.c.status.in_(FINAL_STATES), jobs.c.finished_at < before)),
        (fires, fires.c.fire_time < before),
    )
    for i, (table, cond) in enumerate(targets):
        while True:
            ids = await database.write(functools.partial(_purge_batch, table, cond, batch))
            deleted[i] += len(ids)
            if len(ids) < batch:
                break
    # Notification events of before, routed and with no delivery still pending; their
    # deliveries go with them (ON DELETE CASCADE). Not counted in the answer.
    pending = sa.select(notification_deliveries.c.id).where(
        notification_deliveries.c.event == notification_events.c.id,
        notification_deliveries.c.status == DeliveryStatus.PENDING,
    )
    old_events = sa.and_(
        notification_events.c.routed.is_(True),
        notification_events.c.occurred_at < before,
        ~sa.exists(pending),
    )
    while True:
        purge = functools.partial(_purge_batch, notification_events, old_events, batch)
        if len(await database.write(purge)) < batch:
            break
    return deleted[0], deleted[1]
