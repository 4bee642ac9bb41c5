"""scheduler_svc.db.Database: what a failing connection gives. On PostgreSQL a pooled
connection the server dropped (a restart, an operator's pg_terminate_backend) is replaced
before the next transaction uses it, however recently it was used, and a server that cannot
be reached or drops new connections is an error the API answers UNAVAILABLE (not INTERNAL);
on SQLite a write lock held past the busy timeout is SQLAlchemy's OperationalError (the API
answers UNAVAILABLE), raised by BEGIN IMMEDIATE itself."""

from __future__ import annotations

import asyncio
import datetime as dt
import gc
import sqlite3
import threading
from pathlib import Path

import asyncpg
import grpc
import pytest
import sqlalchemy as sa

from scheduler_svc import db, migrate
from scheduler_svc.db import Database
from scheduler_svc.errors import StorageError
from scheduler_svc.schema import leases
from scheduler_svc.servicers._errors import translate
from tests.databases import BACKENDS, PG_ADMIN, run_sql_async
from tests.harness import free_port
from tests.pgproxy import PgProxy, at_port

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


def _answer(err: Exception) -> grpc.StatusCode:
    return translate(err, "test")[0]


@requires_postgresql
@on_postgresql
async def test_an_unreachable_postgresql_is_unavailable_not_internal(database_url: str) -> None:
    unreachable = Database(at_port(database_url, free_port()))  # nothing listens there
    try:
        for run in (unreachable.write, unreachable.read):
            with pytest.raises(StorageError) as caught:
                await run(lambda conn: conn.execute(sa.select(leases.c.name)).all())
            assert _answer(caught.value) == grpc.StatusCode.UNAVAILABLE
            assert "127.0.0.1" not in caught.value.message  # the details stay in the log
    finally:
        await unreachable.dispose()


@requires_postgresql
@on_postgresql
async def test_a_value_the_database_cannot_hold_is_invalid_argument_not_an_outage(
    database: Database,
) -> None:
    """A NUL in text, which PostgreSQL cannot store, that no check refused is the
    request's fault: INVALID_ARGUMENT, and the database's health stays as it was (it was
    UNAVAILABLE, logged "database failing" and counted as an outage)."""
    statement = sa.text("SELECT CAST(:v AS text)").bindparams(v="a\x00b")
    with pytest.raises(sa.exc.DBAPIError) as caught:
        await database.write(lambda conn: conn.execute(statement).all())
    assert _answer(caught.value) == grpc.StatusCode.INVALID_ARGUMENT
    assert not database.health.failing and database.health.failures_total == 0


@requires_postgresql
@on_postgresql
async def test_a_silently_dropped_connection_costs_seconds_not_the_tcp_timeout(
    database_url: str, database: Database
) -> None:
    """A network partition (or a failover that sends no reset) leaves pooled connections
    that never answer: each would hold a call until the kernel gives up, about 15 minutes.
    The checkout ping gives up after its timeout and the pool opens a new connection; a
    statement caught mid-transaction fails UNAVAILABLE after the statement timeout, and
    the next call runs on a new connection."""
    read = lambda conn: conn.execute(sa.select(leases.c.name)).all()  # noqa: E731
    loop = asyncio.get_running_loop()
    async with PgProxy.to(database_url).running() as proxy:
        proxied = Database(proxy.url(database_url), statement_timeout_s=3.0, ping_timeout_s=0.5)
        try:
            await asyncio.gather(*(proxied.read(read) for _ in range(3)))  # three pooled
            proxy.hold()  # they no longer reach the server; new connections do
            began = loop.time()
            for _ in range(4):
                assert await asyncio.wait_for(proxied.read(read), 30) is not None
            assert loop.time() - began < 15

            def slow_then_more(conn: sa.Connection) -> int:
                conn.execute(sa.text("SELECT pg_sleep(1.5)"))
                return int(conn.scalar(sa.text("SELECT 2")))

            async def partition_soon() -> None:
                await asyncio.sleep(0.2)  # while pg_sleep runs: SELECT 2 is black-holed
                proxy.hold()

            partition = asyncio.create_task(partition_soon())
            began = loop.time()
            with pytest.raises(StorageError) as caught:
                await asyncio.wait_for(proxied.write(slow_then_more), 30)
            await partition
            assert loop.time() - began < 15
            assert _answer(caught.value) == grpc.StatusCode.UNAVAILABLE
            assert "took over 3.0 s" in caught.value.message
            assert await asyncio.wait_for(proxied.write(slow_then_more), 30) == 2
            assert proxied.connections_in_use() == 0
        finally:
            await proxied.dispose()


