"""Lease holders' processes: leases.holder_host, holder_pid, holder_boot_id, holder_started

A lease records which process holds it: its host name, process id, the host's boot id and
the process's start time (clock ticks after boot), so that a service restarted on the same
host takes over at once the leases its dead predecessor held, instead of waiting them out.
Existing rows get no process (NULL): they expire as before.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = ("holder_host", "holder_pid", "holder_boot_id", "holder_started")


def upgrade() -> None:
    op.add_column("leases", sa.Column("holder_host", sa.String(255), nullable=True))
    op.add_column("leases", sa.Column("holder_pid", sa.Integer, nullable=True))
    op.add_column("leases", sa.Column("holder_boot_id", sa.String(64), nullable=True))
    op.add_column("leases", sa.Column("holder_started", sa.BigInteger, nullable=True))


def downgrade() -> None:
    # Not batch mode (see 0003); SQLite 3.35 and PostgreSQL drop a column in place.
    for column in reversed(_COLUMNS):
        op.execute(f"ALTER TABLE leases DROP COLUMN {column}")
