"""ix_jobs_queue in the queue's own order (task_priority descending)

With task_priority ascending in the index, every claim sorted the whole queue (SQLite: a
temporary B-tree per claim; the cost grew with the queue's depth). In the queue's order, the
next job is the first index entry.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_index("ix_jobs_queue", table_name="jobs")
    op.create_index(
        "ix_jobs_queue",
        "jobs",
        ["status", "lane", sa.text("task_priority DESC"), "enqueued_at", "id"],
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_queue", table_name="jobs")
    op.create_index(
        "ix_jobs_queue", "jobs", ["status", "lane", "task_priority", "enqueued_at", "id"]
    )
