"""Test databases: a SQLite file per test, or a PostgreSQL database per test.

TICKWORK_TEST_BACKENDS (default "sqlite,postgresql") picks the backends every database
test runs on. PostgreSQL is the server at TICKWORK_TEST_PG (default: 127.0.0.1:5432, trust
auth, database ``test``); each test creates its own database there and drops it after, so
runs never see each other's rows.
"""

from __future__ import annotations

import asyncio
import os
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
