"""The scheduler service process: gRPC server, scheduler loop, lease reaper, embedded worker.

``create_server(settings)`` builds and starts everything on the listen address (port 0 picks
a free port, for tests) and returns a :class:`Service`; ``main()`` is ``tickwork serve``.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from contextlib import suppress
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from scheduler_svc import migrate
from scheduler_svc.app import App, Clock, utc_now
from scheduler_svc.db import Database
from scheduler_svc.hub import Hub
from scheduler_svc.scheduler import Scheduler, grpc_queue_client
from scheduler_svc.servicers.jobs import JobServicer
from scheduler_svc.servicers.queue import QueueServicer
from scheduler_svc.servicers.schedules import ScheduleServicer
from scheduler_svc.servicers.tasks import TaskServicer
from scheduler_svc.servicers.worker import WorkerServicer
from scheduler_svc.settings import Settings
from scheduler_svc.store import Store
from tickwork.v1 import (
    job_pb2,
    job_pb2_grpc,
    queue_pb2,
    queue_pb2_grpc,
    schedule_pb2,
    schedule_pb2_grpc,
    task_pb2,
    task_pb2_grpc,
    worker_pb2,
    worker_pb2_grpc,
)

log = logging.getLogger(__name__)

SERVICE_NAMES = (
    task_pb2.DESCRIPTOR.services_by_name["TaskService"].full_name,
    schedule_pb2.DESCRIPTOR.services_by_name["ScheduleService"].full_name,
    job_pb2.DESCRIPTOR.services_by_name["JobService"].full_name,
    queue_pb2.DESCRIPTOR.services_by_name["QueueService"].full_name,
    worker_pb2.DESCRIPTOR.services_by_name["WorkerService"].full_name,
)

#: How often the reaper looks for expired job leases, at most, seconds.
REAP_INTERVAL_S = 1.0


class Service:
    """A running scheduler service. ``address`` is "host:port" as bound."""

    def __init__(
        self, settings: Settings, server: grpc.aio.Server, port: int, app: App, db: Database
    ) -> None:
        self.settings = settings
        self.server = server
        self.port = port
        self.app = app
        self.db = db
        host = settings.listen.rsplit(":", 1)[0].strip("[]")
        connect_host = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
        self.address = f"{connect_host}:{port}"
        self.scheduler: Scheduler | None = None
        self.worker: Any = None
        self._channel: grpc.aio.Channel | None = None
        self._tasks: list[asyncio.Task[None]] = []

    def _supervise(self, task: asyncio.Task[None]) -> None:
        def done(t: asyncio.Task[None]) -> None:
            if not t.cancelled() and t.exception() is not None:
                log.critical("background task %s crashed", t.get_name(), exc_info=t.exception())
                self.stopped.set()

        task.add_done_callback(done)
        self._tasks.append(task)

    async def start_loops(self) -> None:
        """Start the reaper, and the scheduler loop and embedded worker when enabled."""
        self.stopped = asyncio.Event()
        self._supervise(asyncio.create_task(self._reap(), name="lease-reaper"))
        if self.settings.scheduler_is_enabled:
            self._channel = grpc.aio.insecure_channel(self.address)
            self.scheduler = Scheduler(
                self.settings,
                self.app.store,
                grpc_queue_client(self._channel),
                clock=self.app.clock,
                hub=self.app.hub,
            )
            self._supervise(asyncio.create_task(self.scheduler.run(), name="scheduler-loop"))
        if self.settings.worker_is_enabled:
            from worker_svc import Worker, WorkerSettings

            self.worker = Worker(WorkerSettings.from_env(server=self.address))
            self._supervise(asyncio.create_task(self.worker.run(), name="embedded-worker"))

    async def _reap(self) -> None:
        interval = min(REAP_INTERVAL_S, self.settings.lease_ttl_s / 3)
        while True:
            try:
                await self.app.reap_expired_leases()
            except Exception:
                log.exception("lease reaper pass failed")
            await asyncio.sleep(interval)

    async def stop(self, grace_s: float = 5.0) -> None:
        """Stop accepting work, let the embedded worker report, then close everything."""
        if self.scheduler is not None:
            self.scheduler.stop()
        if self.worker is not None:
            self.worker.stop()
        for task in self._tasks:
            if task.get_name() == "embedded-worker":
                # The running job gets the worker's shutdown grace, then is aborted and
                # reported; the server keeps serving the stream until then.
                worker_grace = self.worker.settings.shutdown_grace_s
                with suppress(Exception, asyncio.CancelledError):
                    await asyncio.wait_for(asyncio.shield(task), worker_grace + 10)
        await self.server.stop(grace_s)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with suppress(asyncio.CancelledError, Exception):
                await task
        if self._channel is not None:
            await self._channel.close(None)
        await self.app.drain()
        await self.db.dispose()


async def create_server(settings: Settings, *, clock: Clock = utc_now) -> Service:
    """Migrate the database, bind the gRPC server (with reflection and health) and start it.

    Loops are not started: call :meth:`Service.start_loops`. Raises FailedPrecondition when
    the database schema is newer than this code, RuntimeError when the port cannot be bound.
    """
    db = Database(settings.database_url)
    await migrate.upgrade(db)
    app = App(settings, Store(db), clock=clock, hub=Hub())
    server = grpc.aio.server(
        options=[("grpc.so_reuseport", 0), ("grpc.keepalive_permit_without_calls", 1)]
    )
    task_pb2_grpc.add_TaskServiceServicer_to_server(TaskServicer(app), server)
    schedule_pb2_grpc.add_ScheduleServiceServicer_to_server(ScheduleServicer(app), server)
    job_pb2_grpc.add_JobServiceServicer_to_server(JobServicer(app), server)
    queue_pb2_grpc.add_QueueServiceServicer_to_server(QueueServicer(app), server)
    worker_pb2_grpc.add_WorkerServiceServicer_to_server(WorkerServicer(app), server)
    health_servicer = health.aio.HealthServicer()  # type: ignore[attr-defined]
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (*SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME), server
    )
    try:
        port = server.add_insecure_port(settings.listen)
    except RuntimeError as err:
        raise RuntimeError(f"cannot listen on {settings.listen}: {err}") from None
    await server.start()
    for name in ("", *SERVICE_NAMES):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    log.info("tickwork listening", extra={"address": settings.listen, "port": port})
    return Service(settings, server, port, app, db)


async def serve(settings: Settings, config_path: str | None = None) -> None:
    """Run the service until SIGINT or SIGTERM; apply ``config_path`` (TOML) once started."""
    service = await create_server(settings)
    await service.start_loops()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    print(f"tickwork serving on {service.address}", flush=True)
    if config_path:
        report = await asyncio.to_thread(_apply, service.address, config_path)
        print(report, flush=True)
    waiter = asyncio.create_task(stop.wait())
    crashed = asyncio.create_task(service.stopped.wait())
    await asyncio.wait({waiter, crashed}, return_when=asyncio.FIRST_COMPLETED)
    log.info("shutting down")
    await service.stop()
    if crashed.done() and not waiter.done():
        raise SystemExit(1)
    waiter.cancel()
    crashed.cancel()


def _apply(address: str, config_path: str) -> str:
    """Apply a TOML config through the client SDK, as `tickwork apply` would."""
    from tickwork import Client
    from tickwork.apply import apply_config, load_config

    with Client(address) as client:
        return str(apply_config(client, load_config(config_path)))


def main(listen: str | None = None, config_path: str | None = None) -> int:
    """``tickwork serve``: settings from the environment, ``listen`` overriding
    TICKWORK_LISTEN. Returns the process exit code."""
    from scheduler_svc.errors import TickworkError
    from scheduler_svc.logs import setup_logging
    from scheduler_svc.settings import SettingsError

    setup_logging()
    try:
        settings = Settings.from_env(listen=listen)
        asyncio.run(serve(settings, config_path))
    except (SettingsError, TickworkError, RuntimeError) as err:
        print(f"error: {getattr(err, 'message', err)}", flush=True)
        return 2
    except KeyboardInterrupt:
        return 0
    return 0
