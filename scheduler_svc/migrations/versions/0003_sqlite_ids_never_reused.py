"""SQLite: ids are never reused (AUTOINCREMENT on tasks, schedules, jobs and fires)

SQLite's ``INTEGER PRIMARY KEY`` without AUTOINCREMENT takes max(rowid) + 1: once the
newest row was deleted, its id went to the next row, and a client that held the old id
(RunTasks by id, GetJob, WatchJob, a schedule's id) reached another object. With
AUTOINCREMENT, SQLite keeps the largest id ever handed out in ``sqlite_sequence`` and
counts on from it. PostgreSQL's sequences never reuse an id: there this revision does
nothing.

SQLite cannot add AUTOINCREMENT to an existing table, so the four tables are built anew
and their rows copied, ids and all; ``schedule_tasks`` is rebuilt too, for its foreign keys
to name the new tables. Every index (the partial unique ``uq_jobs_one_active_per_task``,
``ix_jobs_queue`` with priority descending as 0002 made it), unique constraint and foreign
key (ON DELETE CASCADE) is as 0001 and 0002 made it.

Not Alembic's batch mode: tickwork migrates inside one BEGIN IMMEDIATE transaction (the
migration lock) on a connection with ``PRAGMA foreign_keys=ON``, which cannot be turned off
inside a transaction; batch mode's ``DROP TABLE tasks`` would then cascade and delete every
job and schedule link. Here the old tables are renamed out of the way first (SQLite rewrites
the children's foreign keys to follow them), the new ones created and filled parents
first, and the old ones dropped children first, so no drop has a child row left to cascade
to. It works the same with foreign keys off (the alembic command line). Then
``PRAGMA foreign_key_check`` must find nothing and every table must hold the rows it held,
or the migration fails and the transaction is rolled back whole.

The sequences are seeded with the largest id still to be seen anywhere in the database:
the table's own ids, and the ids that other rows still name (a job's ``schedule_id`` and
``retry_of_job_id``, a fire's runs). Ids of rows deleted before this migration that nothing
names any more cannot be known: such an id above the largest one left may be handed out
once more, once. From then on, no id is.

The cost: every insert into these tables (every job enqueued) also updates
``sqlite_sequence``. Copying the tables takes time in proportion to the job history.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.engine import Connection

from scheduler_svc.db import UTCDateTime

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: Rebuilt, parents before children. The first four get AUTOINCREMENT.
TABLES = ("tasks", "schedules", "jobs", "fires", "schedule_tasks")
AUTOINCREMENT_TABLES = ("tasks", "schedules", "jobs", "fires")
#: The name a table has while its replacement is built.
OLD = "_tw0003_old_{}"

#: A fire's runs, one row each (a fire whose runs are not valid JSON names nothing).
_RUNS = "fires, json_each(CASE WHEN json_valid(fires.runs) THEN fires.runs ELSE '[]' END) AS r"

#: The largest id still named anywhere, per table: its own ids and the ids other rows hold.
SEQUENCE_SEEDS = {
    "tasks": (
        "SELECT max(id) FROM tasks",
        f"SELECT max(CAST(json_extract(r.value, '$.task_id') AS INTEGER)) FROM {_RUNS}",
    ),
    "schedules": (
        "SELECT max(id) FROM schedules",
        "SELECT max(schedule_id) FROM jobs",
    ),
    "jobs": (
        "SELECT max(id) FROM jobs",
        "SELECT max(retry_of_job_id) FROM jobs",
        f"SELECT max(CAST(json_extract(r.value, '$.job_id') AS INTEGER)) FROM {_RUNS}",
    ),
    "fires": ("SELECT max(id) FROM fires",),
}


def _schema(*, autoincrement: bool) -> sa.MetaData:
    """The five tables as 0001 and 0002 left them (with AUTOINCREMENT or without): a copy,
    not scheduler_svc.db's tables, which later revisions may change."""
    md = sa.MetaData()
    kw: dict[str, Any] = {"sqlite_autoincrement": autoincrement}
    _id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    active = sa.text("status IN ('QUEUED', 'RUNNING')")
    sa.Table(
        "tasks",
        md,
        sa.Column("id", _id, primary_key=True, autoincrement=True, nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("handler", sa.String(200), nullable=False),
        sa.Column("params", sa.JSON, nullable=False),
        sa.Column("task_priority", sa.Integer, nullable=False),
        sa.Column("enabled", sa.Boolean, nullable=False),
        sa.Column("timeout_seconds", sa.Float, nullable=False),
        sa.Column("consecutive_failure_count", sa.Integer, nullable=False),
        sa.Column("max_attempts", sa.Integer, nullable=False),
        sa.Column("backoff_base_seconds", sa.Float, nullable=False),
        sa.Column("backoff_cap_seconds", sa.Float, nullable=False),
        sa.Column("disabled_reason", sa.Text, nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.UniqueConstraint("name"),
        **kw,
    )
    sa.Table(
        "schedules",
        md,
        sa.Column("id", _id, primary_key=True, autoincrement=True, nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("cron_expression", sa.String(200), nullable=False),
        sa.Column("interval_seconds", sa.BigInteger, nullable=False),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("catch_up_policy", sa.String(16), nullable=False),
        sa.Column("enabled", sa.Boolean, nullable=False),
        sa.Column("next_run_at", UTCDateTime, nullable=True),
        sa.Column("last_run_at", UTCDateTime, nullable=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("updated_at", UTCDateTime, nullable=False),
        sa.UniqueConstraint("name"),
        sa.Index("ix_schedules_due", "enabled", "next_run_at"),
        **kw,
    )
    sa.Table(
        "jobs",
        md,
        sa.Column("id", _id, primary_key=True, autoincrement=True, nullable=False),
        sa.Column("task_id", _id, nullable=False),
        sa.Column("task_name", sa.String(200), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("trigger", sa.String(16), nullable=False),
        sa.Column("lane", sa.SmallInteger, nullable=False),
        sa.Column("task_priority", sa.Integer, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("enqueued_at", UTCDateTime, nullable=False),
        sa.Column("not_before", UTCDateTime, nullable=True),
        sa.Column("started_at", UTCDateTime, nullable=True),
        sa.Column("finished_at", UTCDateTime, nullable=True),
        sa.Column("error", sa.Text, nullable=False),
        sa.Column("output_tail", sa.Text, nullable=False),
        sa.Column("schedule_id", _id, nullable=True),
        sa.Column("fire_time", UTCDateTime, nullable=True),
        sa.Column("retry_of_job_id", _id, nullable=True),
        sa.Column("worker_id", sa.String(200), nullable=True),
        sa.Column("lease_token", sa.String(64), nullable=True),
        sa.Column("lease_expires_at", UTCDateTime, nullable=True),
        sa.Column("abort_requested", sa.Boolean, nullable=False),
        sa.Column("late_outcome", sa.Text, nullable=False),
        sa.ForeignKeyConstraint(["task_id"], ["tasks.id"], ondelete="CASCADE"),
        sa.Index(
            "ix_jobs_queue", "status", "lane", sa.text("task_priority DESC"), "enqueued_at", "id"
        ),
        sa.Index("ix_jobs_schedule", "schedule_id", "id"),
        sa.Index("ix_jobs_task", "task_id", "id"),
        sa.Index(
            "uq_jobs_one_active_per_task",
            "task_id",
            unique=True,
            sqlite_where=active,
            postgresql_where=active,
        ),
        **kw,
    )
    sa.Table(
        "fires",
        md,
        sa.Column("id", _id, primary_key=True, autoincrement=True, nullable=False),
        sa.Column("schedule_id", _id, nullable=False),
        sa.Column("fire_time", UTCDateTime, nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("runs", sa.JSON, nullable=False),
        sa.Column("recorded_at", UTCDateTime, nullable=False),
        sa.ForeignKeyConstraint(["schedule_id"], ["schedules.id"], ondelete="CASCADE"),
        sa.UniqueConstraint("schedule_id", "fire_time", name="uq_fires_schedule_fire_time"),
        **kw,
    )
    sa.Table(
        "schedule_tasks",
        md,
        sa.Column("schedule_id", _id, nullable=False),
        sa.Column("task_id", _id, nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.ForeignKeyConstraint(["schedule_id"], ["schedules.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["task_id"], ["tasks.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("schedule_id", "task_id"),
        sa.Index("ix_schedule_tasks_task", "task_id"),
    )
    return md


def _rebuild(conn: Connection, *, autoincrement: bool) -> None:
    """Build the five tables anew (:func:`_schema`) with the rows they hold, in the
    connection's transaction.

    Raises:
        RuntimeError: a table lost or gained rows, or a foreign key names a row that is not
            there (the caller's transaction is then to be rolled back).
    """
    md = _schema(autoincrement=autoincrement)
    counts: dict[str, int] = {}
    for name in TABLES:
        counts[name] = int(conn.exec_driver_sql(f"SELECT count(*) FROM {name}").scalar_one())
        # The children's foreign keys now name the old table (SQLite rewrites them).
        conn.exec_driver_sql(f'ALTER TABLE {name} RENAME TO "{OLD.format(name)}"')
    for table in md.sorted_tables:
        for index in table.indexes:  # renamed with their table; the names are wanted again
            conn.exec_driver_sql(f'DROP INDEX IF EXISTS "{index.name}"')
    for table in md.sorted_tables:  # parents first: each row's parent is already there
        table.create(conn)
        columns = ", ".join(f'"{c.name}"' for c in table.columns)
        conn.exec_driver_sql(
            f'INSERT INTO {table.name} ({columns}) SELECT {columns} FROM "{OLD.format(table.name)}"'
        )
    for table in reversed(md.sorted_tables):  # children first: no drop cascades to a row
        conn.exec_driver_sql(f'DROP TABLE "{OLD.format(table.name)}"')
    problems = conn.exec_driver_sql("PRAGMA foreign_key_check").all()
    if problems:
        raise RuntimeError(f"0003: foreign keys broken by the rebuild: {problems[:10]}")
    for name, before in counts.items():
        after = int(conn.exec_driver_sql(f"SELECT count(*) FROM {name}").scalar_one())
        if after != before:
            raise RuntimeError(f"0003: table {name} held {before} rows, now {after}")


def _seed_sequences(conn: Connection) -> None:
    """Set each table's ``sqlite_sequence`` entry to the largest id still named anywhere
    (:data:`SEQUENCE_SEEDS`), so that the next id is above all of them."""
    for name, queries in SEQUENCE_SEEDS.items():
        seed = max((conn.exec_driver_sql(q).scalar() or 0 for q in queries), default=0)
        conn.exec_driver_sql("DELETE FROM sqlite_sequence WHERE name = ?", (name,))
        if seed > 0:
            conn.exec_driver_sql(
                "INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)", (name, seed)
            )


def upgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name != "sqlite":
        return  # PostgreSQL: sequences, never reused
    _rebuild(conn, autoincrement=True)
    _seed_sequences(conn)


def downgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name != "sqlite":
        return
    # Dropping the AUTOINCREMENT tables took their sqlite_sequence entries with them.
    _rebuild(conn, autoincrement=False)
