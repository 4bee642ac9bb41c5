"""Pause notes and labels: tasks and schedules get labels, a note on a pause or a disable

``tasks.labels`` and ``schedules.labels`` (a JSON object of strings, '{}' for every existing
row) are matched by label selectors (ListTasks, ListSchedules, ApplyConfig's prune). A
schedule's pause (``pause_note``, ``paused_until``, ``paused_by``, ``paused_at``) and a
task's disable (``disable_note``, ``disabled_until``, ``disabled_by``, ``disabled_at``) say
why, until when, who and since when; ``paused_until`` and ``disabled_until`` are indexed,
for the scheduler loop to find the pauses that end by themselves.
``schedules.catch_up_on_resume``: a resume fires the paused windows through the catch-up
policy (false for every existing schedule: the paused time is not caught up).

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import scheduler_svc.db_datetime

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_when = scheduler_svc.db_datetime.UTCDateTime


def upgrade() -> None:
    for table, prefix in (("tasks", "disable"), ("schedules", "pause")):
        past = "disabled" if prefix == "disable" else "paused"
        op.add_column(
            table, sa.Column("labels", sa.JSON(), nullable=False, server_default=sa.text("'{}'"))
        )
        op.add_column(
            table, sa.Column(f"{prefix}_note", sa.Text(), nullable=False, server_default="")
        )
        op.add_column(table, sa.Column(f"{past}_until", _when(), nullable=True))
        op.add_column(
            table, sa.Column(f"{past}_by", sa.String(200), nullable=False, server_default="")
        )
        op.add_column(table, sa.Column(f"{past}_at", _when(), nullable=True))
        op.create_index(f"ix_{table}_{past}_until", table, [f"{past}_until"])
    op.add_column(
        "schedules",
        sa.Column("catch_up_on_resume", sa.Boolean(), nullable=False, server_default=sa.false()),
    )


def downgrade() -> None:
    # Not batch mode (see 0003); SQLite 3.35 and PostgreSQL drop a column in place.
    op.execute("ALTER TABLE schedules DROP COLUMN catch_up_on_resume")
    for table, prefix in (("tasks", "disable"), ("schedules", "pause")):
        past = "disabled" if prefix == "disable" else "paused"
        op.drop_index(f"ix_{table}_{past}_until", table_name=table)
        for column in (f"{past}_at", f"{past}_by", f"{past}_until", f"{prefix}_note", "labels"):
            op.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