@requires_postgresql
@on_postgresql
async def test_migrations_run_without_the_statement_timeout(database_url: str) -> None:
    """Building an index on a long history may take longer than any API statement may."""
    bounded = Database(database_url, statement_timeout_s=1e-6)
    try:
        with pytest.raises(StorageError):  # the bound is real: a 1 s statement cannot finish
            await bounded.read(lambda conn: conn.scalar(sa.text("SELECT pg_sleep(1)")))
        assert await migrate.upgrade(bounded) == migrate.head_revision()
    finally:
        await bounded.dispose()


@requires_postgresql
@on_postgresql
async def test_connections_lost_as_soon_as_they_open_are_unavailable_not_internal(
    database_url: str, database: Database
) -> None:
    async with PgProxy.to(database_url).running() as proxy:
        proxied = Database(proxy.url(database_url))
        try:
            read = lambda conn: conn.execute(sa.select(leases.c.name)).all()  # noqa: E731
            assert await proxied.write(read)  # a pooled connection, through the proxy
            proxy.drop = True
            proxy.cut()  # the pooled one fails its ping; each new one is lost at once
            for run in (proxied.write, proxied.write, proxied.read):
                with pytest.raises(Exception) as caught:
                    await run(read)
                assert _answer(caught.value) == grpc.StatusCode.UNAVAILABLE, repr(caught.value)
            proxy.drop = False
            assert await proxied.write(read)  # and it recovers
        finally:
            await proxied.dispose()


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


@requires_postgresql
@on_postgresql
@pytest.mark.parametrize("running_jobs", [1, 8])
async def test_the_queue_keeps_a_connection_per_running_job_and_opens_none_for_the_next(
    database_url: str, database: Database, running_jobs: int
) -> None:
    """Jobs that end together are queue transactions at once: with a connection kept for
    each running job, the next round of as many opens none (a new connection is a
    PostgreSQL backend process and a handshake; SSLRequest is its first message)."""
    async with PgProxy.to(database_url).running() as proxy:
        proxied = Database(proxy.url(database_url), running_jobs=running_jobs)
        try:

            async def at_once() -> None:
                async def one() -> None:
                    await proxied.write_one(
                        lambda conn: conn.execute(sa.select(leases.c.name)).all(), queue=True
                    )

                await asyncio.gather(*(one() for _ in range(running_jobs)))

            await at_once()
            proxy.queries.clear()
            await at_once()
            opened = len([q for q in proxy.queries if q == b"SELECT 1"])
            assert opened == running_jobs  # every one reused (pinged), none opened anew
        finally:
            await proxied.dispose()


@requires_postgresql
@on_postgresql
async def test_a_reused_connection_is_pinged_with_one_query_and_a_new_one_not_at_all(
    database_url: str, database: Database
) -> None:
    """SQLAlchemy's pool_pre_ping costs asyncpg three round trips (BEGIN, ping, ROLLBACK)
    before every transaction; the checkout ping is one, and a connection just opened (its
    handshake is the check) has none."""
    async with PgProxy.to(database_url).running() as proxy:
        proxied = Database(proxy.url(database_url))
        try:
            read = lambda conn: conn.execute(sa.select(leases.c.name)).all()  # noqa: E731
            await proxied.write(read)
            assert [q for q in proxy.queries if b"SELECT 1" in q] == []  # a new connection
            proxy.queries.clear()
            await proxied.write(read)
            assert proxy.queries[0] == b"SELECT 1"  # reused: pinged first, once
            assert proxy.queries[1:] == [b"BEGIN;", b"COMMIT;"]
        finally:
            await proxied.dispose()


@requires_postgresql
@on_postgresql
async def test_every_pooled_connection_dropped_at_once_is_replaced_before_use(
    database_url: str, database: Database
) -> None:
    """A restart's case: each pooled connection was used a moment ago and the server drops
    them all; the next transactions, as many at once as there were connections, all
    succeed, through write, write_one and read."""

    def pid_slowly(conn: sa.Connection) -> int:
        return int(conn.scalar(sa.text("SELECT pg_backend_pid() FROM pg_sleep(0.05)")))

    pids = set(await asyncio.gather(*(database.read(pid_slowly) for _ in range(4))))
    assert len(pids) == 4  # four pooled connections, each just given back
    for pid in pids:
        await _terminate(pid)
    runs = [database.write, database.write_one, database.read, database.write]
    after = await asyncio.gather(*(run(pid_slowly) for run in runs))
    assert not pids & set(after)


