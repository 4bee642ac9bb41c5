"""scheduler_svc.db.Database: what a failing connection gives. On PostgreSQL a pooled
connection the server dropped (a restart, an operator's pg_terminate_backend) is replaced
before the next transaction uses it, however recently it was used; on SQLite a write lock
held past the busy timeout is SQLAlchemy's OperationalError (the API answers UNAVAILABLE),
raised by BEGIN IMMEDIATE itself."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import asyncpg
import pytest
import sqlalchemy as sa

from scheduler_svc import db, migrate
from scheduler_svc.db import Database, leases
from tests.databases import BACKENDS, PG_ADMIN

requires_postgresql = pytest.mark.skipif(
    "postgresql" not in BACKENDS, reason="PostgreSQL is not among TICKWORK_TEST_BACKENDS"
)
on_postgresql = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)


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


@pytest.mark.parametrize("reads_between", [0, 3])
@requires_postgresql
@on_postgresql
async def test_a_pooled_connection_dropped_by_the_server_is_replaced_before_use(
    database_url: str, database: Database, reads_between: int
) -> None:
    """Right after a transaction (the busy worker stream's case) as after a pause: no
    transaction fails for a connection the server dropped while it sat in the pool."""
    first = await _backend_pid(database)
    for _ in range(reads_between):
        assert await _backend_pid(database) == first  # one pooled connection, reused
    await _terminate(first)

    second = await _backend_pid(database)
    assert second != first
    writes = await database.write(lambda conn: conn.execute(sa.select(leases.c.name)).all())
    assert writes  # the write path too


async def test_sqlite_write_lock_held_past_the_busy_timeout_is_an_operational_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(db, "SQLITE_BUSY_TIMEOUT_S", 0.2)
    path = tmp_path / "locked.db"
    database = Database(f"sqlite+aiosqlite:///{path}")
    try:
        await migrate.upgrade(database)
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        try:
            with pytest.raises(sa.exc.OperationalError, match="database is locked"):
                await database.write(lambda conn: conn.execute(sa.select(leases.c.name)).all())
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert await database.write(lambda conn: conn.execute(sa.select(leases.c.name)).all())
    finally:
        await database.dispose()
