"""notifications: notifiers, the outbox of events, their deliveries; tasks.failing_since

An event (a job's final failure, a recovery, an auto-disable) is written to
``notification_events`` in the transaction of the state change that caused it; the sender
expands it into one ``notification_deliveries`` row per notifier its routes name, and
delivers those in the background, at least once, with the event's id. ``notifiers`` holds
the notifiers declared through the API (secrets included: never returned by the API).
``tasks.failing_since`` is when the task's current run of final failures began (NULL: its
last final outcome was a success), so that a failure or a recovery is known to be a change
of state without a read. ``tasks.expect_success_within_seconds`` is the task's dead-man
window (0: none) and ``tasks.overdue_since`` when its missing success was notified;
``tasks.warn_after_seconds`` its long-run threshold (0: none) and
``jobs.long_run_notified`` whether a running job's long run was notified.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import scheduler_svc.db_datetime

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_when = scheduler_svc.db_datetime.UTCDateTime


def upgrade() -> None:
    op.add_column("tasks", sa.Column("failing_since", _when(), nullable=True))
    op.add_column(
        "tasks",
        sa.Column("expect_success_within_seconds", sa.Float(), nullable=False, server_default="0"),
    )
    op.add_column("tasks", sa.Column("overdue_since", _when(), nullable=True))
    op.add_column(
        "tasks", sa.Column("warn_after_seconds", sa.Float(), nullable=False, server_default="0")
    )
    op.add_column(
        "jobs",
        sa.Column("long_run_notified", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.create_table(
        "notifiers",
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("type", sa.String(16), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("every", sa.Boolean(), nullable=False),
        sa.Column("tasks", sa.JSON(), nullable=False),
        sa.Column("schedules", sa.JSON(), nullable=False),
        sa.Column("created_at", _when(), nullable=False),
        sa.Column("updated_at", _when(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "notification_events",
        sa.Column("id", _id, autoincrement=True, nullable=False),
        sa.Column("event_id", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("state_change", sa.Boolean(), nullable=False),
        sa.Column("task_id", _id, nullable=True),
        sa.Column("task_name", sa.String(200), nullable=False),
        sa.Column("schedule_id", _id, nullable=True),
        sa.Column("job_id", _id, nullable=True),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("occurred_at", _when(), nullable=False),
        sa.Column("routed", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("event_id", name="uq_notification_events_event_id"),
    )
    op.create_index(
        "ix_notification_events_unrouted",
        "notification_events",
        ["routed", "id"],
    )
    op.create_table(
        "notification_deliveries",
        sa.Column("id", _id, autoincrement=True, nullable=False),
        sa.Column(
            "event",
            _id,
            sa.ForeignKey("notification_events.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("notifier", sa.String(200), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", _when(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=False),
        sa.Column("sent_at", _when(), nullable=True),
        sa.Column("created_at", _when(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_notification_deliveries_due",
        "notification_deliveries",
        ["status", "next_attempt_at"],
    )
    op.create_index("ix_notification_deliveries_event", "notification_deliveries", ["event"])


def downgrade() -> None:
    op.drop_table("notification_deliveries")
    op.drop_table("notification_events")
    op.drop_table("notifiers")
    op.execute("ALTER TABLE jobs DROP COLUMN long_run_notified")
    for column in (
        "failing_since",
        "expect_success_within_seconds",
        "overdue_since",
        "warn_after_seconds",
    ):
        op.execute(f"ALTER TABLE tasks DROP COLUMN {column}")
