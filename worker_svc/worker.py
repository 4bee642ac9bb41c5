"""The worker: its lifecycle, and the reconnect loop around its stream sessions.

The protocol (``tickwork.v1.WorkerService.Connect``, one bidirectional stream):

1. The worker sends ``Hello(worker_id, handlers)``; the server answers ``Welcome(active,
   heartbeat_interval_seconds, lease_ttl_seconds)``.
2. The worker sends ``PollJob``; the server answers ``NoJob`` (poll again) or
   ``AssignJob``. A standby worker gets no job (NoJob, or no answer at all) until it has
   become active.
3. While the job runs the worker sends ``Heartbeat`` every heartbeat interval and the
   job's output as ``LogLines`` batches; the server may send ``AbortJob`` at any time.
4. The worker sends the remaining ``LogLines``, then ``Outcome`` (SUCCEEDED, FAILED or
   ABORTED), waits for ``OutcomeAck`` and goes back to 2. Unless it is stopping, the
   Outcome carries ``poll_next``: it is also the next PollJob, so the server answers the
   OutcomeAck with AssignJob or NoJob at once and step 2 sends nothing.

A worker with ``slots`` N (WORKER_SLOTS, ``--slots``) runs N such streams at once, each one
slot: its own reconnect loop, session and outcome reporter, one job at a time, so N jobs run
at once when the service's TICKWORK_MAX_RUNNING_JOBS leaves slot leases for them (streams
beyond them stand by). A stream that breaks stops only its own job.

Every job runs in a child process of the worker (see :mod:`worker_svc.handlers`), so an
abort or a timeout stops it at once and its process is gone before the Outcome is sent.
When the stream breaks, the running job is stopped (its lease expires on the server, which
recovers the job) and the worker reconnects with exponential backoff and jitter. On
``stop()`` the worker polls no more (a poll already sent is cancelled with ``CancelPoll``,
which the server answers at once), lets the running job finish within the shutdown grace,
then aborts it, reports its outcome, closes the stream and returns.

The duties live in their own modules: :mod:`worker_svc._session` (one stream: Hello,
polls, assignments, aborts), :mod:`worker_svc._supervisor` (one running job: handler,
heartbeats, output, abort), :mod:`worker_svc._outcome` (Outcome, OutcomeAck, reporting
again) and :mod:`worker_svc._execute` (calling the handler).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import socket
import uuid

from tickwork._channel import aio_channel, auth_metadata
from tickwork.v1 import worker_pb2_grpc
from worker_svc._connection import Connection, StreamBroken
from worker_svc._flag import wait_any
from worker_svc._outcome import OutcomeReporter
from worker_svc._session import Session
from worker_svc._shield import shielded
from worker_svc._supervisor import ABORT_SHUTDOWN, StopSignals
from worker_svc.handlers import PythonHandler, start_job_process_server
from worker_svc.settings import WorkerSettings

__all__ = ["Worker", "run_worker"]

logger = logging.getLogger(__name__)


KEEPALIVE = (
    ("grpc.keepalive_time_ms", 2000),
    ("grpc.keepalive_timeout_ms", 3000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.http2.ping_timeout_ms", 3000),
)
"""The worker's channel sends an HTTP/2 ping every 2 seconds and gives the connection up
when one is not answered within 3 (``ping_timeout_ms``; measured with gRPC 1.85,
``keepalive_timeout_ms`` alone did not close it). A worker cut off from the service by the
network without a FIN (a black hole) notices within about 5 seconds: the stream breaks and
the running job is stopped, before the service, whose own pings go unanswered, closes the
connection (``scheduler_svc.listening.PING_EVERY_S`` + ``PING_TIMEOUT_S``, 10 s) and gives
the worker lease to a standby. The service sends nothing while a job runs, so only these
pings tell the worker. The service accepts them (``scheduler_svc.listening.SERVER_OPTIONS``)."""


def _new_worker_id() -> str:
    """Return ``"host:pid:uuid8"``, unique to this worker object.

    Returns:
        str: the worker id sent in Hello.
    """
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class _Lane:
    """One slot of the worker: a stream's reconnect loop, its session, and the reporter of
    its outcomes (which outlives the streams)."""

    def __init__(self, index: int, reporter: OutcomeReporter) -> None:
        self.index = index
        self.reporter = reporter
        self.session: Session | None = None
        self.failed_attempts = 0


class Worker:
    """A tickwork worker: one stream to the scheduler service per slot, one job at a time
    on each.

    Create it, ``await run()``, and call ``stop()`` (from the event loop, e.g. a signal
    handler) to end it.
    """

    def __init__(self, settings: WorkerSettings) -> None:
        """Create a worker; nothing happens until ``run``.

        Args:
            settings (WorkerSettings): where to connect and how long to wait.
        """
        self._settings = settings
        self.worker_id = _new_worker_id()
        """``"host:pid:uuid8"``, sent in Hello; the same for every reconnect."""
        self._signals = StopSignals()
        self._lanes = [
            _Lane(index, OutcomeReporter(settings.outcome_ack_timeout_s))
            for index in range(settings.slots)
        ]
        self._running = False
        self._metadata = auth_metadata(settings.token)

    @property
    def settings(self) -> WorkerSettings:
        """The worker's settings."""
        return self._settings

    def stop(self, abort_running: bool = False) -> None:
        """Ask the worker to stop; ``run`` returns once the running jobs were reported.

        No new job is polled for. Each running job may finish within the shutdown grace
        (``settings.job_finish_grace_s``), then it is aborted; either way its outcome is
        reported before the stream is closed. Idempotent; call it from the event loop thread.

        Args:
            abort_running (bool): abort the running job now instead of after the grace (a
                second SIGINT, for instance).
        """
        if not self._signals.stopping.is_set():
            logger.info("worker stopping", extra={"worker_id": self.worker_id})
        self._signals.stopping.set()
        if abort_running:
            self._signals.abort_now.set()
            for lane in self._lanes:
                if lane.session is not None:
                    lane.session.abort_all(ABORT_SHUTDOWN)

    async def run(self) -> None:
        """Serve jobs until ``stop()``; reconnect whenever the stream breaks.

        Returns:
            None: after ``stop()``, once the running job (if any) was reported and the stream
            closed.

        Raises:
            RuntimeError: ``run`` is already running.
            asyncio.CancelledError: the task was cancelled; the running job was aborted and
                its outcome reported first (as far as the stream allowed).
        """
        if self._running:
            raise RuntimeError("Worker.run is already running")
        self._running = True
        allowed = self._settings.handlers
        if not allowed or PythonHandler.name in allowed:
            start_job_process_server(self._settings.slots)
        try:
            if len(self._lanes) == 1:
                await self._run(self._lanes[0])
            else:
                await self._run_lanes()
            logger.info("worker stopped", extra={"worker_id": self.worker_id})
        finally:
            self._running = False

    async def _run_lanes(self) -> None:
        """Run every lane at once. One that fails cancels the others (each reports its job
        first), and its exception is raised: the worker stops loudly rather than running
        with fewer slots than it says."""
        try:
            async with asyncio.TaskGroup() as lanes:
                for lane in self._lanes:
                    lanes.create_task(self._run(lane), name=f"tickwork-worker-slot-{lane.index}")
        except BaseExceptionGroup as group:
            raise group.exceptions[0] from None

    async def _run(self, lane: _Lane) -> None:
        """The reconnect loop of one slot of ``run``."""
        server = self._settings.server
        stopping = self._signals.stopping
        while not stopping.is_set():
            attempt = lane.failed_attempts + 1
            logger.info(
                "connecting to %s (attempt %d)",
                server,
                attempt,
                extra={"worker_id": self.worker_id},
            )
            try:
                await self._connect(lane)
            except StreamBroken as exc:
                reason = str(exc)
            else:
                break  # stopped
            if stopping.is_set():
                logger.info("connection to %s ended while stopping: %s", server, reason)
                break
            lane.failed_attempts += 1
            delay_s = self._backoff_s(lane.failed_attempts)
            logger.warning(
                "connection to %s failed or broke (%s); reconnecting in %.2f s (attempt %d)",
                server,
                reason,
                delay_s,
                lane.failed_attempts + 1,
                extra={"worker_id": self.worker_id},
            )
            await wait_any([stopping], timeout_s=delay_s)
        unacked = lane.reporter.unacked
        if unacked is not None:
            logger.warning(
                "stopped without an ack for the outcome of job %d: the server recovers the "
                "job when its lease expires",
                unacked.job_id,
                extra={"worker_id": self.worker_id, "job_id": unacked.job_id},
            )

    def _backoff_s(self, failures: int) -> float:
        """Return the delay before the next connection attempt.

        Args:
            failures (int): consecutive failed attempts so far, >= 1.

        Returns:
            float: seconds, ``base * 2**(failures-1)`` capped, then a random value between
            half of it and all of it (jitter, so restarted workers do not reconnect in step).
        """
        base_s = self._settings.reconnect_backoff_base_s
        cap_s = self._settings.reconnect_backoff_cap_s
        delay_s = min(cap_s, base_s * 2.0 ** min(failures - 1, 60))
        return random.uniform(delay_s / 2, delay_s)

    async def _connect(self, lane: _Lane) -> None:
        """Open one stream of ``lane`` and serve it in a session until ``stop()``.

        Raises:
            StreamBroken: the server was unreachable or the stream broke.
        """
        async with aio_channel(self._settings.server, self._settings.tls, KEEPALIVE) as channel:
            stub = worker_pb2_grpc.WorkerServiceStub(channel)
            session = lane.session = Session(
                settings=self._settings,
                worker_id=self.worker_id,
                signals=self._signals,
                reporter=lane.reporter,
                stub=stub,
                metadata=self._metadata,
            )
            conn = Connection(stub.Connect(None, metadata=self._metadata), session.on_abort)
            graceful = False
            try:
                await session.serve(conn)
                graceful = True
            finally:
                if session.welcomed:
                    lane.failed_attempts = 0
                lane.session = None
                await shielded(conn.close(graceful))


async def run_worker(settings: WorkerSettings) -> None:
    """Run a worker until it is stopped, or until the calling task is cancelled.

    Cancelling the task that awaits this is a graceful stop: the worker stops polling, the
    running job gets the shutdown grace, its outcome is reported, then CancelledError is
    re-raised. Signals are not handled here (``worker_svc.main`` does that), so a process
    that embeds a worker keeps control of them.

    Args:
        settings (WorkerSettings): the worker's settings.

    Raises:
        asyncio.CancelledError: the calling task was cancelled (after the graceful stop).
    """
    worker = Worker(settings)
    run = asyncio.create_task(worker.run(), name="tickwork-worker")
    try:
        await asyncio.shield(run)
    except asyncio.CancelledError:
        worker.stop()
        await asyncio.wait([run])
        if not run.cancelled() and run.exception() is not None:
            logger.error("the worker failed while stopping", exc_info=run.exception())
        raise
