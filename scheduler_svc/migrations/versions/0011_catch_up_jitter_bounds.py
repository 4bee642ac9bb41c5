"""catch-up window, RUN_ALL's cap, jitter and bounds of schedules; a fire's jittered start

``schedules.catch_up_window_seconds`` is how old a missed window may be and still fire
after downtime (5: the tick tolerance); ``max_catch_up_runs`` RUN_ALL's cap on the windows
fired (0: 100); ``jitter_seconds`` and ``jitter_mode`` the delay added to each fire's start
(RANDOM or STABLE); ``start_at`` and ``end_at`` the bounds (NULL: none).
``fires.start_at`` is when the fire's jobs may start (NULL: at its fire time).

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import scheduler_svc.db_datetime

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_when = scheduler_svc.db_datetime.UTCDateTime

_SCHEDULE_COLUMNS = (
    "catch_up_window_seconds",
    "max_catch_up_runs",
    "jitter_seconds",
    "jitter_mode",
    "start_at",
    "end_at",
)


def upgrade() -> None:
    op.add_column(
        "schedules",
        sa.Column("catch_up_window_seconds", sa.Float(), nullable=False, server_default="5"),
    )
    op.add_column(
        "schedules",
        sa.Column("max_catch_up_runs", sa.Integer(), nullable=False, server_default="0"),
    )
    op.add_column(
        "schedules", sa.Column("jitter_seconds", sa.Float(), nullable=False, server_default="0")
    )
    op.add_column(
        "schedules",
        sa.Column("jitter_mode", sa.String(16), nullable=False, server_default="RANDOM"),
    )
    op.add_column("schedules", sa.Column("start_at", _when(), nullable=True))
    op.add_column("schedules", sa.Column("end_at", _when(), nullable=True))
    op.add_column("fires", sa.Column("start_at", _when(), nullable=True))


def downgrade() -> None:
    op.execute("ALTER TABLE fires DROP COLUMN start_at")
    for column in _SCHEDULE_COLUMNS:
        op.execute(f"ALTER TABLE schedules DROP COLUMN {column}")
