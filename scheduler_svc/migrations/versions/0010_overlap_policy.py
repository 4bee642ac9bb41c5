"""Overlap policies: schedules.overlap_policy and max_buffered, jobs.overlap, fires.trigger

A schedule's overlap policy decides what its fire does while a job of its task is active:
skip (the default, as before), buffer, replace the running job, or run alongside.
``jobs.overlap`` marks the jobs that rule makes: WAIT (queued behind the task's running
job) and ALLOW (runs alongside); existing jobs are plain (''). The one-active-job index now
counts the plain jobs only, and a new index refuses two running jobs of one task unless one
is ALLOW. ``fires.trigger`` is who caused a fire: SCHEDULER for every existing one.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ACTIVE = "status IN ('QUEUED', 'RUNNING')"
_ACTIVE_PLAIN = "status IN ('QUEUED', 'RUNNING') AND overlap = ''"
_RUNNING_TASK = "status = 'RUNNING' AND overlap <> 'ALLOW'"


def _unique(name: str, column: str, where: str) -> None:
    op.create_index(
        name,
        "jobs",
        [column],
        unique=True,
        sqlite_where=sa.text(where),
        postgresql_where=sa.text(where),
    )


def upgrade() -> None:
    op.add_column(
        "schedules",
        sa.Column("overlap_policy", sa.String(16), nullable=False, server_default="SKIP"),
    )
    op.add_column(
        "schedules", sa.Column("max_buffered", sa.Integer, nullable=False, server_default="0")
    )
    op.add_column("jobs", sa.Column("overlap", sa.String(8), nullable=False, server_default=""))
    op.add_column(
        "fires", sa.Column("trigger", sa.String(16), nullable=False, server_default="SCHEDULER")
    )
    op.drop_index("uq_jobs_one_active_per_task", "jobs")
    _unique("uq_jobs_one_active_per_task", "task_id", _ACTIVE_PLAIN)
    _unique("uq_jobs_running_task", "task_id", _RUNNING_TASK)


def downgrade() -> None:
    # The old index needs at most one active job per task: the jobs that waited behind
    # another or ran alongside are cancelled first.
    op.execute(
        "UPDATE jobs SET status = 'CANCELLED', error = 'cancelled by a downgrade'"
        f" WHERE {_ACTIVE} AND overlap <> ''"
    )
    op.drop_index("uq_jobs_running_task", "jobs")
    op.drop_index("uq_jobs_one_active_per_task", "jobs")
    _unique("uq_jobs_one_active_per_task", "task_id", _ACTIVE)
    # Not batch mode (see 0003); SQLite 3.35 and PostgreSQL drop a column in place.
    op.execute("ALTER TABLE fires DROP COLUMN trigger")
    op.execute("ALTER TABLE jobs DROP COLUMN overlap")
    op.execute("ALTER TABLE schedules DROP COLUMN max_buffered")
    op.execute("ALTER TABLE schedules DROP COLUMN overlap_policy")
