"""One stream session of the worker: Hello and Welcome, polling, assignments, aborts.

The session says Hello, reports again an Outcome the last stream left unacknowledged, then
polls for jobs and hands each AssignJob to a :class:`~worker_svc._supervisor.JobSupervisor`
until the worker stops or the stream breaks. AbortJob goes to the supervisor of its job;
one that arrives before its AssignJob is kept for it. Each Outcome is reported through the
worker's :class:`~worker_svc._outcome.OutcomeReporter`; unless the worker is stopping, it
also asks for the next job (``poll_next``).
"""

from __future__ import annotations

import asyncio
import logging

from tickwork.v1 import worker_pb2, worker_pb2_grpc
from worker_svc._connection import Connection, StreamBroken
from worker_svc._execute import JobCalls
from worker_svc._outcome import OutcomeReporter
from worker_svc._shield import shielded
from worker_svc._supervisor import JobSupervisor, StopSignals
from worker_svc.handlers import handler_names
from worker_svc.handlers._guard import watch as watch_guard
from worker_svc.settings import WorkerSettings

__all__ = ["Session"]

logger = logging.getLogger(__name__)

_DEFAULT_HEARTBEAT_INTERVAL_S = 5.0
"""Used when the server's Welcome gives no usable heartbeat interval."""
_POLL_DRAIN_MARGIN_S = 1.0
"""A stopping worker waits this much longer than the poll interval for its last poll's answer."""

Request = worker_pb2.ConnectRequest
Response = worker_pb2.ConnectResponse


def watchdog_s(lease_ttl_s: float, heartbeat_interval_s: float) -> float:
    """How long the process-group guard lets a job's processes run without a heartbeat of
    this worker, seconds: the lease TTL minus one heartbeat interval, but never less than
    two intervals (nor more than the TTL); 0 (no watchdog) when the TTL is unknown.

    A frozen worker's job processes are so SIGKILLed at most one heartbeat interval (plus
    the guard's 0.1 s check) after the job's lease expired at the service, which holds a
    lost job's retry back for one interval plus a second (docs/guide/jobs.md)."""
    if lease_ttl_s <= 0:
        return 0.0
    return max(lease_ttl_s - heartbeat_interval_s, min(lease_ttl_s, 2 * heartbeat_interval_s))


