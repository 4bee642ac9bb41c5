"""fires.trigger: who caused a fire (SCHEDULER, or BACKFILL for a backfill's windows)

Every existing fire was the scheduler loop's: SCHEDULER. Backfilled jobs carry trigger
BACKFILL and lane 2 (below the scheduler's): ``jobs`` needs no change, its lane and trigger
columns already hold any value.

Revision ID: 0014
Revises: 0009
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "fires", sa.Column("trigger", sa.String(16), nullable=False, server_default="SCHEDULER")
    )


def downgrade() -> None:
    # A backfill's jobs are left as they are (their lane still sorts after the scheduler's).
    # Not batch mode (see 0003); SQLite 3.35 and PostgreSQL drop a column in place.
    op.execute("ALTER TABLE fires DROP COLUMN trigger")
