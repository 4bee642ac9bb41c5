"""The scheduler service process: gRPC server, scheduler loop, lease reaper, embedded worker.

``create_server(settings)`` builds and starts everything on the listen address (port 0 picks
a free port, for tests) and returns a :class:`Service`; ``main()`` is ``tickwork serve``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
import shutil
import signal
import sys
from collections.abc import Mapping
from contextlib import suppress
from typing import TYPE_CHECKING, Any

import grpc
from grpc_health.v1 import health, health_pb2_grpc
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from scheduler_svc import maintenance, migrate, reflection
from scheduler_svc.app import App, Clock, utc_now
from scheduler_svc.auth import AuthInterceptor
from scheduler_svc.db import Database
from scheduler_svc.embedded_console import start_console
from scheduler_svc.errors import SettingsError, StorageError
from scheduler_svc.health import HealthService
from scheduler_svc.holders import this_process
from scheduler_svc.hub import Hub
from scheduler_svc.listening import (
    LISTEN_VARIABLE,
    METRICS_VARIABLE,
    SERVER_OPTIONS,
    check_can_listen,
    check_exposure,
    is_loopback,
    server_credentials,
)
from scheduler_svc.metrics import REFRESH_S, Metrics, MetricsServer
from scheduler_svc.replicas import ReplicaWakeups
from scheduler_svc.scheduler import Scheduler, grpc_queue_client
from scheduler_svc.sender import Sender
from scheduler_svc.servicers._decoding import add_servicer
from scheduler_svc.servicers.config import ConfigServicer
from scheduler_svc.servicers.jobs import JobServicer
from scheduler_svc.servicers.notifiers import NotifierServicer
from scheduler_svc.servicers.queue import QueueServicer
from scheduler_svc.servicers.schedules import ScheduleServicer
from scheduler_svc.servicers.system import SystemServicer
from scheduler_svc.servicers.tasks import TaskServicer
from scheduler_svc.servicers.worker import WorkerServicer
from scheduler_svc.settings import Settings
from scheduler_svc.socket_dirs import make_socket_dir, remove_dead_socket_dirs
from scheduler_svc.storage_health import log_failure
from scheduler_svc.store import Store
from tickwork._channel import auth_metadata
from tickwork.tokens import new_token
from tickwork.v1 import (
    config_pb2,
    config_pb2_grpc,
    job_pb2,
    job_pb2_grpc,
    notifier_pb2,
    notifier_pb2_grpc,
    queue_pb2,
    queue_pb2_grpc,
    schedule_pb2,
    schedule_pb2_grpc,
    system_pb2,
    system_pb2_grpc,
    task_pb2,
    task_pb2_grpc,
    worker_pb2,
    worker_pb2_grpc,
)
from worker_svc.settings import CLOSE_RESERVE_S, REPORT_MARGIN_S

if TYPE_CHECKING:
    from tickwork.apply import Config
    from worker_svc import WorkerSettings

log = logging.getLogger(__name__)

SERVICE_NAMES = (
    task_pb2.DESCRIPTOR.services_by_name["TaskService"].full_name,
    schedule_pb2.DESCRIPTOR.services_by_name["ScheduleService"].full_name,
    job_pb2.DESCRIPTOR.services_by_name["JobService"].full_name,
    config_pb2.DESCRIPTOR.services_by_name["ConfigService"].full_name,
    system_pb2.DESCRIPTOR.services_by_name["SystemService"].full_name,
    notifier_pb2.DESCRIPTOR.services_by_name["NotifierService"].full_name,
    queue_pb2.DESCRIPTOR.services_by_name["QueueService"].full_name,
    worker_pb2.DESCRIPTOR.services_by_name["WorkerService"].full_name,
)

#: How often the health checks follow the database's state, seconds.
STORAGE_CHECK_S = 0.25
#: How often a SQLite database's write-ahead log is checkpointed and truncated, seconds.
CHECKPOINT_S = 60.0
#: How often the reaper looks for expired job leases, at most, seconds.
REAP_INTERVAL_S = 1.0


class Service:
    """A running scheduler service. ``address`` is "host:port" as bound.

    ``internal_address`` (a unix socket, plaintext) and ``internal_token`` are how the
    service's own scheduler loop, embedded worker and ``--config`` apply reach it, whatever
    TLS and tokens the public address requires; both exist only while it runs.
    """

    def __init__(
        self,
        settings: Settings,
        server: grpc.aio.Server,
        port: int,
        app: App,
        db: Database,
        *,
        internal_address: str = "",
        internal_token: str = "",
        socket_dir: str = "",
        metrics_server: MetricsServer | None = None,
        health: HealthService | None = None,
    ) -> None:
        self.settings = settings
        self.health = health
        self.server = server
        self.port = port
        self.app = app
        self.db = db
        self.internal_token = internal_token
        self.metrics_server = metrics_server
        self._socket_dir = socket_dir
        listen_host = settings.listen.rsplit(":", 1)[0]
        host = listen_host.strip("[]")
        connect_host = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
        self.address = f"{connect_host}:{port}"
        #: The address as listened on: the listen host (0.0.0.0, say) and the bound port.
        self.listen_address = f"{listen_host}:{port}"
        self.internal_address = internal_address or self.address
        self.scheduler: Scheduler | None = None
        self.worker: Any = None
        self._channel: grpc.aio.Channel | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.sender: Sender | None = None

    def _supervise(self, task: asyncio.Task[None], *, owned: bool = True) -> None:
        """Stop the service loudly when ``task`` crashes. ``owned``: :meth:`stop` cancels
        it; a task that is not (the console) is stopped by whoever started it."""

        def done(t: asyncio.Task[None]) -> None:
            if not t.cancelled() and t.exception() is not None:
                log.critical("background task %s crashed", t.get_name(), exc_info=t.exception())
                self.stopped.set()

        task.add_done_callback(done)
        if owned:
            self._tasks.append(task)

    async def start_loops(self, worker_settings: WorkerSettings | None = None) -> None:
        """Start the reaper, and the scheduler loop and embedded worker when enabled.

        ``worker_settings`` are the embedded worker's (see :func:`embedded_worker_settings`;
        its server and token are replaced by the internal ones); read from the environment
        when None.
        """
        self.stopped = asyncio.Event()
        try:
            await self.app.take_over_dead_holders()
        except Exception:
            log.exception("taking over a dead predecessor's leases failed; they expire")
        self._supervise(asyncio.create_task(self._reap(), name="lease-reaper"))
        self.start_sender()
        self._supervise(asyncio.create_task(self._watch_storage(), name="storage-health"))
        self._supervise(asyncio.create_task(self._watch_queue(), name="queue-stall"))
        if self.db.sqlite_file is not None:
            self._supervise(asyncio.create_task(self._checkpoint(), name="wal-checkpoint"))
        if self.metrics_server is not None:
            self._supervise(asyncio.create_task(self._refresh_metrics(), name="metrics"))
        if self.db.dialect.notifications:
            replicas = ReplicaWakeups(
                self.db, self.app.hub.queue.fire, self.app.wake_scheduler_loop
            )
            self.app.replicas = replicas
            self._supervise(asyncio.create_task(replicas.run(), name="replica-wakeups"))
        if self.settings.scheduler_is_enabled:
            self._channel = grpc.aio.insecure_channel(self.internal_address)
            self.scheduler = Scheduler(
                self.settings,
                self.app.store,
                grpc_queue_client(self._channel, auth_metadata(self.internal_token)),
                clock=self.app.clock,
                hub=self.app.hub,
                metrics=self.app.metrics,
            )
            self._supervise(asyncio.create_task(self.scheduler.run(), name="scheduler-loop"))
        if self.settings.worker_is_enabled:
            from worker_svc import Worker

            if worker_settings is None:
                worker_settings = embedded_worker_settings()
            self.worker = Worker(
                dataclasses.replace(
                    worker_settings,
                    server=self.internal_address,
                    token=self.internal_token,
                    stop_bound_s=self.settings.shutdown_grace_s,
                )
            )
            self._supervise(asyncio.create_task(self.worker.run(), name="embedded-worker"))

    def start_sender(self) -> Sender:
        """Start the notification sender (:mod:`scheduler_svc.sender`) on the app's clock;
        :meth:`start_loops` does, and a test that runs no loops may."""
        if self.sender is None:
            app = self.app
            self.sender = Sender(
                app.store.outbox,
                self.settings.notify,
                self.settings.smtp,
                app.metrics,
                app.clock,
                app.hub.outbox,
                lease_ttl_s=self.settings.lease_ttl_s,
            )
            if not hasattr(self, "stopped"):
                self.stopped = asyncio.Event()
            self._supervise(asyncio.create_task(self.sender.run(), name="notification-sender"))
        return self.sender

    async def _refresh_metrics(self) -> None:
        store = self.app.store
        while True:
            try:
                self.app.metrics.snapshot.update(
                    await store.queue_depth_by_lane(), await store.consecutive_failures()
                )
            except Exception as err:
                log_failure(log, "metrics refresh failed", err)
            await asyncio.sleep(REFRESH_S)

    async def _watch_storage(self) -> None:
        """Keep the health checks on the database's state (see :mod:`storage_health`):
        NOT_SERVING while writes fail or stall, SERVING once one commits."""
        health = self.db.health
        health.announce = True
        shown = False
        while True:
            failing = health.check()
            if failing != shown and self.health is not None:
                await self.health.storage_failing(failing)
            shown = failing
            self.app.metrics.storage(health)
            await asyncio.sleep(STORAGE_CHECK_S)

    async def _watch_queue(self) -> None:
        """Follow whether ready jobs wait with no active worker (GetStatus's queue_stall,
        the queue-stalled metric); warn once when that lasts past a lease TTL."""
        app = self.app
        ttl_s = self.settings.lease_ttl_s
        warned = False
        while True:
            try:
                now = app.clock()
                ready = await app.store.next_ready_time(now)
                waiting = ready is not None and ready <= now
                if waiting:
                    leases = await app.store.worker_lease_holders()
                    waiting = not any(lease.expires_at >= now for lease in leases)
                if not waiting:
                    app.queue_stalled_since = None
                elif app.queue_stalled_since is None:
                    app.queue_stalled_since = now
                since = app.queue_stalled_since
                stalled_s = (now - since).total_seconds() if since is not None else 0.0
                app.metrics.queue_stalled.set(stalled_s)
                if stalled_s > ttl_s and not warned:
                    log.warning(
                        "queue wedged: ready jobs have waited %.0f s with no active worker",
                        stalled_s,
                    )
                warned = stalled_s > ttl_s
            except Exception as err:
                log_failure(log, "queue stall check failed", err)
            await asyncio.sleep(min(REAP_INTERVAL_S, ttl_s / 3))

    async def _checkpoint(self) -> None:
        """SQLite: empty the write-ahead log into the database every :data:`CHECKPOINT_S`
        (a reader holding an old snapshot can keep SQLite's own checkpoints from resetting
        it; this one waits for the writer thread and truncates the log)."""
        while True:
            await asyncio.sleep(CHECKPOINT_S)
            try:
                busy, pages, done = await self.db.checkpoint() or (0, 0, 0)
                log.debug("WAL checkpoint", extra={"busy": busy, "pages": pages, "done": done})
            except Exception as err:
                log_failure(log, "WAL checkpoint failed", err)

    async def _reap(self) -> None:
        interval = min(REAP_INTERVAL_S, self.settings.lease_ttl_s / 3)
        while True:
            try:
                await self.app.reap_expired_leases()
            except Exception as err:
                log_failure(log, "lease reaper pass failed", err)
            await asyncio.sleep(interval)

    async def stop(self, bound_s: float | None = None) -> None:
        """Stop within ``bound_s`` seconds (default: the settings' ``shutdown_grace_s``,
        TICKWORK_SHUTDOWN_GRACE_SECONDS), in this order:

        1. at once: every service NOT_SERVING on the health service (open Health/Watch
           streams get it, then end), no new RPC accepted, no job handed out, the scheduler
           loop and the embedded worker stopping;
        2. the running jobs (a dedicated worker's too) get ``settings.job_finish_grace_s``
           to finish and report;
        3. the rest are told to abort ("service stopping") and get the abort grace
           (WORKER_ABORT_GRACE_SECONDS) and a report's margin to report ABORTED;
        4. the streams still open are cancelled :data:`~worker_svc.settings.CLOSE_RESERVE_S`
           before the bound, the worker lease is given up, the database closed.

        The socket directory is removed even when closing something fails.
        """
        bound = self.settings.shutdown_grace_s if bound_s is None else bound_s
        try:
            await self._stop(asyncio.get_running_loop().time() + bound)
        finally:
            if self._socket_dir:
                shutil.rmtree(self._socket_dir, ignore_errors=True)

    async def _let_running_jobs_end(self, finish_s: float, report_by: float) -> None:
        """The jobs that workers connected here are running (a dedicated worker's too) get
        ``finish_s`` seconds to finish and report; the rest are then told to abort
        ("service stopping") and have until the loop time ``report_by`` to report ABORTED,
        so that a restart does not leave them to fail "lease lost", which counts toward
        auto-disable."""
        if await self.app.hub.running_jobs_reported(finish_s):
            return
        for job_id in self.app.hub.running_jobs():
            log.warning(
                "running job told to abort: the service is stopping",
                extra={"job_id": job_id, "grace_s": finish_s},
            )
            self.app.hub.request_abort(
                job_id, f"service stopping (its shutdown grace of {finish_s:.3g} s ran out)"
            )
        await self.app.hub.running_jobs_reported(_left(report_by))

    async def _stop(self, deadline: float) -> None:
        if self.health is not None:
            await self.health.stopping()
        self.app.stop_dispatch()  # no job is handed out any more; queued ones stay queued
        if self.scheduler is not None:
            self.scheduler.stop()
        if self.worker is not None:
            self.worker.stop()
        # New RPCs are refused from here on; open streams (a worker reporting its running
        # job) are served until the close reserve, then cancelled.
        streams_by = deadline - CLOSE_RESERVE_S
        server_stopped = asyncio.create_task(self.server.stop(_left(streams_by)))
        # The finish grace, cut to what a shorter bound leaves after the abort's share.
        abort_s = self.settings.worker_abort_grace_s + REPORT_MARGIN_S
        finish_s = min(self.settings.job_finish_grace_s, _left(streams_by, keep_s=abort_s))
        await self._let_running_jobs_end(finish_s, streams_by)
        for task in self._tasks:
            if task.get_name() == "embedded-worker":
                # Its job was told to abort above (if still running): it reports over the
                # stream, which the server still serves.
                with suppress(Exception, asyncio.CancelledError):
                    await asyncio.wait_for(asyncio.shield(task), _left(streams_by))
        await server_stopped
        # The streams the server ended give the worker lease up before the database closes.
        await self.app.streams_ended(timeout_s=_left(deadline, keep_s=1.0))
        if self.app.replicas is not None:
            # The other replicas hear of what this one let go (the worker lease) at once.
            await self.app.replicas.flush(timeout_s=min(1.0, _left(deadline, keep_s=0.5)))
        if self.sender is not None:
            await self.sender.drain(timeout_s=min(5.0, _left(deadline, keep_s=0.5)))
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with suppress(asyncio.CancelledError, Exception):
                await task
        if self._channel is not None:
            await self._channel.close(None)
        await self.app.drain(timeout_s=_left(deadline, keep_s=0.5))
        await self.db.dispose()
        if self.metrics_server is not None:
            await asyncio.to_thread(self.metrics_server.close)


def _left(until: float, keep_s: float = 0.0) -> float:
    """Seconds from now to the loop time ``until`` less ``keep_s``, never below 0."""
    return max(0.0, until - keep_s - asyncio.get_running_loop().time())


def embedded_worker_settings(env: Mapping[str, str] | None = None) -> WorkerSettings:
    """The embedded worker's settings (its ``WORKER_*`` variables), read and checked before
    the service starts; the internal address and token are filled in by ``start_loops``.

    Raises:
        SettingsError: ``NAME: what is wrong``, as for the service's own settings.
    """
    from tickwork.errors import InvalidSetting
    from worker_svc import WorkerSettings

    try:
        return WorkerSettings.embedded(_EMBEDDED_PLACEHOLDER, "", env)
    except InvalidSetting as err:  # the worker's error, in the service's terms
        raise SettingsError(err.details) from None


#: The embedded worker's server until the service's internal address exists.
_EMBEDDED_PLACEHOLDER = "unix:embedded"


class DatabaseUnreachable(RuntimeError):
    """The database at DATABASE_URL could not be opened at startup (no server there, a
    database that does not exist, a refused login, a SQLite file that cannot be created).

    ``str()`` is one line naming the URL (password hidden) and the cause; the exception's
    ``__cause__`` keeps the whole error.
    """

    def __init__(self, url: str, err: BaseException) -> None:
        """Describe the failure to open ``url`` with ``err``."""
        cause: BaseException = err
        if isinstance(err, StorageError) and err.__cause__ is not None:
            cause = err.__cause__
        if isinstance(cause, DBAPIError) and cause.orig is not None:
            cause = cause.orig
        detail = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
        shown = make_url(url).render_as_string(hide_password=True)
        super().__init__(f"cannot reach the database at {shown}: {detail}")


async def create_server(settings: Settings, *, clock: Clock = utc_now) -> Service:
    """Migrate the database, bind the gRPC server (with reflection and health) and start it.

    Loops are not started: call :meth:`Service.start_loops`. Raises FailedPrecondition when
    the database schema is newer than this code, DatabaseUnreachable when the database
    cannot be opened, RuntimeError when the port cannot be bound,
    SettingsError when a non-loopback address would be served without tokens or TLS (see
    :func:`check_exposure`) or a certificate file cannot be read.
    """
    check_exposure(settings)
    credentials = server_credentials(settings) if settings.tls_enabled else None
    # Before the database: a port in use is refused without migrating anything, and
    # without the gRPC core's own log line about the failed bind.
    check_can_listen(settings.listen, LISTEN_VARIABLE)
    if settings.metrics_listen:
        check_can_listen(settings.metrics_listen, METRICS_VARIABLE)
    internal_token = new_token()
    interceptors: list[grpc.aio.ServerInterceptor] = [  # type: ignore[type-arg]
        AuthInterceptor(settings.tokens, internal_token)
    ]
    db = Database(settings.database_url, running_jobs=settings.max_running_jobs)
    try:
        await migrate.upgrade(db)
    except (StorageError, SQLAlchemyError, OSError) as err:
        with suppress(Exception):
            await db.dispose()
        raise DatabaseUnreachable(settings.database_url, err) from err
    app = App(
        settings, Store(db, process=this_process()), clock=clock, hub=Hub(), metrics=Metrics()
    )
    await maintenance.ensure_builtins(app)
    server = grpc.aio.server(
        interceptors=interceptors,
        options=SERVER_OPTIONS,
    )
    add_servicer(task_pb2_grpc.add_TaskServiceServicer_to_server, TaskServicer(app), server)
    add_servicer(
        schedule_pb2_grpc.add_ScheduleServiceServicer_to_server, ScheduleServicer(app), server
    )
    add_servicer(job_pb2_grpc.add_JobServiceServicer_to_server, JobServicer(app), server)
    add_servicer(config_pb2_grpc.add_ConfigServiceServicer_to_server, ConfigServicer(app), server)
    add_servicer(queue_pb2_grpc.add_QueueServiceServicer_to_server, QueueServicer(app), server)
    workers = WorkerServicer(app)
    add_servicer(worker_pb2_grpc.add_WorkerServiceServicer_to_server, workers, server)
    add_servicer(
        system_pb2_grpc.add_SystemServiceServicer_to_server,
        SystemServicer(app, workers.registry),
        server,
    )
    add_servicer(
        notifier_pb2_grpc.add_NotifierServiceServicer_to_server, NotifierServicer(app), server
    )
    health_servicer = HealthService(SERVICE_NAMES)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable((*SERVICE_NAMES, health.SERVICE_NAME), server)  # v1 and v1alpha
    try:
        if credentials is not None:
            port = server.add_secure_port(settings.listen, credentials)
        else:
            port = server.add_insecure_port(settings.listen)
    except RuntimeError as err:
        await db.dispose()
        raise RuntimeError(
            f"{LISTEN_VARIABLE}: cannot listen on {settings.listen}: {err}"
        ) from None
    remove_dead_socket_dirs()
    socket_dir = make_socket_dir()
    internal_address = f"unix:{socket_dir}/grpc.sock"
    metrics_server = None
    try:
        server.add_insecure_port(internal_address)
        if settings.metrics_listen:
            try:
                metrics_server = MetricsServer(settings.metrics_listen, app.metrics.registry)
            except OSError as err:
                raise RuntimeError(
                    f"{METRICS_VARIABLE}: cannot listen on {settings.metrics_listen}: "
                    f"{err.strerror or err}"
                ) from None
        await server.start()
    except BaseException:
        shutil.rmtree(socket_dir, ignore_errors=True)
        if metrics_server is not None:
            metrics_server.close()
        await db.dispose()
        raise
    await health_servicer.serving()
    log.info(
        "tickwork listening",
        extra={
            "address": settings.listen,
            "port": port,
            "tls": "mutual" if settings.tls_client_ca_file else settings.tls_enabled,
            "access_control": bool(settings.tokens),
            "metrics": f"{settings.metrics_listen.rsplit(':', 1)[0]}:{metrics_server.port}"
            if metrics_server
            else "off",
        },
    )
    return Service(
        settings,
        server,
        port,
        app,
        db,
        internal_address=internal_address,
        internal_token=internal_token,
        socket_dir=socket_dir,
        metrics_server=metrics_server,
        health=health_servicer,
    )


async def serve(
    settings: Settings,
    config: Config | None = None,
    *,
    worker_settings: WorkerSettings | None = None,
    json_logs: bool = False,
) -> None:
    """Run the service until SIGINT or SIGTERM; apply ``config`` (read beforehand with
    :func:`tickwork.apply.load_config`) once started. ``json_logs``: the lines it shows
    (serving on, the --insecure warning, the config report) are log records, not text on
    stdout, so that stdout and stderr hold only JSON.

    ``worker_settings``: the embedded worker's, checked beforehand (see
    :func:`embedded_worker_settings`); read from the environment when None. However it
    ends (a stop, a crash, a config the server refuses), the service is stopped and its
    socket directory removed.
    """
    service = await create_server(settings)
    loop = asyncio.get_running_loop()
    crashed = False
    console = None
    try:
        await service.start_loops(worker_settings)
        console = await start_console(settings, service.internal_address)
        if console is not None and console.task is not None:
            # A console that dies stops the service loudly; its own stop() ends it, with
            # its pages' grace (cancelling it would cut uvicorn's shutdown short).
            service._supervise(console.task, owned=False)
        # Everything made so far (modules, compiled statements, the service) lives as long
        # as the process: move it out of the collector's sight, so the full collections
        # that a tick's burst of records triggers do not walk it again and again (about a
        # tenth of the time to record 10,000 fires).
        gc.freeze()
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        say = _Say(json_logs)
        say(f"tickwork serving on {service.listen_address}", address=service.listen_address)
        if console is not None:
            say(f"tickwork console on {console.url}", console=console.url)
        if not (is_loopback(settings.listen) or settings.tokens or settings.tls_enabled):
            say(
                f"WARNING: --insecure: {settings.listen} is served without access control or "
                "TLS; anyone who reaches it can run commands as this user",
                level=logging.WARNING,
            )
        if config is not None:
            report = await asyncio.to_thread(
                _apply, service.internal_address, service.internal_token, config
            )
            say(str(report), config=config.source)
        waiter = asyncio.create_task(stop.wait())
        stopped = asyncio.create_task(service.stopped.wait())
        await asyncio.wait({waiter, stopped}, return_when=asyncio.FIRST_COMPLETED)
        crashed = stopped.done() and not waiter.done()
        waiter.cancel()
        stopped.cancel()
        log.info("shutting down")
    finally:
        # Already stopping: a repeated SIGTERM changes nothing (and must not kill the
        # process with the default action once the loop has given its handlers back).
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        # The console's pages get their grace while the service stops, not before: the
        # health service turns NOT_SERVING at once and the bound counts from the signal.
        console_stopped = asyncio.create_task(console.stop()) if console is not None else None
        try:
            await service.stop()
        finally:
            if console_stopped is not None:
                await console_stopped
    if crashed:
        raise SystemExit(1)


class _Say:
    """Show a line to whoever runs ``tickwork serve``: on stdout, or with JSON logs as a log
    record (``fields`` as its JSON keys)."""

    def __init__(self, json_logs: bool) -> None:
        self.json_logs = json_logs

    def __call__(self, text: str, *, level: int = logging.INFO, **fields: object) -> None:
        if self.json_logs:
            log.log(level, text, extra=fields)
        else:
            print(text, flush=True)


def _apply(address: str, token: str, config: Config) -> str:
    """Apply a config through the client SDK, as `tickwork apply` would."""
    from tickwork import Client
    from tickwork.apply import apply_config

    with Client(address, token=token, tls=False) as client:
        return str(apply_config(client, config))


def main(
    listen: str | None = None,
    config_path: str | None = None,
    *,
    insecure: bool = False,
    log_format: str | None = None,
) -> int:
    """``tickwork serve``: settings from the environment, ``listen`` overriding
    TICKWORK_LISTEN and ``insecure`` (when true) TICKWORK_INSECURE; ``log_format`` ("text"
    or "json", default TICKWORK_LOG_FORMAT or text); the level from TICKWORK_LOG_LEVEL.
    A setting that cannot be used, or a database that cannot be reached, is one line on
    stderr (``error: ...``). Returns the process exit code: 0 after a stop, 2 for a
    setting, 1 for the database or a crash."""
    from scheduler_svc.errors import ServiceError
    from tickwork.apply import ConfigError, load_config
    from tickwork.errors import InvalidSetting
    from tickwork.logs import LogSettings, setup_logging

    try:
        logs = LogSettings.from_env(log_format=log_format)
    except InvalidSetting as err:
        print(f"error: {err.details}", file=sys.stderr, flush=True)
        return 2
    json_format = logs.json
    setup_logging(logs.level, json_format=json_format)
    try:
        settings = Settings.from_env(listen=listen, insecure=insecure or None)
        # Checked with the service's own: a bad one must not wait until after listening.
        worker_settings = embedded_worker_settings() if settings.worker_is_enabled else None
        # Read and checked offline now (the server checks each task again when applying).
        config = load_config(config_path) if config_path else None
        asyncio.run(serve(settings, config, worker_settings=worker_settings, json_logs=json_format))
    except DatabaseUnreachable as err:
        log.debug("startup failed", exc_info=err)  # the whole error at TICKWORK_LOG_LEVEL=DEBUG
        print(f"error: {err}", file=sys.stderr, flush=True)
        return 1
    except ConfigError as err:  # one line per problem, as `tickwork apply` prints them
        for line in str(err).splitlines():
            print(f"error: {line}", file=sys.stderr, flush=True)
        return 2
    except (ServiceError, RuntimeError) as err:
        print(f"error: {getattr(err, 'message', err)}", file=sys.stderr, flush=True)
        return 2
    except KeyboardInterrupt:
        return 0
    return 0