class Session:
    """The worker's side of one Connect stream; see the module docstring."""

    def __init__(
        self,
        *,
        settings: WorkerSettings,
        worker_id: str,
        signals: StopSignals,
        reporter: OutcomeReporter,
        stub: worker_pb2_grpc.WorkerServiceAsyncStub | None,
        metadata: tuple[tuple[str, str], ...],
    ) -> None:
        """Create the session; :meth:`serve` runs it on a stream.

        Args:
            settings (WorkerSettings): the worker's settings.
            worker_id (str): sent in Hello.
            signals (StopSignals): the worker's stop flags.
            reporter (OutcomeReporter): the worker's outcome reporter (it outlives streams).
            stub (WorkerServiceAsyncStub | None): for the service calls of running jobs.
            metadata (tuple[tuple[str, str], ...]): the calls' metadata (the token).
        """
        self._settings = settings
        self._worker_id = worker_id
        self._signals = signals
        self._reporter = reporter
        self._stub = stub
        self._metadata = metadata
        self._running: dict[int, JobSupervisor] = {}
        self._early_aborts: dict[int, str] = {}
        self.welcomed = False
        """Whether the server answered Hello with Welcome."""

    def abort_all(self, reason: str) -> None:
        """Abort every running job (the worker stops now)."""
        for supervisor in list(self._running.values()):
            supervisor.abort(reason)

    def on_abort(self, job_id: int, reason: str) -> None:
        """Handle AbortJob from the server (called by the stream reader, at once).

        Args:
            job_id (int): the job to stop.
            reason (str): why, e.g. ``"aborted by operator"``.
        """
        reason = reason or "aborted"
        supervisor = self._running.get(job_id)
        if supervisor is not None:
            supervisor.abort(reason)
            return
        # The AssignJob may still be queued for the main loop: remember the abort for it.
        logger.info(
            "AbortJob for job %d, which is not running: %s",
            job_id,
            reason,
            extra={"job_id": job_id},
        )
        self._early_aborts[job_id] = reason

    async def serve(self, conn: Connection) -> None:
        """Say Hello, then poll and run jobs until stopped.

        Args:
            conn (Connection): the fresh stream; its ``on_abort`` is :meth:`on_abort`.

        Raises:
            StreamBroken: the stream broke, or the server did not answer Hello in time.
            asyncio.CancelledError: the worker was cancelled (the running job was aborted
                and its outcome reported first, as far as the stream allowed).
        """
        stopping = self._signals.stopping
        allowed = self._settings.handlers
        handlers = [h for h in handler_names() if not allowed or h in allowed]
        await conn.send(
            Request(
                hello=Request.Hello(
                    worker_id=self._worker_id,
                    handlers=list(handlers),
                    next_job_in_outcome_ack=True,
                    slots=self._settings.slots,
                )
            )
        )
        answer = await conn.receive(self._settings.handshake_timeout_s, stopping)
        if answer is None:
            if stopping.is_set():
                return
            raise StreamBroken(f"no Welcome within {self._settings.handshake_timeout_s} s of Hello")
        if answer.WhichOneof("message") != "welcome":
            raise StreamBroken(f"expected Welcome, got {answer.WhichOneof('message')}")
        welcome = answer.welcome
        self.welcomed = True
        heartbeat_interval_s = welcome.heartbeat_interval_seconds
        if not heartbeat_interval_s > 0:
            heartbeat_interval_s = (
                welcome.lease_ttl_seconds / 3
                if welcome.lease_ttl_seconds > 0
                else _DEFAULT_HEARTBEAT_INTERVAL_S
            )
            logger.warning(
                "Welcome has no heartbeat interval; heartbeating every %.2f s",
                heartbeat_interval_s,
            )
        watch_guard(watchdog_s(welcome.lease_ttl_seconds, heartbeat_interval_s))
        active = welcome.active
        logger.info(
            "connected to %s as the %s worker (heartbeat every %.2f s, lease %.2f s, handlers %s)",
            self._settings.server,
            "active" if active else "standby",
            heartbeat_interval_s,
            welcome.lease_ttl_seconds,
            ", ".join(handlers),
            extra={"worker_id": self._worker_id},
        )
        await self._reporter.report_again(conn)
        polled = False  # the last Outcome asked for the next job (poll_next), unanswered
        next_job: Response.AssignJob | None = None  # the last OutcomeAck carried it
        # A poll already sent is answered even when stop() came meanwhile: the server may
        # have leased the next job in the very transaction that recorded the outcome, and
        # that job must run (under the shutdown grace), not wait out its lease.
        while next_job is not None or polled or not stopping.is_set():
            if next_job is not None:
                assign, next_job = next_job, None
            else:
                if not polled:
                    await conn.send(Request(poll_job=Request.PollJob()))
                answer = await self._poll_answer(conn, active)
                polled = False
                if answer is None:
                    return
                if answer.WhichOneof("message") != "assign_job":
                    continue
                assign = answer.assign_job
            if not active:  # only a job proves it: a standby may be answered NoJob too
                active = True
                logger.info(
                    "this worker is now the active one", extra={"worker_id": self._worker_id}
                )
            polled, next_job = await self._run_job(conn, assign, heartbeat_interval_s)

    async def _run_job(
        self, conn: Connection, assign: Response.AssignJob, heartbeat_interval_s: float
    ) -> tuple[bool, Response.AssignJob | None]:
        """Run one assigned job under its supervisor and report its outcome.

        Returns:
            tuple[bool, Response.AssignJob | None]: whether the Outcome's poll for the next
            job is still to be answered (the answer comes next), and the next job when the
            OutcomeAck carried it.

        Raises:
            StreamBroken: the stream broke (the job was stopped; its lease will expire).
            asyncio.CancelledError: the worker was cancelled (the job was aborted and its
                outcome reported first).
        """
        job_id = assign.job.id
        service = (
            JobCalls(self._stub, job_id, assign.lease_token, self._metadata)
            if self._stub is not None
            else None
        )
        supervisor = JobSupervisor(
            settings=self._settings,
            conn=conn,
            assign=assign,
            heartbeat_interval_s=heartbeat_interval_s,
            signals=self._signals,
            service=service,
        )
        self._running[job_id] = supervisor
        early_reason = self._early_aborts.pop(job_id, None)
        self._early_aborts.clear()
        if early_reason is not None:
            supervisor.abort(early_reason)
        next_job: Response.AssignJob | None = None
        try:
            result = await supervisor.run()
            cancelled = supervisor.cancelled
            poll_next = not (cancelled or self._signals.stopping.is_set())
            try:
                next_job = await shielded(
                    self._reporter.report(
                        conn, job_id, assign.lease_token, supervisor.output, result, poll_next
                    )
                )
            except StreamBroken as exc:
                if not cancelled:
                    raise
                logger.warning(
                    "could not report job %d: %s", job_id, exc, extra=supervisor.log_extra
                )
        finally:
            del self._running[job_id]
        if cancelled:
            raise asyncio.CancelledError
        return poll_next and next_job is None, next_job

    async def _poll_answer(self, conn: Connection, active: bool) -> Response | None:
        """Wait for the answer to a PollJob.

        When ``stop()`` is called meanwhile, an active worker sends CancelPoll and still waits
        for the answer (the server gives it at once; an older server within the poll
        interval and a second): a job assigned at that moment is run under the shutdown
        grace instead of being left to its lease. A standby worker stops at once.
        Otherwise, with no answer within the poll interval and a second, it returns NoJob
        (the caller polls again).

        Args:
            conn (Connection): the stream.
            active (bool): whether the worker is known to be the active one.

        Returns:
            Response | None: NoJob or AssignJob; None when stopping and no answer came.

        Raises:
            StreamBroken: the stream broke.
        """
        stopping = self._signals.stopping
        loop = asyncio.get_running_loop()
        deadline: float | None = None
        while True:
            if deadline is None and stopping.is_set():
                if not active:
                    return None
                # The server answers at once (NoJob, or the job it already took for us).
                await conn.send(Request(cancel_poll=Request.CancelPoll()))
                deadline = loop.time() + self._settings.poll_interval_s + _POLL_DRAIN_MARGIN_S
            if deadline is None:
                wait_s = self._settings.poll_interval_s + _POLL_DRAIN_MARGIN_S
                answer = await conn.receive(wait_s, stopping)
                if answer is None and not stopping.is_set():
                    # No answer within a poll interval: poll again. A server older than
                    # poll_next never answers an Outcome's; a repeated PollJob while one
                    # is pending is ignored by the server.
                    return Response(no_job=Response.NoJob())
            else:
                answer = await conn.receive(max(0.0, deadline - loop.time()))
                if answer is None:
                    logger.info("stopping without an answer to the last poll")
                    return None
            if answer is None:
                continue  # stop() was called: set the deadline
            kind = answer.WhichOneof("message")
            if kind in ("assign_job", "no_job"):
                return answer
            logger.warning("ignoring an unexpected %s while waiting for a job", kind)
