"""The named leases (``leases``: "scheduler", and "worker" with "worker.<n>", one per worker
slot): one conditional UPDATE takes, renews or gives one up, fenced by a token incremented
on every change of holder. A lease records its holder's process; one whose holder died on
this host (:mod:`scheduler_svc.holders`) is taken over without waiting for its expiry."""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from scheduler_svc.db import Dialect, insert_skipping_conflicts
from scheduler_svc.errors import InvalidArgument
from scheduler_svc.holders import HolderProcess
from scheduler_svc.records import LeaseHolder
from scheduler_svc.schema import leases, slot_lease_name


def holder_is_dead(row: sa.Row[Any], process: HolderProcess | None) -> bool:
    """Whether the lease ``row``'s holder is a process of ``process``'s host and boot that
    no longer runs (see :mod:`scheduler_svc.holders`)."""
    if process is None or not row.holder:
        return False
    return process.finds_dead(
        row.holder_host, row.holder_pid, row.holder_boot_id, row.holder_started
    )


def acquire_lease(
    conn: Connection,
    name: str,
    holder: str,
    now: dt.datetime,
    ttl_s: float,
    process: HolderProcess | None = None,
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
    elif holder_is_dead(row, process):
        token = m["token"] + 1  # its holder died on this host: taken over at once
        cond = leases.c.token == m["token"]
    else:
        token = m["token"] + 1
        cond = sa.and_(leases.c.expires_at < now, leases.c.token == m["token"])
    values: dict[str, Any] = {"holder": holder, "token": token, "expires_at": expires}
    if process is not None:
        values.update(process.columns())
    result = conn.execute(leases.update().where(leases.c.name == name, cond).values(values))
    return int(token) if result.rowcount == 1 else None


def expire_dead_holders(
    conn: Connection, now: dt.datetime, process: HolderProcess
) -> list[tuple[str, int]]:
    """Expire every lease whose holder is a dead process of ``process``'s host and boot
    (its holder and token stay; the next acquire takes it); return the (host, pid) of every
    dead holder a lease row names, expired or not, without repeats."""
    dead: list[tuple[str, int]] = []
    for row in conn.execute(sa.select(leases)).all():
        if not holder_is_dead(row, process):
            continue
        if row.expires_at >= now:
            conn.execute(
                leases.update()
                .where(leases.c.name == row.name, leases.c.token == row.token)
                .values(expires_at=now - dt.timedelta(seconds=1))
            )
        if (row.holder_host, row.holder_pid) not in dead:
            dead.append((row.holder_host, row.holder_pid))
    return dead


def release_lease(conn: Connection, name: str, holder: str, now: dt.datetime) -> None:
    """See :meth:`scheduler_svc.store.Store.release_lease`."""
    conn.execute(
        leases.update()
        .where(leases.c.name == name, leases.c.holder == holder)
        .values(expires_at=now - dt.timedelta(seconds=1))
    )


def acquire_slot_lease(
    conn: Connection,
    dialect: Dialect,
    holder: str,
    now: dt.datetime,
    ttl_s: float,
    slots: int,
    process: HolderProcess | None = None,
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
        if (
            row is not None
            and row.holder != holder
            and row.expires_at >= now
            and not holder_is_dead(row, process)
        ):
            continue
        token = acquire_lease(conn, names[slot], holder, now, ttl_s, process)
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
