"""Database schema, engine and migrations (SQLite and PostgreSQL through SQLAlchemy 2 async).

Dialect differences live here and only here, as the capability flags of :class:`Dialect`:
the rest of the code asks ``dialect.skip_locked`` or ``dialect.serialize_writes``, never
the dialect's name.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection
from sqlalchemy.engine import Dialect as SaDialect
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

UTC = dt.UTC

# Job states and lanes as stored. Lanes order the queue: manual and API jobs first.
QUEUED, RUNNING, SUCCEEDED, FAILED, ABORTED, CANCELLED = (
    "QUEUED",
    "RUNNING",
    "SUCCEEDED",
    "FAILED",
    "ABORTED",
    "CANCELLED",
)
ACTIVE_STATES = (QUEUED, RUNNING)
FINAL_STATES = (SUCCEEDED, FAILED, ABORTED, CANCELLED)
LANE_MANUAL = 0
LANE_SCHEDULER = 1


class UTCDateTime(sa.types.TypeDecorator[dt.datetime]):
    """An aware UTC datetime, stored as naive UTC on every backend (SQLite has no zones)."""

    impl = sa.DateTime
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: SaDialect) -> Any:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the database; use aware UTC datetimes")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: Any, dialect: SaDialect) -> dt.datetime | None:
        if value is None:
            return None
        assert isinstance(value, dt.datetime)
        return value.replace(tzinfo=UTC)


metadata = sa.MetaData()
_id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

tasks = sa.Table(
    "tasks",
    metadata,
    sa.Column("id", _id, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(200), nullable=False, unique=True),
    sa.Column("description", sa.Text, nullable=False, default=""),
    sa.Column("handler", sa.String(200), nullable=False),
    sa.Column("params", sa.JSON, nullable=False),
    sa.Column("task_priority", sa.Integer, nullable=False, default=100),
    sa.Column("enabled", sa.Boolean, nullable=False, default=True),
    sa.Column("timeout_seconds", sa.Float, nullable=False, default=0.0),
    sa.Column("consecutive_failure_count", sa.Integer, nullable=False, default=0),
    sa.Column("max_attempts", sa.Integer, nullable=False, default=1),
    sa.Column("backoff_base_seconds", sa.Float, nullable=False, default=10.0),
    sa.Column("backoff_cap_seconds", sa.Float, nullable=False, default=600.0),
    sa.Column("disabled_reason", sa.Text, nullable=False, default=""),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
)

schedules = sa.Table(
    "schedules",
    metadata,
    sa.Column("id", _id, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(200), nullable=False, unique=True),
    sa.Column("description", sa.Text, nullable=False, default=""),
    sa.Column("cron_expression", sa.String(200), nullable=False, default=""),
    sa.Column("interval_seconds", sa.BigInteger, nullable=False, default=0),
    sa.Column("timezone", sa.String(64), nullable=False, default="UTC"),
    sa.Column("catch_up_policy", sa.String(16), nullable=False, default="SKIP"),
    sa.Column("enabled", sa.Boolean, nullable=False, default=True),
    sa.Column("next_run_at", UTCDateTime, nullable=True),
    sa.Column("last_run_at", UTCDateTime, nullable=True),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    # Due schedules are found through this index: the cost grows with the due ones only.
    sa.Index("ix_schedules_due", "enabled", "next_run_at"),
)

schedule_tasks = sa.Table(
    "schedule_tasks",
    metadata,
    sa.Column(
        "schedule_id",
        _id,
        sa.ForeignKey("schedules.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("task_id", _id, sa.ForeignKey("tasks.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("position", sa.Integer, nullable=False, default=0),
    sa.Index("ix_schedule_tasks_task", "task_id"),
)

jobs = sa.Table(
    "jobs",
    metadata,
    sa.Column("id", _id, primary_key=True, autoincrement=True),
    sa.Column("task_id", _id, sa.ForeignKey("tasks.id", ondelete="CASCADE"), nullable=False),
    sa.Column("task_name", sa.String(200), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("trigger", sa.String(16), nullable=False),
    sa.Column("lane", sa.SmallInteger, nullable=False),
    sa.Column("task_priority", sa.Integer, nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False, default=1),
    sa.Column("enqueued_at", UTCDateTime, nullable=False),
    sa.Column("not_before", UTCDateTime, nullable=True),
    sa.Column("started_at", UTCDateTime, nullable=True),
    sa.Column("finished_at", UTCDateTime, nullable=True),
    sa.Column("error", sa.Text, nullable=False, default=""),
    sa.Column("output_tail", sa.Text, nullable=False, default=""),
    sa.Column("schedule_id", _id, nullable=True),
    sa.Column("fire_time", UTCDateTime, nullable=True),
    sa.Column("retry_of_job_id", _id, nullable=True),
    sa.Column("worker_id", sa.String(200), nullable=True),
    sa.Column("lease_token", sa.String(64), nullable=True),
    sa.Column("lease_expires_at", UTCDateTime, nullable=True),
    sa.Column("abort_requested", sa.Boolean, nullable=False, default=False),
    sa.Column("late_outcome", sa.Text, nullable=False, default=""),
    # At most one queued or running job per task: the database enforces the skip logic.
    sa.Index(
        "uq_jobs_one_active_per_task",
        "task_id",
        unique=True,
        sqlite_where=sa.text("status IN ('QUEUED', 'RUNNING')"),
        postgresql_where=sa.text("status IN ('QUEUED', 'RUNNING')"),
    ),
    # The queue order: lane, priority descending, enqueue time, insertion order.
    sa.Index("ix_jobs_queue", "status", "lane", "task_priority", "enqueued_at", "id"),
    sa.Index("ix_jobs_task", "task_id", "id"),
    sa.Index("ix_jobs_schedule", "schedule_id", "id"),
)

fires = sa.Table(
    "fires",
    metadata,
    sa.Column("id", _id, primary_key=True, autoincrement=True),
    sa.Column(
        "schedule_id", _id, sa.ForeignKey("schedules.id", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("fire_time", UTCDateTime, nullable=False),
    sa.Column("outcome", sa.String(16), nullable=False),
    sa.Column("runs", sa.JSON, nullable=False),
    sa.Column("recorded_at", UTCDateTime, nullable=False),
    # Every fire is idempotent: one row per (schedule, fire time).
    sa.UniqueConstraint("schedule_id", "fire_time", name="uq_fires_schedule_fire_time"),
)

leases = sa.Table(
    "leases",
    metadata,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("holder", sa.String(200), nullable=False, default=""),
    sa.Column("token", sa.BigInteger, nullable=False, default=0),
    sa.Column("expires_at", UTCDateTime, nullable=False),
)

LEASE_NAMES = ("scheduler", "worker")


@dataclass(frozen=True)
class Dialect:
    """What the database can do, computed once from the URL.

    ``skip_locked``: SELECT ... FOR UPDATE SKIP LOCKED is available (PostgreSQL).
    ``serialize_writes``: writers must take one process-wide lock (SQLite allows one writer,
    and a deferred transaction that upgrades to a writer fails instead of waiting).
    ``advisory_locks``: transaction-scoped advisory locks exist (PostgreSQL); without them
    a write transaction already excludes every other writer (SQLite's BEGIN IMMEDIATE).
    """

    name: str
    skip_locked: bool
    serialize_writes: bool
    advisory_locks: bool = False


def dialect_of(engine: AsyncEngine) -> Dialect:
    """Capability flags of ``engine``'s database."""
    name = engine.dialect.name
    return Dialect(
        name=name,
        skip_locked=name == "postgresql",
        serialize_writes=name == "sqlite",
        advisory_locks=name == "postgresql",
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


#: The predicate of uq_jobs_one_active_per_task, for ON CONFLICT against it.
ACTIVE_JOB_PREDICATE = sa.text("status IN ('QUEUED', 'RUNNING')")


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


def make_engine(url: str) -> AsyncEngine:
    """Create the async engine for ``url`` (SQLAlchemy URL, e.g. sqlite+aiosqlite:///x.db).

    SQLite gets WAL journaling, foreign keys and a busy timeout on every connection.
    """
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).expanduser().resolve().parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(url, connect_args={"timeout": 30})

        @event.listens_for(engine.sync_engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        @event.listens_for(engine.sync_engine, "begin")
        def _sqlite_begin(conn: Any) -> None:
            # pysqlite's own transaction handling is off (below); begin explicitly. Writers
            # take the write lock at BEGIN so they wait (busy_timeout) instead of failing
            # when a read transaction would later need to upgrade.
            readonly = conn.get_execution_options().get("tickwork_readonly", False)
            conn.exec_driver_sql("BEGIN" if readonly else "BEGIN IMMEDIATE")

        @event.listens_for(engine.sync_engine, "connect", insert=True)
        def _sqlite_autocommit_off(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None

        return engine
    return create_async_engine(url, pool_size=10, max_overflow=10, pool_pre_ping=True)


class Database:
    """An engine plus its capability flags and the SQLite writer lock."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)
        self.dialect = dialect_of(self.engine)
        self._write_lock = asyncio.Lock()

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        """A read-write transaction; committed on exit, rolled back on error."""
        if self.dialect.serialize_writes:
            async with self._write_lock, self.engine.begin() as conn:
                yield conn
        else:
            async with self.engine.begin() as conn:
                yield conn

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A read-only connection (a transaction that is rolled back)."""
        async with self.engine.connect() as conn:
            yield await conn.execution_options(tickwork_readonly=True)

    async def dispose(self) -> None:
        """Close every pooled connection."""
        await self.engine.dispose()
