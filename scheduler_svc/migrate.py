"""Alembic migrations, applied on start and by ``tickwork db upgrade``."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection

from scheduler_svc import sqlite_files
from scheduler_svc.db import Database, lock_for_migration
from scheduler_svc.errors import FailedPrecondition

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def alembic_config() -> Config:
    """The Alembic configuration of tickwork's migrations (no ini file needed)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return cfg


def head_revision() -> str | None:
    """The newest revision this code knows."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def known_revisions() -> set[str]:
    """Every revision this code knows."""
    return {s.revision for s in ScriptDirectory.from_config(alembic_config()).walk_revisions()}


def _current(conn: Connection) -> str | None:
    return MigrationContext.configure(conn).get_current_revision()


async def current_revision(db: Database) -> str | None:
    """The revision the database is at; None for an empty database."""
    return await db.read(_current)


async def upgrade(db: Database) -> str | None:
    """Migrate ``db`` to the newest revision and return it.

    Raises FailedPrecondition when the database is at a revision this code does not know
    (written by a newer tickwork), or is a SQLite database without tickwork's tables whose
    marker says it had them (:mod:`scheduler_svc.sqlite_files`): refusing is safer than
    guessing. On SQLite the marker is written and the write-ahead log checkpointed after.
    The check and the upgrade run in one transaction under the migration lock, so replicas
    starting together on an empty database migrate it once and the others find it current.
    On PostgreSQL they run on connections of their own without the statement timeout
    (:data:`scheduler_svc.db.STATEMENT_TIMEOUT_S`): an index built on a long history, or
    the wait for another replica's migration, may take longer.
    """
    if db.dialect.name == "postgresql" and db.statement_timeout_s is not None:
        unbounded = Database(db.url, statement_timeout_s=None)
        try:
            return await upgrade(unbounded)
        finally:
            await unbounded.dispose()
    cfg = alembic_config()
    known = known_revisions()

    def run(conn: Connection) -> None:
        lock_for_migration(conn, db.dialect)
        current = _current(conn)
        if db.sqlite_file is not None:
            sqlite_files.check_marker(db.sqlite_file, has_schema=current is not None)
        if current is not None and current not in known:
            raise FailedPrecondition(
                f"database schema is at revision {current}, which this tickwork does not know "
                f"(newest known: {head_revision()}); upgrade tickwork, or point DATABASE_URL "
                "at another database"
            )
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")

    await db.write(run)
    if db.sqlite_file is not None:
        sqlite_files.write_marker(db.sqlite_file)
        await db.checkpoint()  # the schema in the database file, the log emptied
    return head_revision()
