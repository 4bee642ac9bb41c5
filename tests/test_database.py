"""scheduler_svc.db.Database on PostgreSQL: pooled connections dropped by the server (a
restart, an operator's pg_terminate_backend) are replaced after a ping when they were
idle, and a connection used a moment ago is not pinged."""

from __future__ import annotations

import asyncpg
import pytest
import sqlalchemy as sa

from scheduler_svc import db
from scheduler_svc.db import Database
from tests.databases import BACKENDS, PG_ADMIN

pytestmark = [
    pytest.mark.skipif(
        "postgresql" not in BACKENDS, reason="PostgreSQL is not among TICKWORK_TEST_BACKENDS"
    ),
    pytest.mark.parametrize("database_url", ["postgresql"], indirect=True),
]


async def _backend_pid(database: Database) -> int:
    return int(await database.read(lambda conn: conn.scalar(sa.text("SELECT pg_backend_pid()"))))


async def _terminate(pid: int) -> None:
    admin = await asyncpg.connect(PG_ADMIN)
    try:
        assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
        # Gone from pg_stat_activity: the server closed it (polled, with a deadline).
        for _ in range(500):
            if not await admin.fetchval("SELECT count(*) FROM pg_stat_activity WHERE pid=$1", pid):
                return
        raise AssertionError(f"backend {pid} still listed")
    finally:
        await admin.close()


async def test_an_idle_connection_dropped_by_the_server_is_replaced(
    database_url: str, database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = await _backend_pid(database)
    await _terminate(first)

    monkeypatch.setattr(db, "PING_IDLE_S", 0.0)  # the pooled connection counts as idle
    second = await _backend_pid(database)
    assert second != first


async def test_a_connection_used_a_moment_ago_is_not_pinged(
    database_url: str, database: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other side of the saving: within PING_IDLE_S the connection is used as is, so
    a connection dropped in that moment fails the next transaction, and only that one."""
    first = await _backend_pid(database)
    await _terminate(first)

    monkeypatch.setattr(db, "PING_IDLE_S", 3600.0)
    with pytest.raises(sa.exc.DBAPIError):
        await _backend_pid(database)
    # SQLAlchemy invalidated that connection: the next transaction gets a new one.
    assert await _backend_pid(database) != first
