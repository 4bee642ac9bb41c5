"""Database engines and transactions (SQLite and PostgreSQL through SQLAlchemy 2); the
tables are in :mod:`scheduler_svc.schema`.

Dialect differences live here and only here, as the capability flags of :class:`Dialect`:
the rest of the code asks ``dialect.row_locks``, ``dialect.skip_locked`` and the like, never
the dialect's name.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from scheduler_svc import sqlite_files
from scheduler_svc.db_datetime import UTCDateTime as UTCDateTime
from scheduler_svc.db_datetime import stored_datetime as stored_datetime
from scheduler_svc.errors import StorageError
from scheduler_svc.outages import StorageOutages
from scheduler_svc.storage_health import StorageHealth, is_storage_error

log = logging.getLogger(__name__)

UTC = dt.UTC


@dataclass(frozen=True)
class Dialect:
    """What the database can do, computed once from the URL (:func:`dialect_of`).

    ``row_locks``: ``SELECT ... FOR UPDATE`` / ``FOR KEY SHARE`` lock the rows read until
    the transaction ends, and concurrent write transactions need them (PostgreSQL). Without
    it a write transaction already excludes every other writer (SQLite's BEGIN IMMEDIATE),
    and the locking clauses are left out.
    ``skip_locked``: ``FOR UPDATE SKIP LOCKED`` passes over rows another transaction holds,
    and an UPDATE's RETURNING may name the columns of its FROM items (PostgreSQL): the
    queue's claim statement takes that form.
    ``writable_ctes``: a WITH clause may hold an UPDATE whose rows the rest of the statement
    reads (PostgreSQL): a job's success and the next claim are then one statement.
    ``advisory_locks``: transaction-scoped advisory locks exist (PostgreSQL).
    ``notifications``: LISTEN/NOTIFY carries messages between connections, hence between
    replicas (PostgreSQL; :mod:`scheduler_svc.replicas`).
    """

    name: str
    row_locks: bool
    skip_locked: bool
    writable_ctes: bool
    advisory_locks: bool
    notifications: bool


def dialect_of(url: str) -> Dialect:
    """Capability flags of the database at SQLAlchemy URL ``url``."""
    name = sa.engine.make_url(url).get_backend_name()
    postgresql = name == "postgresql"
    return Dialect(
        name=name,
        row_locks=postgresql,
        skip_locked=postgresql,
        writable_ctes=postgresql,
        advisory_locks=postgresql,
        notifications=postgresql,
    )


def insert_skipping_conflicts(
    dialect: Dialect,
    table: sa.Table,
    index_elements: list[str],
    index_where: sa.ColumnElement[bool] | None = None,
) -> Any:
    """``INSERT ... ON CONFLICT (index_elements) [WHERE index_where] DO NOTHING`` for
    ``table``: rows that would violate that unique index (or partial unique index) are left
    out instead of failing the statement. Both SQLite (3.24+) and PostgreSQL have it, with
    SQLAlchemy's per-dialect constructs; this is the one place that picks between them.
    """
    if dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table).on_conflict_do_nothing(
            index_elements=index_elements, index_where=index_where
        )
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(table).on_conflict_do_nothing(
        index_elements=index_elements, index_where=index_where
    )


#: The advisory lock key that serializes schema migrations ("tickwork" in ASCII).
MIGRATION_LOCK_KEY = 0x7469636B776F726B


def lock_for_migration(conn: Connection, dialect: Dialect) -> None:
    """Hold the migration lock until ``conn``'s transaction ends.

    Replicas started together on an empty database would otherwise each create the schema
    and all but one would crash. PostgreSQL: a transaction-level advisory lock, so the others
    wait and then find the schema current. SQLite: nothing to take; the transaction began
    with BEGIN IMMEDIATE, which is the one write lock.
    """
    if dialect.advisory_locks:
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(MIGRATION_LOCK_KEY)))


def _sqlite_path(url: str) -> str:
    return sa.engine.make_url(url).database or ""


#: How long a SQLite transaction waits for another process's write lock, seconds.
SQLITE_BUSY_TIMEOUT_S = 30.0
#: A commit that leaves the write-ahead log longer than this many pages checkpoints it.
SQLITE_WAL_AUTOCHECKPOINT_PAGES = 256
#: The write-ahead log is truncated to this size, bytes, when a checkpoint resets it.
SQLITE_JOURNAL_SIZE_LIMIT_BYTES = 1024 * 1024


def make_sqlite_engine(url: str) -> sa.Engine:
    """A synchronous engine (the standard library's sqlite3) for the SQLite file of ``url``
    (``sqlite:///x.db`` or ``sqlite+aiosqlite:///x.db``; its folder must exist:
    SettingsError naming DATABASE_URL otherwise).

    Every connection gets WAL journaling, foreign keys, synchronous=NORMAL, a 30 s busy
    timeout, and a bounded write-ahead log (:data:`SQLITE_WAL_AUTOCHECKPOINT_PAGES`,
    :data:`SQLITE_JOURNAL_SIZE_LIMIT_BYTES`); transactions begin with BEGIN IMMEDIATE (the
    write lock, taken up front so a writer waits instead of failing to upgrade) or, for
    reads, plain BEGIN.
    """
    path = _sqlite_path(url)
    if path and path != ":memory:":
        sqlite_files.check_folder(path)
    sync_url = sa.engine.make_url(url).set(drivername="sqlite")
    engine = sa.create_engine(
        sync_url,
        connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False},
        pool_size=READ_THREADS + 2,
        max_overflow=4,
    )

    @event.listens_for(engine, "connect")
    def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
        # pysqlite's own transaction handling is off; transactions begin explicitly below.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute(f"PRAGMA busy_timeout={int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
        cur.execute(f"PRAGMA wal_autocheckpoint={SQLITE_WAL_AUTOCHECKPOINT_PAGES}")
        cur.execute(f"PRAGMA journal_size_limit={SQLITE_JOURNAL_SIZE_LIMIT_BYTES}")
        cur.close()

    @event.listens_for(engine, "begin")
    def _sqlite_begin(conn: Any) -> None:
        readonly = conn.get_execution_options().get("tickwork_readonly", False)
        statement = "BEGIN" if readonly else "BEGIN IMMEDIATE"
        # On the driver's connection: through exec_driver_sql it costs as much as a query.
        try:
            conn.connection.driver_connection.execute(statement)
        except sqlite3.Error as exc:
            # "database is locked" past the busy timeout: SQLAlchemy's DBAPIError, as from
            # any statement (callers answer UNAVAILABLE), not the driver's bare error.
            raise sa.exc.DBAPIError.instance(
                statement, (), exc, sqlite3.Error, dialect=conn.dialect
            ) from exc

    return engine


_UNUSED = "tickwork_unused"
"""Key in a pooled connection's ``info``: opened and not yet checked out."""


def _mark_unused(_dbapi_connection: Any, record: Any) -> None:
    """Pool ``connect`` hook (PostgreSQL): a connection just opened needs no ping."""
    record.info[_UNUSED] = True


#: PostgreSQL: the longest one statement may take, seconds (asyncpg's ``command_timeout``),
#: then it fails (UNAVAILABLE) and its connection is thrown away. Every statement of the
#: service is short; the bound is for a connection the network has silently dropped (a
#: partition, a failover that sends no reset), on which a statement would otherwise wait
#: for the kernel's TCP timeout, about 15 minutes, with the scheduler loop or a worker's
#: outcome behind it. Migrations run without it (see :mod:`scheduler_svc.migrate`).
STATEMENT_TIMEOUT_S = 30.0

#: PostgreSQL: the longest the checkout ping of a pooled connection may take, seconds; a
#: connection that does not answer is replaced, as one the server closed.
PING_TIMEOUT_S = 5.0


def _ping_on_checkout(
    timeout_s: float | None, dbapi_connection: Any, record: Any, _proxy: Any
) -> None:
    """Pool ``checkout`` hook (PostgreSQL; bound to its ``timeout_s`` with
    :func:`functools.partial`): one ``SELECT 1`` round trip on a pooled connection about to
    be used again; one the server dropped, or that does not answer within ``timeout_s``
    seconds, is replaced before anything runs on it. A connection just opened (its
    handshake is the check) is not pinged.

    Every reuse is pinged, however recent, even one given back under a second ago: a
    backend killed moments before is not yet seen closed by the client (asyncpg's
    ``is_closed()``). In a loop of outcomes with every backend killed 30 times, 27 outcomes
    fail without the ping and 2 with it.

    SQLAlchemy's ``pool_pre_ping`` does the same in three round trips on asyncpg (BEGIN,
    the ping, ROLLBACK: for pgbouncer's transaction mode, where asyncpg's ping is a
    prepared statement); this one is a simple-protocol query, which pgbouncer passes as
    it is.

    Raises:
        sqlalchemy.exc.DisconnectionError: the ping failed; the pool discards the
            connection and opens a new one in its place.
    """
    if record.info.pop(_UNUSED, False):
        return
    try:
        dbapi_connection.run_async(lambda driver: driver.execute("SELECT 1", timeout=timeout_s))
    except Exception as exc:
        raise sa.exc.DisconnectionError(f"pooled connection unusable: {exc}") from exc


#: PostgreSQL session settings of the connections that take jobs off the queue
#: (``queue=True``): no sorts, no full scans. Every row those statements touch is found
#: through an index: the next job is the first ready entry of ``ix_jobs_queue``, the
#: running job one entry of it, the rest by primary key; so taking a job costs the same
#: however long the queue and the history. Left to its statistics the planner chooses
#: otherwise, and they are off exactly when it matters: analyzed
#: before a burst of enqueues (few queued, it reads every queued job and sorts them, for
#: each job taken: +40 % a job at 4,000 queued, growing with the queue), or on a small
#: table (it scans the whole table for the running job).
QUEUE_SESSION_SETTINGS = (("enable_sort", "off"), ("enable_seqscan", "off"))


QUEUE_POOL_MAX = 32
"""The most connections the queue's PostgreSQL pool keeps open between transactions."""


def _set_queue_session(dbapi_connection: Any, _record: Any) -> None:
    """Pool ``connect`` hook of the queue's pool (PostgreSQL): apply
    :data:`QUEUE_SESSION_SETTINGS` to the new session, one round trip. With SET, not as
    startup parameters, which pgbouncer refuses ("unsupported startup parameter")."""
    sql = "; ".join(f"SET {name} = {value}" for name, value in QUEUE_SESSION_SETTINGS)
    dbapi_connection.run_async(lambda driver: driver.execute(sql))


#: Threads that run SQLite read transactions (WAL lets them read while one thread writes).
READ_THREADS = 2

R = TypeVar("R")


#: How many times a PostgreSQL write transaction is run when it is chosen as a deadlock's
#: victim (rolled back whole, so running it again is safe).
DEADLOCK_ATTEMPTS = 3


def _is_deadlock(exc: sa.exc.DBAPIError) -> bool:
    """Whether PostgreSQL broke a deadlock by failing this transaction (SQLSTATE 40P01)."""
    return getattr(exc.orig, "sqlstate", None) == "40P01"


#: Seconds :meth:`Database.dispose` waits for the PostgreSQL transactions still running.
DISPOSE_WAIT_S = 10.0


class _Rehearsed(Exception):
    """Carries a rehearsed transaction's result out while rolling it back."""

    def __init__(self, value: object) -> None:
        super().__init__("rehearsed")
        self.value = value


class Database:
    """The database behind one interface: run a function in one transaction.

    A store operation is a plain function of a SQLAlchemy :class:`~sqlalchemy.engine.Connection`
    that runs in one transaction, so each costs one hand-off, not one per statement.
    SQLite: the function runs on the one writer thread (which serializes writers in this
    process; BEGIN IMMEDIATE and the busy timeout serialize other processes) or on one of
    :data:`READ_THREADS` reader threads, over the standard library's sqlite3. PostgreSQL:
    the function runs on the event loop through SQLAlchemy's asyncio bridge
    (``AsyncConnection.run_sync`` over asyncpg), each statement one round trip.

    The function's exceptions propagate (the transaction is rolled back). A caller that is
    cancelled (its RPC ended, its worker stream closed) while its transaction runs: on
    SQLite the transaction goes on on its thread as if the caller were still waiting; on
    PostgreSQL asyncpg's statement is cancelled, the transaction rolled back and the
    connection given back to the pool. Either way the database holds all of it or none of
    it, and :meth:`dispose` waits for the transactions still running, so none is cut off
    by shutdown and its connection left for the garbage collector.
    """

    def __init__(
        self,
        url: str,
        *,
        statement_timeout_s: float | None = STATEMENT_TIMEOUT_S,
        ping_timeout_s: float | None = PING_TIMEOUT_S,
        running_jobs: int = 1,
    ) -> None:
        """Open (lazily: connections come with the first transaction) the database of
        ``url``, a SQLAlchemy URL of a SQLite file or of PostgreSQL (asyncpg).

        ``statement_timeout_s`` and ``ping_timeout_s`` (seconds; None: no limit) bound a
        PostgreSQL statement and the checkout ping: see :data:`STATEMENT_TIMEOUT_S`.
        ``running_jobs``: the most jobs that run at once (TICKWORK_MAX_RUNNING_JOBS); on
        PostgreSQL the queue's pool keeps a connection open for each, up to
        :data:`QUEUE_POOL_MAX`, since every running job's outcome and next claim is a
        queue transaction of its own: with fewer, jobs ending together would open and
        close a connection (a backend process) each.
        """
        self.url = url
        self.statement_timeout_s = statement_timeout_s
        #: Whether writes succeed, from every transaction's outcome.
        self.health = StorageHealth()
        self.dialect = dialect_of(url)
        self.outages = StorageOutages()
        """How long this process's calls found the storage down (see :mod:`.outages`)."""
        self._closed = False  # dispose() has begun: no transaction may start any more
        self._sqlite: sa.Engine | None = None
        self._async: AsyncEngine | None = None
        self._queue: AsyncEngine | None = None
        #: The SQLite database's file (None on PostgreSQL and for ``:memory:``).
        self.sqlite_file: str | None = None
        if self.dialect.name == "sqlite":
            path = _sqlite_path(url)
            self.sqlite_file = path if path and path != ":memory:" else None
            self._sqlite = make_sqlite_engine(url)
            self._writer = ThreadPoolExecutor(1, thread_name_prefix="tickwork-db-write")
            self._readers = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="tickwork-db-read")
        else:
            # Every checkout is pinged (see _ping_on_checkout), however recently the
            # connection was used: after a database restart or a killed backend, a
            # connection not pinged fails a live transaction, and a failed outcome breaks
            # the worker's stream.
            limits = {"command_timeout": statement_timeout_s}
            self._async = create_async_engine(
                url, pool_size=10, max_overflow=10, connect_args=limits
            )
            # The queue's own pool: see QUEUE_SESSION_SETTINGS.
            self._queue = create_async_engine(
                url,
                pool_size=min(max(2, running_jobs), QUEUE_POOL_MAX),
                max_overflow=10,
                connect_args=limits,
            )
            event.listen(self._queue.sync_engine.pool, "connect", _set_queue_session)
            self._running = 0  # PostgreSQL transactions under way (see dispose)
            self._none_running = asyncio.Event()
            for engine in (self._async, self._queue):
                event.listen(engine.sync_engine.pool, "connect", _mark_unused)
                event.listen(
                    engine.sync_engine.pool,
                    "checkout",
                    functools.partial(_ping_on_checkout, ping_timeout_s),
                )

    async def _observed(self, run: Awaitable[R], write: bool) -> R:
        """Await a transaction ``run``, reporting its outcome to :attr:`health`, and a
        storage failure's time, or a write's that held the write path long, to
        :attr:`outages`."""
        ticket = self.health.begin(write)
        began = time.monotonic()
        held = self.outages.write_began(began) if write else None
        try:
            result = await run
        except Exception as err:
            if is_storage_error(err):
                self.outages.failed(began)
            self.health.end(ticket, write, err)
            raise
        except BaseException:  # cancelled: no outcome to report
            self.health.end(ticket, False, None)
            raise
        finally:
            if held is not None:
                self.outages.write_ended(held)
        self.outages.succeeded()
        self.health.end(ticket, write, None)
        return result

    async def rehearse(self, fn: Callable[[Connection], R]) -> R:
        """Run ``fn(conn)`` in a read-write transaction as :meth:`write` does, then roll it
        back: what ``fn`` would do and return, with nothing written (a dry run)."""

        def run(conn: Connection) -> R:
            raise _Rehearsed(fn(conn))

        try:
            await self.write(run)
        except _Rehearsed as done:
            return cast(R, done.value)
        raise AssertionError("unreachable")

    async def write(self, fn: Callable[[Connection], R], *, queue: bool = False) -> R:
        """Run ``fn(conn)`` in a read-write transaction; committed when it returns, rolled
        back when it raises. ``queue``: on PostgreSQL, on a connection of the queue's pool
        (see :data:`QUEUE_SESSION_SETTINGS`), for what takes jobs off the queue.

        Raises:
            StorageError: the database is closed (:meth:`dispose`), or unavailable.
        """
        self._check_open()
        return await self._observed(self._write(fn, queue), True)

    async def _write(self, fn: Callable[[Connection], R], queue: bool) -> R:
        if self._sqlite is not None:
            engine = self._sqlite

            def run() -> R:
                with engine.begin() as conn:
                    return fn(conn)

            return await asyncio.get_running_loop().run_in_executor(self._writer, run)
        return await self._postgresql(fn, write=True, queue=queue)

    async def checkpoint(self) -> tuple[int, int, int] | None:
        """SQLite: copy the write-ahead log into the database file and truncate it
        (``PRAGMA wal_checkpoint(TRUNCATE)``, on the writer thread, so between writes);
        return SQLite's (busy, log pages, pages checkpointed). None on PostgreSQL."""
        if self._sqlite is None:
            return None
        self._check_open()
        engine = self._sqlite

        def run() -> tuple[int, int, int]:
            with engine.connect() as conn:
                driver = conn.connection.driver_connection
                assert driver is not None
                row = driver.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            return int(row[0]), int(row[1]), int(row[2])

        return await self._observed(
            asyncio.get_running_loop().run_in_executor(self._writer, run), True
        )

    async def write_one(self, fn: Callable[[Connection], R], *, queue: bool = False) -> R:
        """Run ``fn(conn)``, which executes exactly one statement, as that statement's own
        transaction: on PostgreSQL without BEGIN and COMMIT (autocommit; a statement is
        atomic on its own), two round trips fewer than :meth:`write`; on SQLite as
        :meth:`write`. A function that executes more than one statement must use
        :meth:`write`: here each would commit on its own. ``queue``: as for :meth:`write`."""
        self._check_open()
        if self._sqlite is not None:
            return await self.write(fn)
        return await self._observed(
            self._postgresql(fn, write=True, autocommit=True, queue=queue), True
        )

    async def read(self, fn: Callable[[Connection], R]) -> R:
        """Run ``fn(conn)`` in a transaction that is rolled back (it must only read).

        Raises:
            StorageError: the database is closed (:meth:`dispose`), or unavailable.
        """
        self._check_open()
        return await self._observed(self._read(fn), False)

    def _check_open(self) -> None:
        """Raise StorageError (UNAVAILABLE) once :meth:`dispose` has begun: a transaction
        started then would take a connection from a pool being closed, and that connection,
        given back after the pool's close, would be left open for the garbage collector."""
        if self._closed:
            raise StorageError("the database is closed: the service is stopping")

    async def _read(self, fn: Callable[[Connection], R]) -> R:
        if self._sqlite is not None:
            engine = self._sqlite

            def run() -> R:
                with engine.connect().execution_options(tickwork_readonly=True) as conn:
                    return fn(conn)

            return await asyncio.get_running_loop().run_in_executor(self._readers, run)
        return await self._postgresql(fn, write=False)

    async def _postgresql(
        self,
        fn: Callable[[Connection], R],
        *,
        write: bool,
        autocommit: bool = False,
        queue: bool = False,
    ) -> R:
        """Run ``fn(conn)`` on a pooled PostgreSQL connection (see ``_ping_on_checkout``),
        in a transaction committed when ``write`` (else rolled back), or each statement in
        its own (``autocommit``), counted as running until it ends (:meth:`dispose` waits
        for it).

        A write transaction that PostgreSQL fails to break a deadlock is run again, up to
        :data:`DEADLOCK_ATTEMPTS` times in all.

        Raises:
            StorageError, sa.exc.DBAPIError: see :meth:`_transaction`.
        """
        self._running += 1
        self._none_running.clear()
        try:
            attempt = 1
            while True:
                try:
                    return await self._transaction(fn, write, autocommit, queue)
                except sa.exc.DBAPIError as exc:
                    # The lock order (scheduler_svc.store.locks) keeps row locks from
                    # deadlocking, but not the one-active-job index: two runs inserting the
                    # same tasks' jobs in other orders (their queue order) may each wait for
                    # the other's uncommitted job. PostgreSQL fails one of them, rolled back
                    # whole, so it runs again (and finds the other's jobs).
                    if not write or attempt >= DEADLOCK_ATTEMPTS or not _is_deadlock(exc):
                        raise
                    log.warning(
                        "deadlock: the transaction is run again", extra={"attempt": attempt}
                    )
                    attempt += 1
        finally:
            self._running -= 1
            if not self._running:
                self._none_running.set()

    async def _transaction(
        self, fn: Callable[[Connection], R], write: bool, autocommit: bool, queue: bool
    ) -> R:
        """The body of :meth:`_postgresql`.

        Raises:
            StorageError: no connection could be had (the server refused or dropped it, or
                is not there): asyncpg's and the operating system's errors, which are not
                SQLAlchemy's DBAPIError, so that the API answers UNAVAILABLE as for a
                failed statement; the cause is chained (``__cause__``) for the log.
        """
        engine = self._queue if queue else self._async
        assert engine is not None
        began = False

        def run(conn: Connection) -> R:
            nonlocal began
            began = True
            return fn(conn)

        try:
            async with engine.connect() as aconn:
                if autocommit:
                    # The pool sets the connection back to the default level on return.
                    await aconn.execution_options(isolation_level="AUTOCOMMIT")
                if not write or autocommit:
                    return await aconn.run_sync(run)
                async with aconn.begin():
                    return await aconn.run_sync(run)
        except sa.exc.DBAPIError:
            raise
        except TimeoutError as exc:
            # asyncpg's command_timeout: the statement's connection is thrown away.
            raise StorageError(
                f"database statement took over {self.statement_timeout_s} s (the server "
                "unreachable or overloaded); the server log has the details"
            ) from exc
        except Exception as exc:
            if began:
                raise
            raise StorageError("database unavailable; the server log has the details") from exc

    def connections_in_use(self) -> int:
        """Connections checked out of the pool right now: the transactions running (and, on
        PostgreSQL, the connection :mod:`scheduler_svc.replicas` listens on). The test
        fixtures assert 0 after each test: no connection is left out of the pool."""
        if self._sqlite is not None:
            pools = [self._sqlite.pool]
        else:
            pools = [engine.sync_engine.pool for engine in (self._async, self._queue) if engine]
        return sum(int(getattr(pool, "checkedout", lambda: 0)()) for pool in pools)

    @asynccontextmanager
    async def autocommit_connection(self) -> AsyncIterator[AsyncConnection]:
        """A PostgreSQL connection held for as long as the block runs, in autocommit (each
        statement its own transaction), for LISTEN/NOTIFY (:mod:`scheduler_svc.replicas`);
        closed, not pooled again, on exit.

        Raises:
            RuntimeError: the database is SQLite.
            StorageError: the database is closed (:meth:`dispose`).
            sa.exc.DBAPIError, OSError: no connection could be had.
        """
        if self._async is None:
            raise RuntimeError("autocommit_connection: PostgreSQL only")
        self._check_open()
        async with self._async.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            try:
                yield conn
            finally:
                await conn.invalidate()

    async def dispose(self) -> None:
        """Close the database: from the call on, every transaction asked for raises
        StorageError; the ones running are waited for (on PostgreSQL up to
        :data:`DISPOSE_WAIT_S` seconds), then every pooled connection is closed. Calling it
        again does no harm."""
        self._closed = True
        if self._sqlite is not None:
            loop = asyncio.get_running_loop()
            for pool in (self._writer, self._readers):
                await loop.run_in_executor(None, pool.shutdown)
            self._sqlite.dispose()
        if self._async is not None:
            if self._running:  # e.g. a worker stream's, closed by the shutdown meanwhile
                with suppress(TimeoutError):
                    await asyncio.wait_for(self._none_running.wait(), DISPOSE_WAIT_S)
            await self._async.dispose()
            if self._queue is not None:
                await self._queue.dispose()
