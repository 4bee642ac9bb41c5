"""notification deadlines and routes: schedules.start_deadline_seconds,
jobs.start_deadline_notified, notification_conditions, tasks.notify, schedules.notify

``schedules.start_deadline_seconds`` is how long after its fire time a fire's job must have
started (0: no deadline); ``jobs.start_deadline_notified`` whether a job's missed start was
notified. ``notification_conditions`` holds one row per service-wide condition notified
when it began (``no_active_worker``) until it ends. ``tasks.notify`` and
``schedules.notify`` are their notification routes (JSON lists; NULL: none).

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import scheduler_svc.db_datetime

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_when = scheduler_svc.db_datetime.UTCDateTime


def upgrade() -> None:
    op.add_column(
        "schedules",
        sa.Column("start_deadline_seconds", sa.Float(), nullable=False, server_default="0"),
    )
    op.add_column(
        "jobs",
        sa.Column(
            "start_deadline_notified", sa.Boolean(), nullable=False, server_default=sa.false()
        ),
    )
    for table in ("tasks", "schedules"):
        op.add_column(table, sa.Column("notify", sa.JSON(none_as_null=True), nullable=True))
    op.create_table(
        "notification_conditions",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("since", _when(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )


def downgrade() -> None:
    op.drop_table("notification_conditions")
    op.execute("ALTER TABLE tasks DROP COLUMN notify")
    op.execute("ALTER TABLE schedules DROP COLUMN notify")
    op.execute("ALTER TABLE jobs DROP COLUMN start_deadline_notified")
    op.execute("ALTER TABLE schedules DROP COLUMN start_deadline_seconds")
