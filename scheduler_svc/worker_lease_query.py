"""One read of the worker slot lease rows (``worker``, ``worker.1``, ...), for status pages
(SystemService.GetStatus).

Kept apart from the store's lease operations, which take and renew the lease; this only
reads who holds it and until when.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from scheduler_svc.db import Database, leases


@dataclass(frozen=True)
class LeaseHolder:
    """Who holds a lease and until when (aware UTC)."""

    holder: str
    expires_at: dt.datetime


def _read(conn: Connection) -> list[LeaseHolder]:
    rows = conn.execute(
        sa.select(leases.c.name, leases.c.holder, leases.c.expires_at)
        .where(sa.or_(leases.c.name == "worker", leases.c.name.like("worker.%")))
        .order_by(leases.c.name)
    ).all()
    return [LeaseHolder(str(r.holder), r.expires_at) for r in rows if r.holder]


async def worker_lease_holders(db: Database) -> list[LeaseHolder]:
    """The holders (``WORKER_ID#NONCE``, one stream each) and expiries of the worker slot
    leases, in one read transaction; a slot nobody ever held is left out. An expired lease
    is returned as it is: the caller compares ``expires_at`` with its clock."""
    return await db.read(_read)
