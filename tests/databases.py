"""Test databases: a SQLite file per test, or a PostgreSQL database per test.

TICKWORK_TEST_BACKENDS (default "sqlite,postgresql") picks the backends every database
test runs on. PostgreSQL is the server at TICKWORK_TEST_PG (default: 127.0.0.1:5432, trust
auth, database ``test``); each test creates its own database there and drops it after, so
runs never see each other's rows.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

BACKENDS = [
    b.strip() for b in os.environ.get("TICKWORK_TEST_BACKENDS", "sqlite,postgresql").split(",")
]
PG_ADMIN = os.environ.get("TICKWORK_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


async def _pg_admin(sql: str) -> None:
    conn = await asyncpg.connect(PG_ADMIN)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def create_database(backend: str, tmp: Path) -> str:
    """A new empty database for one test; returns its SQLAlchemy async URL."""
    if backend == "sqlite":
        return f"sqlite+aiosqlite:///{tmp / 'tickwork.db'}"
    if backend == "postgresql":
        name = f"tw_test_{uuid.uuid4().hex[:12]}"
        asyncio.run(_pg_admin(f'CREATE DATABASE "{name}"'))
        base = PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://")
        return f"{base}/{name}"
    raise ValueError(f"unknown backend {backend!r}")


def drop_database(url: str) -> None:
    """Drop a database made by :func:`create_database` (SQLite files go with tmp_path)."""
    if url.startswith("postgresql"):
        name = url.rsplit("/", 1)[1]
        asyncio.run(_pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def run_sql_async(url: str, sql: str, **params: Any) -> list[tuple[Any, ...]]:
    """Run one statement on ``url`` (as an operator writing to the database directly)."""
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            result = await conn.execute(sa.text(sql), params)
            return [tuple(r) for r in result.all()] if result.returns_rows else []
    finally:
        await engine.dispose()


def run_sql(url: str, sql: str, **params: Any) -> list[tuple[Any, ...]]:
    """Sync form of :func:`run_sql_async`, for sync tests."""
    return asyncio.run(run_sql_async(url, sql, **params))


# -- migrated copies ------------------------------------------------------------------------
# A test that starts the service in process (tests.inprocess) migrates its empty database
# first, 13 revisions of DDL: about 0.15 s of CPU on SQLite and 0.3 s (client and server)
# on PostgreSQL. Such tests get a copy of a database migrated once per test process
# instead; what they test starts from the same schema either way. Tests of the migrations
# themselves, and every test that starts `tickwork serve`, still migrate an empty database.

_templates: dict[str, str] = {}
"""Backend -> this process's migrated database: a SQLite file's path, a PostgreSQL name."""


async def _template(backend: str) -> str:
    from scheduler_svc import migrate
    from scheduler_svc.db import Database

    if backend in _templates:
        return _templates[backend]
    if backend == "sqlite":
        folder = Path(tempfile.mkdtemp(prefix="tickwork-template-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        name = str(folder / "tickwork.db")
        url = f"sqlite+aiosqlite:///{name}"
    else:
        name = f"tw_template_{uuid.uuid4().hex[:12]}"
        await _pg_admin(f'CREATE DATABASE "{name}"')
        atexit.register(lambda: asyncio.run(_pg_admin(f'DROP DATABASE IF EXISTS "{name}"')))
        url = PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://")
        url = f"{url}/{name}"
    db = Database(url)
    try:
        await migrate.upgrade(db)
    finally:
        await db.dispose()
    _templates[backend] = name
    return name


async def make_migrated(url: str) -> None:
    """Turn the empty database of :func:`create_database` at ``url`` into a copy of one
    migrated to the newest revision (see above). A database that is not empty (a test
    starting the service again on it) is left as it is."""
    if url.startswith("sqlite"):
        path = Path(url.split(":///", 1)[1])
        template = await _template("sqlite")
        await asyncio.to_thread(_copy_if_missing, Path(template), path)
        return
    template = await _template("postgresql")
    name = url.rsplit("/", 1)[1]
    conn = await asyncpg.connect(f"{PG_ADMIN.rsplit('/', 1)[0]}/{name}")
    try:
        empty = await conn.fetchval("SELECT to_regclass('alembic_version') IS NULL")
    finally:
        await conn.close()
    if empty:
        await _pg_admin(f'DROP DATABASE "{name}" WITH (FORCE)')
        await _pg_admin(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')


def _copy_if_missing(template: Path, path: Path) -> None:
    if not path.exists():
        shutil.copyfile(template, path)
