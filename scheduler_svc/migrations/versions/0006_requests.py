"""requests: the answers of calls made with a request_id (AIP-155)

RunTasks, AbortTasks, CreateTask, CreateSchedule and BatchCreateSchedules take a
``request_id``. The first call with one stores its answer here, in the transaction of its
effect; a repeat within 24 hours gets that answer back and does nothing. ``fingerprint``
is a digest of the request without its id, so the same id on a different request is
refused.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import scheduler_svc.db_datetime

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "requests",
        sa.Column("method", sa.String(64), nullable=False),
        sa.Column("request_id", sa.String(200), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("response", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", scheduler_svc.db_datetime.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("method", "request_id"),
    )
    op.create_index("ix_requests_created_at", "requests", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_requests_created_at", table_name="requests")
    op.drop_table("requests")
