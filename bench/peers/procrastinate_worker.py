"""A procrastinate worker with concurrency 1 running :func:`bench.noop.noop` as task "noop".

Run as ``python -m bench.peers.procrastinate_worker DSN``; SIGTERM stops it gracefully.
The benchmark defers jobs with :func:`defer` from its own process.
"""

from __future__ import annotations

import asyncio
import sys

import procrastinate

from bench.noop import noop


def make_app(dsn: str) -> procrastinate.App:
    """A procrastinate app on ``dsn`` with the one task ``noop``."""
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=dsn))
    app.task(name="noop")(noop)
    return app


async def apply_schema(dsn: str) -> None:
    """Create procrastinate's tables and functions in the (empty) database."""
    app = make_app(dsn)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()


async def defer(dsn: str, count: int, chunk: int = 500) -> list[int]:
    """Defer ``count`` noop jobs in batches of ``chunk``; returns their ids in order."""
    app = make_app(dsn)
    ids: list[int] = []
    task = app.tasks["noop"]
    async with app.open_async():
        for start in range(0, count, chunk):
            n = min(chunk, count - start)
            ids.extend(await task.batch_defer_async(*({} for _ in range(n))))
    return ids


async def _work(dsn: str) -> None:
    app = make_app(dsn)
    async with app.open_async():
        await app.run_worker_async(concurrency=1, wait=True, install_signal_handlers=True)


def main() -> None:
    """Run the worker until SIGTERM / SIGINT."""
    asyncio.run(_work(sys.argv[1]))


if __name__ == "__main__":
    main()
