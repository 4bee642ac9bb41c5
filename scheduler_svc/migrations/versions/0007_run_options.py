"""Run options: jobs.params_override, jobs.labels, jobs.requested_by, jobs.stopped_by

RunTasks may give its new jobs params merged over the task's (``params_override``, JSON)
and ``labels`` (JSON object of strings), both NULL when not given; every job records the
token label of who asked for it (``requested_by``) and of who cancelled it or asked for its
abort (``stopped_by``), both '' when no one did (every existing job). A run's
``not_before_time`` uses the existing ``jobs.not_before`` column, as retries do.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("params_override", sa.JSON(none_as_null=True), nullable=True))
    op.add_column("jobs", sa.Column("labels", sa.JSON(none_as_null=True), nullable=True))
    for name in ("requested_by", "stopped_by"):
        op.add_column(
            "jobs", sa.Column(name, sa.String(200), nullable=False, server_default="")
        )


def downgrade() -> None:
    # Not batch mode (see 0003); SQLite 3.35 and PostgreSQL drop a column in place.
    for name in ("stopped_by", "requested_by", "labels", "params_override"):
        op.execute(f"ALTER TABLE jobs DROP COLUMN {name}")
