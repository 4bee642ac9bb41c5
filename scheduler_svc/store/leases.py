"""The named leases (``leases``: "scheduler", and "worker" with "worker.<n>", one per worker
slot): one conditional UPDATE takes, renews or gives one up, fenced by a token incremented
on every change of holder."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from scheduler_svc.db import Dialect, insert_skipping_conflicts, leases, slot_lease_name
from scheduler_svc.errors import InvalidArgument
from scheduler_svc.records import LeaseHolder


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


def acquire_slot_lease(
    conn: Connection, dialect: Dialect, holder: str, now: dt.datetime, ttl_s: float, slots: int
) -> tuple[int, int] | None:
    """See :meth:`scheduler_svc.store.Store.acquire_slot_lease`."""
    names = [slot_lease_name(slot) for slot in range(slots)]
    held = {
        r.name: r for r in conn.execute(sa.select(leases).where(leases.c.name.in_(names))).all()
    }
    missing = [name for name in names if name not in held]
    if missing:
        expired = now - dt.timedelta(seconds=1)
        conn.execute(
            insert_skipping_conflicts(dialect, leases, ["name"]),
            [{"name": name, "holder": "", "token": 0, "expires_at": expired} for name in missing],
        )
    # The slot this holder has first (a renewal), then the free ones in slot order.
    mine = [
        slot for slot in range(slots) if names[slot] in held and held[names[slot]].holder == holder
    ]
    order = mine + [slot for slot in range(slots) if slot not in mine]
    for slot in order:
        row = held.get(names[slot])
        if row is not None and row.holder != holder and row.expires_at >= now:
            continue
        token = acquire_lease(conn, names[slot], holder, now, ttl_s)
        if token is not None:
            return slot, token
    return None


def worker_lease_holders(conn: Connection) -> list[LeaseHolder]:
    """See :meth:`scheduler_svc.store.Store.worker_lease_holders`."""
    found = conn.execute(
        sa.select(leases.c.name, leases.c.holder, leases.c.expires_at)
        .where(sa.or_(leases.c.name == "worker", leases.c.name.like("worker.%")))
        .order_by(leases.c.name)
    ).all()
    return [LeaseHolder(str(r.holder), r.expires_at) for r in found if r.holder]
