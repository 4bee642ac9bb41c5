"""tasks.overridable_params: the params an operator may override when running a task

A JSON list of dotted param paths (``env.REGION``, ``kwargs.limit``); NULL: none, so an
operator may override nothing of a task made before it.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "tasks", sa.Column("overridable_params", sa.JSON(none_as_null=True), nullable=True)
    )


def downgrade() -> None:
    op.execute("ALTER TABLE tasks DROP COLUMN overridable_params")
