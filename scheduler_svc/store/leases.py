"""The named leases (``leases``: "scheduler", "worker"): one conditional UPDATE takes,
renews or gives one up, fenced by a token incremented on every change of holder."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from scheduler_svc.db import leases
from scheduler_svc.errors import InvalidArgument


def acquire_lease(
    conn: Connection, name: str, holder: str, now: dt.datetime, ttl_s: float
) -> int | None:
    """See :meth:`scheduler_svc.store.Store.acquire_lease`."""
    expires = now + dt.timedelta(seconds=ttl_s)
    row = conn.execute(sa.select(leases).where(leases.c.name == name)).first()
    if row is None:
        raise InvalidArgument(f"unknown lease {name!r}", field="name")
    m = row._mapping
    if m["holder"] == holder:
        token = m["token"]
        cond = leases.c.holder == holder
    else:
        token = m["token"] + 1
        cond = sa.and_(leases.c.expires_at < now, leases.c.token == m["token"])
    result = conn.execute(
        leases.update()
        .where(leases.c.name == name, cond)
        .values(holder=holder, token=token, expires_at=expires)
    )
    return int(token) if result.rowcount == 1 else None


def release_lease(conn: Connection, name: str, holder: str, now: dt.datetime) -> None:
    """See :meth:`scheduler_svc.store.Store.release_lease`."""
    conn.execute(
        leases.update()
        .where(leases.c.name == name, leases.c.holder == holder)
        .values(expires_at=now - dt.timedelta(seconds=1))
    )
