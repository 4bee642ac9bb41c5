"""One read of the ``worker`` lease row, for status pages (SystemService.GetStatus).

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


def _read(conn: Connection) -> LeaseHolder | None:
    row = conn.execute(
        sa.select(leases.c.holder, leases.c.expires_at).where(leases.c.name == "worker")
    ).first()
    if row is None or not row.holder:
        return None
    return LeaseHolder(str(row.holder), row.expires_at)


async def worker_lease_holder(db: Database) -> LeaseHolder | None:
    """The ``worker`` lease's holder (``WORKER_ID#NONCE``) and expiry, in one read
    transaction; None when nobody ever held it. An expired lease is returned as it is:
    the caller compares ``expires_at`` with its clock."""
    return await db.read(_read)
