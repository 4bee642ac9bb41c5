"""Explicit migrations (``tickwork db upgrade`` / ``tickwork db current``) on both backends,
``serve`` refusing a schema newer than it knows, and replicas migrating an empty database
together (PostgreSQL only: SQLite is single-process)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from scheduler_svc import migrate, store
from scheduler_svc.db import Database, metadata
from scheduler_svc.migrate import head_revision
from tests.databases import run_sql
from tests.harness import REPO, Server, base_env
from tests.test_replicas import REPLICA_ENV, Replicas, pg_url  # noqa: F401 - pg_url is a fixture

FUTURE = "9999_from_a_newer_tickwork"
HEAD = head_revision()


def tickwork_db(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``tickwork db ARGS`` with DATABASE_URL set; bounded in time."""
    return subprocess.run(
        [sys.executable, "-m", "tickwork.cli", "db", *args],
        env=base_env(DATABASE_URL=database_url),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def revisions(database_url: str) -> list[str]:
    return [r[0] for r in run_sql(database_url, "SELECT version_num FROM alembic_version")]


def test_db_upgrade_and_current(database_url: str) -> None:
    before = tickwork_db(database_url, "current")
    assert (before.returncode, before.stderr) == (0, "")
    assert before.stdout.startswith("none (")  # an empty database (or no SQLite file yet)

    upgraded = tickwork_db(database_url, "upgrade")
    assert upgraded.returncode == 0, upgraded.stderr
    assert f"upgraded from none to {HEAD} (head)" in upgraded.stdout
    assert revisions(database_url) == [HEAD]
    leases = run_sql(database_url, "SELECT name, holder, token FROM leases ORDER BY name")
    assert leases == [("scheduler", "", 0), ("worker", "", 0)]

    again = tickwork_db(database_url, "upgrade")
    assert again.returncode == 0, again.stderr
    assert f"already at revision {HEAD} (head)" in again.stdout

    current = tickwork_db(database_url, "current")
    assert (current.returncode, current.stdout, current.stderr) == (0, f"{HEAD} (head)\n", "")


def test_serve_refuses_a_schema_newer_than_it_knows(tmp_path: Path, database_url: str) -> None:
    assert tickwork_db(database_url, "upgrade").returncode == 0
    run_sql(database_url, "UPDATE alembic_version SET version_num = :v", v=FUTURE)

    server = Server(tmp_path, database_url=database_url)
    try:
        code = server.popen.wait(60)
    finally:
        server.stop()
    output = server.output()
    assert code != 0, output
    assert (
        f"error: database schema is at revision {FUTURE}, which this tickwork does not know"
        in output
    )
    assert f"newest known: {HEAD}" in output
    assert "Traceback" not in output

    current = tickwork_db(database_url, "current")
    assert current.returncode == 1
    assert f"revision {FUTURE}, which this tickwork does not know" in current.stderr
    upgrade = tickwork_db(database_url, "upgrade")
    assert upgrade.returncode == 1
    assert f"revision {FUTURE}, which this tickwork does not know" in upgrade.stderr
    assert revisions(database_url) == [FUTURE]  # refused, not touched


def test_db_commands_report_an_unreachable_database() -> None:
    url = "postgresql+asyncpg://tickwork:secret@127.0.0.1:1/nowhere"
    result = tickwork_db(url, "current")
    assert result.returncode == 1
    assert "cannot reach the database at postgresql+asyncpg://tickwork:***@127.0.0.1:1/nowhere" in (
        result.stderr
    )
    assert "secret" not in result.stderr and "Traceback" not in result.stderr


def test_replicas_started_together_migrate_an_empty_database_once(
    tmp_path: Path,
    pg_url: str,  # noqa: F811 - the fixture
) -> None:
    """Three ``serve`` processes started at once on an empty PostgreSQL database: one
    creates the schema under the migration lock, the others wait and find it current."""
    replicas = Replicas(tmp_path, pg_url, 3, REPLICA_ENV)
    try:
        replicas.wait_healthy()
    finally:
        codes = replicas.stop()
    assert codes == [0, 0, 0]
    assert revisions(pg_url) == [HEAD]
    assert len(run_sql(pg_url, "SELECT name FROM leases")) == 2


def _migrated_schema_diff(database_url: str) -> list[object]:
    """Migrate ``database_url`` to head; what Alembic finds different from the tables."""

    async def diff() -> list[object]:
        db = Database(database_url)
        try:
            await migrate.upgrade(db)
            return await db.read(
                lambda c: list(compare_metadata(MigrationContext.configure(c), metadata))
            )
        finally:
            await db.dispose()

    return asyncio.run(diff())


def test_migrations_build_exactly_the_tables_the_code_declares(database_url: str) -> None:
    # A change to scheduler_svc/db.py without its migration (or the reverse) shows here.
    assert _migrated_schema_diff(database_url) == []


def test_taking_the_next_job_reads_the_queue_index_without_sorting(tmp_path: Path) -> None:
    # ix_jobs_queue is in the queue's order (priority descending): SQLite reads the first
    # entry instead of sorting the whole queue on every claim (a cost that grew with depth).
    url = f"sqlite:///{tmp_path / 'plan.db'}"
    assert _migrated_schema_diff(url) == []
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            compiled = store._NEXT_READY.compile(conn)
            params = compiled.construct_params({"now": "2030-01-01 00:00:00.000000"})
            plan = conn.exec_driver_sql(
                f"EXPLAIN QUERY PLAN {compiled}",
                tuple(params[name] for name in compiled.positiontup or ()),
            ).all()
    finally:
        engine.dispose()
    details = " / ".join(str(row[-1]) for row in plan)
    assert "ix_jobs_queue" in details
    assert "TEMP B-TREE" not in details, details
