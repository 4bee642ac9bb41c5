"""Retention: deleting ended jobs and old fires in small batches."""

from __future__ import annotations

import datetime as dt
import functools

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from scheduler_svc.db import Database, fires, jobs
from scheduler_svc.values import FINAL_STATES


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
    return deleted[0], deleted[1]
