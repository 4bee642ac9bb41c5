"""A procrastinate worker running :func:`bench.noop.noop` as task "noop" and
:func:`bench.noop.wait_async` as task "wait".

Run as ``python -m bench.peers.procrastinate_worker DSN [CONCURRENCY]`` (default 1);
SIGTERM stops it gracefully. The benchmark defers jobs with :func:`defer` from its own
process.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import procrastinate

from bench.noop import noop, wait_async


def make_app(dsn: str, concurrency: int = 1) -> procrastinate.App:
    """A procrastinate app on ``dsn`` with the tasks ``noop`` and ``wait``; its connection
    pool holds up to one connection per concurrent job (psycopg_pool's default is 4)."""
    connector = procrastinate.PsycopgConnector(conninfo=dsn, max_size=max(4, concurrency + 1))
    app = procrastinate.App(connector=connector)
    app.task(name="noop")(noop)
    app.task(name="wait")(wait_async)
    return app


async def apply_schema(dsn: str) -> None:
    """Create procrastinate's tables and functions in the (empty) database."""
    app = make_app(dsn)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()


async def defer(
    dsn: str,
    count: int,
    chunk: int = 500,
    task_name: str = "noop",
    kwargs: dict[str, Any] | None = None,
) -> list[int]:
    """Defer ``count`` jobs of ``task_name`` (with ``kwargs``) in batches of ``chunk``;
    returns their ids in order."""
    app = make_app(dsn)
    ids: list[int] = []
    task = app.tasks[task_name]
    async with app.open_async():
        for start in range(0, count, chunk):
            n = min(chunk, count - start)
            ids.extend(await task.batch_defer_async(*(dict(kwargs or {}) for _ in range(n))))
    return ids


async def _work(dsn: str, concurrency: int) -> None:
    app = make_app(dsn, concurrency)
    async with app.open_async():
        await app.run_worker_async(concurrency=concurrency, wait=True, install_signal_handlers=True)


def main() -> None:
    """Run the worker until SIGTERM / SIGINT."""
    concurrency = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    asyncio.run(_work(sys.argv[1], concurrency))


if __name__ == "__main__":
    main()
