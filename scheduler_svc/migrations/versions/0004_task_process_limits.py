"""tasks.memory_limit_bytes and tasks.cpu_limit_seconds: per-task limits of job processes

Each job runs in a process of its own; a task may cap that process's address space
(RLIMIT_AS, bytes) and CPU time (RLIMIT_CPU, whole seconds). 0 means no limit, which every
existing task keeps.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    for name in ("memory_limit_bytes", "cpu_limit_seconds"):
        op.add_column(
            "tasks", sa.Column(name, sa.BigInteger, nullable=False, server_default="0")
        )


def downgrade() -> None:
    # Not batch mode (see 0003: its table copy would cascade under foreign keys); SQLite
    # 3.35 and PostgreSQL drop a column in place.
    for name in ("cpu_limit_seconds", "memory_limit_bytes"):
        op.execute(f"ALTER TABLE tasks DROP COLUMN {name}")
