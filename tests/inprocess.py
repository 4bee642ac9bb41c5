"""An in-process scheduler service with an injected clock, for tests that drive time.

The gRPC server, store and QueueService are the real ones; only the clock is the test's.
Loops are not started: the test calls ``scheduler.tick(now)`` itself and never sleeps.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc

from scheduler_svc.scheduler import Scheduler, grpc_queue_client
from scheduler_svc.server import Service, create_server
from scheduler_svc.settings import Settings
from tests.databases import make_migrated
from tickwork import AsyncClient
from tickwork._channel import auth_metadata

UTC = dt.UTC


class FakeClock:
    """A clock the test moves by hand. Always aware UTC."""

    def __init__(self, start: dt.datetime) -> None:
        self.now = start.astimezone(UTC)

    def __call__(self) -> dt.datetime:
        return self.now

    def set(self, when: dt.datetime) -> dt.datetime:
        """Jump to ``when`` (aware) and return it in UTC."""
        self.now = when.astimezone(UTC)
        return self.now

    def advance(self, seconds: float) -> dt.datetime:
        """Move forward by ``seconds`` and return the new now."""
        self.now += dt.timedelta(seconds=seconds)
        return self.now


@dataclass
class Harness:
    service: Service
    scheduler: Scheduler
    client: AsyncClient
    clock: FakeClock

    async def tick(self, when: dt.datetime | None = None) -> dt.datetime:
        """Move the clock to ``when`` (if given) and run one scheduler tick there."""
        if when is not None:
            self.clock.set(when)
        return await self.scheduler.tick(self.clock())


@asynccontextmanager
async def inprocess(
    tmp: Path, database_url: str, start: dt.datetime, **settings: object
) -> AsyncIterator[Harness]:
    """A started in-process service at ``start`` with no loops running.

    The built-in retention task and schedule are not created unless ``retention_days`` is
    given (they would fire when a test moves the clock across days).
    """
    await make_migrated(database_url)
    clock = FakeClock(start)
    settings.setdefault("retention_days", 0)
    cfg = Settings.from_env(
        {},
        listen="127.0.0.1:0",
        database_url=database_url,
        scheduler_is_enabled=False,
        worker_is_enabled=False,
        **settings,
    )
    service = await create_server(cfg, clock=clock)
    channel = grpc.aio.insecure_channel(service.address)
    scheduler = Scheduler(
        cfg,
        service.app.store,
        grpc_queue_client(channel, auth_metadata(service.internal_token)),
        clock=clock,
        hub=service.app.hub,
        metrics=service.app.metrics,
    )
    client = AsyncClient(service.address)
    try:
        yield Harness(service, scheduler, client, clock)
    finally:
        await client.close()
        await channel.close(None)
        await service.stop(0)