class _BlockedWrite:
    """A write transaction that waits, inside its transaction, until released: on a table
    lock another session holds (PostgreSQL), or on an event in the writer thread (SQLite)."""

    def __init__(self, database: Database, database_url: str) -> None:
        self.database, self.url = database, database_url
        self.began, self.released = threading.Event(), threading.Event()
        self.admin: asyncpg.Connection | None = None

    async def start(self) -> asyncio.Task[None]:
        if self.database.dialect.name == "postgresql":
            self.admin = await asyncpg.connect(self.url.replace("+asyncpg", ""))
            await self.admin.execute("BEGIN; LOCK TABLE leases IN ACCESS EXCLUSIVE MODE")
        write = asyncio.create_task(self.database.write(self._insert))
        deadline = asyncio.get_running_loop().time() + 10
        while not await self._waiting():
            assert asyncio.get_running_loop().time() < deadline, "the INSERT never waited"
            await asyncio.sleep(0.01)
        return write

    def _insert(self, conn: sa.Connection) -> None:
        self.began.set()
        if self.admin is None:
            assert self.released.wait(10)
        conn.execute(leases.insert().values(name="blocked", expires_at=dt.datetime.now(dt.UTC)))

    async def _waiting(self) -> bool:
        if not self.began.is_set() or self.admin is None:
            return self.began.is_set()
        waiting = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        return bool(await self.admin.fetchval(waiting))

    async def release(self) -> None:
        self.released.set()
        if self.admin is not None:
            await self.admin.execute("COMMIT")
            await self.admin.close()

    async def committed(self) -> bool:
        rows = await run_sql_async(self.url, "SELECT name FROM leases")
        return ("blocked",) in rows


async def test_a_cancelled_caller_leaves_all_of_its_transaction_or_none(
    database_url: str, database: Database
) -> None:
    """A worker stream that closes while its claim is being written cancels the caller. On
    SQLite the writer thread goes on and commits; on PostgreSQL asyncpg's statement is
    cancelled and the transaction rolled back (a claim undone leaves its job queued for the
    next worker; an outcome undone is reported again by the worker, which was never told
    it was recorded). Either way the connection goes back to the pool: none is left
    checked out mid-statement for the garbage collector."""
    blocked = _BlockedWrite(database, database_url)
    write = await blocked.start()
    write.cancel()
    with pytest.raises(asyncio.CancelledError):
        await write
    on_postgresql = database.dialect.name == "postgresql"
    if on_postgresql:
        assert database.connections_in_use() == 0
    await blocked.release()
    await database.dispose()
    gc.collect()  # a connection left out of the pool would warn now (an error in tests)
    assert database.connections_in_use() == 0
    assert await blocked.committed() is not on_postgresql


async def _dispose_during_a_write(
    database: Database, database_url: str
) -> tuple[_BlockedWrite, asyncio.Task[None], asyncio.Task[None]]:
    """A write held inside its transaction, and dispose started meanwhile (waiting)."""
    blocked = _BlockedWrite(database, database_url)
    write = await blocked.start()
    dispose = asyncio.create_task(database.dispose())
    for _ in range(20):  # loop turns enough for dispose to reach its wait, not a condition
        await asyncio.sleep(0)
    assert not dispose.done()
    return blocked, write, dispose


async def test_dispose_waits_for_the_transactions_still_running(
    database_url: str, database: Database
) -> None:
    """Shutdown disposes of the database while a closing worker stream may still be
    recording: dispose returns only when that transaction has ended (here: committed)."""
    blocked, write, dispose = await _dispose_during_a_write(database, database_url)
    await blocked.release()
    await dispose
    assert write.done()
    await write
    assert await blocked.committed()


async def test_no_transaction_starts_once_dispose_has_begun(
    database_url: str, database: Database
) -> None:
    """A transaction asked for while dispose waits for the running ones (a worker stream's
    poll, still being answered as the service stops) is refused UNAVAILABLE instead of
    taking a connection from the pool being closed: given back after the close, that
    connection was left open until the garbage collector found it, in a later test."""
    blocked, write, dispose = await _dispose_during_a_write(database, database_url)
    with pytest.raises(StorageError, match="closed"):
        await database.read(lambda conn: conn.scalar(sa.text("SELECT 1")))
    await blocked.release()
    await dispose
    await write
    with pytest.raises(StorageError, match="closed"):
        await database.write(lambda conn: conn.execute(sa.text("SELECT 1")))
    gc.collect()  # a connection left open would warn now (an error in tests)
    assert database.connections_in_use() == 0
