"""Alembic environment: runs on the connection tickwork hands over (see migrate.py),
or, from the alembic command line, on DATABASE_URL."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from scheduler_svc.schema import metadata
from scheduler_svc.settings import database_url_from_env

config = context.config
target_metadata = metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


def _run_from_url() -> None:
    url = database_url_from_env()

    async def go() -> None:
        engine = create_async_engine(url)
        async with engine.begin() as conn:
            await conn.run_sync(_run)
        await engine.dispose()

    asyncio.run(go())


connection = config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    _run_from_url()
