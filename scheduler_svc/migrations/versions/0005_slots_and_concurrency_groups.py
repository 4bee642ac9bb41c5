"""Slots and concurrency groups: tasks.concurrency_group, jobs.slot, jobs.concurrency_group

With TICKWORK_MAX_RUNNING_JOBS above 1 several jobs run at once, each in a slot whose
``worker`` lease fenced its claim; a task's non-empty concurrency group keeps its jobs from
running at the same time as another task's of the group. Both rules are partial unique
indexes on the running jobs. A job still RUNNING when this migration runs held the one
worker lease there was: it is in slot 0. Every existing task is in no group ('').

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_RUNNING = "status = 'RUNNING'"
_RUNNING_IN_A_GROUP = "status = 'RUNNING' AND concurrency_group <> ''"


def upgrade() -> None:
    for table in ("tasks", "jobs"):
        op.add_column(
            table,
            sa.Column("concurrency_group", sa.String(200), nullable=False, server_default=""),
        )
    op.add_column("jobs", sa.Column("slot", sa.Integer, nullable=True))
    op.execute(f"UPDATE jobs SET slot = 0 WHERE {_RUNNING}")
    for name, column, where in (
        ("uq_jobs_running_slot", "slot", _RUNNING),
        ("uq_jobs_running_group", "concurrency_group", _RUNNING_IN_A_GROUP),
    ):
        op.create_index(
            name,
            "jobs",
            [column],
            unique=True,
            sqlite_where=sa.text(where),
            postgresql_where=sa.text(where),
        )


def downgrade() -> None:
    # Not batch mode (see 0003); SQLite 3.35 and PostgreSQL drop a column in place.
    op.drop_index("uq_jobs_running_group", "jobs")
    op.drop_index("uq_jobs_running_slot", "jobs")
    op.execute("ALTER TABLE jobs DROP COLUMN concurrency_group")
    op.execute("ALTER TABLE jobs DROP COLUMN slot")
    op.execute("ALTER TABLE tasks DROP COLUMN concurrency_group")
    op.execute("DELETE FROM leases WHERE name LIKE 'worker.%'")
