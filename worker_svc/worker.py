"""The worker loop: connect, poll, run one job at a time, heartbeat, report, reconnect.

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
5. A synchronous ``python`` function whose job timed out or was aborted may still be
   running in its thread after the Outcome (it was asked to stop, and stops at its next
   Python instruction, or never if it swallows the exception). Until it has returned the
   worker asks for no job (the Outcome has no ``poll_next``, and no PollJob is sent), so
   that two jobs never run at once; it sends ``CancelPoll`` (no poll is pending, so the
   server ignores it) every heartbeat interval, to keep being heard from, and warns in
   its log at once and every minute.

When the stream breaks, the running job is stopped (its lease expires on the server, which
recovers the job) and the worker reconnects with exponential backoff and jitter. On
``stop()`` the worker polls no more (a poll already sent is cancelled with ``CancelPoll``,
which the server answers at once), lets the running job finish within the shutdown grace,
then aborts it, reports its outcome, closes the stream and returns.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import socket
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from google.protobuf import struct_pb2

from tickwork._channel import aio_channel, auth_metadata
from tickwork.structs import struct_to_dict
from tickwork.v1 import job_pb2, worker_pb2, worker_pb2_grpc
from worker_svc._connection import Connection, StreamBroken
from worker_svc._flag import Flag, wait_any
from worker_svc._job_output import (
    JobOutput,
    as_text,
    exception_text,
    reported_error,
    reported_tail,
    type_name,
)
from worker_svc.handlers import (
    AbandonedCall,
    JobContext,
    JobFailed,
    abandoned_calls,
    get_handler,
    handler_names,
)
from worker_svc.settings import WorkerSettings

__all__ = ["Worker", "run_worker"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

_DEFAULT_HEARTBEAT_INTERVAL_S = 5.0
"""Used when the server's Welcome gives no usable heartbeat interval."""
_POLL_DRAIN_MARGIN_S = 1.0
"""A stopping worker waits this much longer than the poll interval for its last poll's answer."""
_ABANDONED_WARNING_INTERVAL_S = 60.0
"""While the worker waits for an abandoned function to return, it warns this often."""

_ABORT_SHUTDOWN = "worker shutting down"
_ABORT_CANCELLED = "worker cancelled"
_ABORT_STREAM_LOST = "connection to the server lost"

Request = worker_pb2.ConnectRequest
Response = worker_pb2.ConnectResponse


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
connection (``scheduler_svc.server.PING_EVERY_S`` + ``PING_TIMEOUT_S``, 10 s) and gives
the worker lease to a standby. Without it, nothing told the worker: the service sends
nothing while a job runs. The service accepts these pings
(``scheduler_svc.server.SERVER_OPTIONS``)."""


def _new_worker_id() -> str:
    """Return ``"host:pid:uuid8"``, unique to this worker object.

    Returns:
        str: the worker id sent in Hello.
    """
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


async def _shielded(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coro`` to completion even if the caller is cancelled meanwhile.

    Args:
        coro (Coroutine[Any, Any, _T]): the work that must not be interrupted.

    Returns:
        _T: its result.

    Raises:
        asyncio.CancelledError: the caller was cancelled; raised after ``coro`` finished
            (unless the caller is cancelled a second time while waiting for it).
        Exception: whatever ``coro`` raised.
    """
    task = asyncio.ensure_future(coro)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if not task.done():
            await asyncio.wait([task])
        raise


class _JobCalls:
    """The ServiceCalls of one running job: WorkerService calls naming its lease."""

    def __init__(
        self,
        stub: worker_pb2_grpc.WorkerServiceAsyncStub,
        job_id: int,
        lease_token: str,
        metadata: tuple[tuple[str, str], ...],
    ) -> None:
        self._stub = stub
        self._job_id = job_id
        self._lease_token = lease_token
        self._metadata = metadata

    async def purge_history(self) -> worker_pb2.PurgeHistoryResponse:
        request = worker_pb2.PurgeHistoryRequest(job_id=self._job_id, lease_token=self._lease_token)
        response: worker_pb2.PurgeHistoryResponse = await self._stub.PurgeHistory(
            request, metadata=self._metadata
        )
        return response


@dataclass(frozen=True)
class _Result:
    """How a job ended, as reported in Outcome."""

    status: job_pb2.JobStatus
    error: str
    output_tail: str


@dataclass
class _RunningJob:
    """The job being run: its handler task and why it was aborted, if it was."""

    job_id: int
    task: asyncio.Task[_Result]
    log_extra: dict[str, Any]
    abort_reason: str | None = None


class _Pump:
    """A running job's heartbeat-and-output task (:meth:`Worker._pump`), started only once
    its first heartbeat or output batch is due: a job that ends sooner costs no task."""

    def __init__(self, start: Callable[[], asyncio.Task[None]], due: float) -> None:
        self._start = start
        self._due = due
        self.task: asyncio.Task[None] | None = None

    def start_if_due(self, now: float) -> float | None:
        """Start the task if it is due at ``now`` (event loop time); return the seconds
        until it is due while it is not started, None once it is."""
        if self.task is not None:
            return None
        if now < self._due:
            return self._due - now
        self.task = self._start()
        return None

    def ended(self) -> bool:
        """Whether the task ran and ended (it only ends by failing, or when stopped)."""
        return self.task is not None and self.task.done()

    def error(self) -> BaseException | None:
        """The exception the ended task raised, if it raised one."""
        if self.task is None or not self.task.done() or self.task.cancelled():
            return None
        return self.task.exception()

    async def stop(self) -> None:
        """Cancel the task, if started, and wait for it to end."""
        if self.task is not None:
            self.task.cancel()
            await asyncio.wait([self.task])


def _attribute(value: object, name: str) -> tuple[bool, object]:
    """Read ``value.name`` without raising.

    Returns:
        tuple[bool, object]: (True, the value), or (False, None) when reading it raised.
    """
    try:
        return True, getattr(value, name)
    except Exception:
        return False, None


def _succeeded(handler_name: str, result: object, output: JobOutput) -> _Result:
    """The outcome of a handler's ``run`` that returned ``result``: SUCCEEDED with its
    ``output_tail`` when that is a str (a HandlerResult, or any object that has one);
    otherwise FAILED, the error naming what the handler returned.

    Args:
        handler_name (str): the handler, for the error.
        result (object): what ``run`` returned.
        output (JobOutput): the job's output, for the tail of a failure.

    Returns:
        _Result: the outcome.
    """
    has_tail, tail = _attribute(result, "output_tail")
    if not has_tail:
        error = f"handler {handler_name!r} returned {type_name(result)}, expected HandlerResult"
        return _Result(job_pb2.JOB_STATUS_FAILED, error, output.tail())
    if not isinstance(tail, str):
        error = (
            f"handler {handler_name!r} returned a {type_name(result)} whose output_tail is "
            f"{type_name(tail)}, expected str"
        )
        return _Result(job_pb2.JOB_STATUS_FAILED, error, as_text(tail))
    return _Result(job_pb2.JOB_STATUS_SUCCEEDED, "", tail)


def _failed(handler_name: str, exc: JobFailed) -> _Result:
    """The FAILED outcome of a handler's ``run`` that raised ``exc``: its ``error`` and
    ``output_tail``; where either is not a str, the error says so.

    Args:
        handler_name (str): the handler, for the error.
        exc (JobFailed): what ``run`` raised.

    Returns:
        _Result: the outcome.
    """
    raised = f"handler {handler_name!r} raised {type_name(exc)}"
    has_error, error = _attribute(exc, "error")
    has_tail, tail = _attribute(exc, "output_tail")
    if isinstance(error, str):
        text = error
    else:
        what = type_name(error) if has_error else "missing"
        text = f"{raised} whose error is {what}, expected str"
        if as_text(error):
            text += f": {as_text(error)}"
    if has_tail and not isinstance(tail, str):
        text += f"\n{raised} whose output_tail is {type_name(tail)}, expected str"
    return _Result(job_pb2.JOB_STATUS_FAILED, text, as_text(tail))


class Worker:
    """A tickwork worker: one stream to the scheduler service, one job at a time.

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
        self._stopping = Flag()
        self._abort_now = Flag()
        self._job: _RunningJob | None = None
        self._unacked: Request.Outcome | None = None
        """An Outcome sent on a stream that broke before its OutcomeAck came."""
        self._early_aborts: dict[int, str] = {}
        self._failed_attempts = 0
        self._running = False
        self._metadata = auth_metadata(settings.token)
        self._stub: worker_pb2_grpc.WorkerServiceAsyncStub | None = None
        self._waiting_for: AbandonedCall | None = None
        """The abandoned call the last "waits for" warning named."""
        self._next_waiting_warning = 0.0
        """When to warn again that it still runs, ``time.monotonic()``."""

    @property
    def settings(self) -> WorkerSettings:
        """The worker's settings."""
        return self._settings

    def stop(self, abort_running: bool = False) -> None:
        """Ask the worker to stop; ``run`` returns once the running job was reported.

        No new job is polled for. The running job may finish within the shutdown grace
        (``settings.shutdown_grace_s``), then it is aborted; either way its outcome is
        reported before the stream is closed. Idempotent; call it from the event loop thread.

        Args:
            abort_running (bool): abort the running job now instead of after the grace (a
                second SIGINT, for instance).
        """
        if not self._stopping.is_set():
            logger.info("worker stopping", extra={"worker_id": self.worker_id})
        self._stopping.set()
        if abort_running:
            self._abort_now.set()
            if self._job is not None:
                self._abort(self._job, _ABORT_SHUTDOWN)

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
        try:
            await self._run()
        finally:
            self._running = False

    async def _run(self) -> None:
        """The reconnect loop of ``run``."""
        server = self._settings.server
        while not self._stopping.is_set():
            attempt = self._failed_attempts + 1
            logger.info(
                "connecting to %s (attempt %d)",
                server,
                attempt,
                extra={"worker_id": self.worker_id},
            )
            try:
                await self._session()
            except StreamBroken as exc:
                reason = str(exc)
            else:
                break  # stopped
            if self._stopping.is_set():
                logger.info("connection to %s ended while stopping: %s", server, reason)
                break
            self._failed_attempts += 1
            delay_s = self._backoff_s(self._failed_attempts)
            logger.warning(
                "connection to %s failed or broke (%s); reconnecting in %.2f s (attempt %d)",
                server,
                reason,
                delay_s,
                self._failed_attempts + 1,
                extra={"worker_id": self.worker_id},
            )
            await wait_any([self._stopping], timeout_s=delay_s)
        if self._unacked is not None:
            logger.warning(
                "stopped without an ack for the outcome of job %d: the server recovers the "
                "job when its lease expires",
                self._unacked.job_id,
                extra={"worker_id": self.worker_id, "job_id": self._unacked.job_id},
            )
        logger.info("worker stopped", extra={"worker_id": self.worker_id})

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

    async def _session(self) -> None:
        """Open one stream and serve it until ``stop()``.

        Raises:
            StreamBroken: the server was unreachable or the stream broke.
        """
        self._early_aborts.clear()
        async with aio_channel(self._settings.server, self._settings.tls, KEEPALIVE) as channel:
            stub = self._stub = worker_pb2_grpc.WorkerServiceStub(channel)
            conn = Connection(stub.Connect(None, metadata=self._metadata), self._on_abort)
            graceful = False
            try:
                await self._serve(conn)
                graceful = True
            finally:
                await _shielded(conn.close(graceful))

    async def _serve(self, conn: Connection) -> None:
        """Say Hello, then poll and run jobs until stopped.

        Args:
            conn (Connection): the fresh stream.

        Raises:
            StreamBroken: the stream broke, or the server did not answer Hello in time.
        """
        allowed = self._settings.handlers
        handlers = [h for h in handler_names() if not allowed or h in allowed]
        await conn.send(
            Request(
                hello=Request.Hello(
                    worker_id=self.worker_id,
                    handlers=list(handlers),
                    next_job_in_outcome_ack=True,
                )
            )
        )
        answer = await conn.receive(self._settings.handshake_timeout_s, self._stopping)
        if answer is None:
            if self._stopping.is_set():
                return
            raise StreamBroken(f"no Welcome within {self._settings.handshake_timeout_s} s of Hello")
        if answer.WhichOneof("message") != "welcome":
            raise StreamBroken(f"expected Welcome, got {answer.WhichOneof('message')}")
        welcome = answer.welcome
        self._failed_attempts = 0
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
        active = welcome.active
        logger.info(
            "connected to %s as the %s worker (heartbeat every %.2f s, lease %.2f s, handlers %s)",
            self._settings.server,
            "active" if active else "standby",
            heartbeat_interval_s,
            welcome.lease_ttl_seconds,
            ", ".join(handlers),
            extra={"worker_id": self.worker_id},
        )
        await self._report_again(conn)
        polled = False  # the last Outcome asked for the next job (poll_next), unanswered
        next_job: Response.AssignJob | None = None  # the last OutcomeAck carried it
        # A poll already sent is answered even when stop() came meanwhile: the server may
        # have leased the next job in the very transaction that recorded the outcome, and
        # that job must run (under the shutdown grace), not wait out its lease.
        while next_job is not None or polled or not self._stopping.is_set():
            if next_job is not None:
                assign, next_job = next_job, None
            else:
                if not polled:
                    if abandoned_calls():
                        await self._wait_for_abandoned(conn, heartbeat_interval_s)
                        continue  # stop() may have come meanwhile
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
                    "this worker is now the active one", extra={"worker_id": self.worker_id}
                )
            polled, next_job = await self._run_job(conn, assign, heartbeat_interval_s)

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
        loop = asyncio.get_running_loop()
        deadline: float | None = None
        while True:
            if deadline is None and self._stopping.is_set():
                if not active:
                    return None
                # The server answers at once (NoJob, or the job it already took for us).
                await conn.send(Request(cancel_poll=Request.CancelPoll()))
                deadline = loop.time() + self._settings.poll_interval_s + _POLL_DRAIN_MARGIN_S
            if deadline is None:
                wait_s = self._settings.poll_interval_s + _POLL_DRAIN_MARGIN_S
                answer = await conn.receive(wait_s, self._stopping)
                if answer is None and not self._stopping.is_set():
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

    async def _wait_for_abandoned(self, conn: Connection, heartbeat_interval_s: float) -> None:
        """Wait until no abandoned function of an ended job runs any more, or ``stop()``.

        A synchronous ``python`` function whose job timed out or was aborted was asked to
        stop, but stops only at its next Python instruction (a long C call returns first),
        or never if it swallows the exception: until it has returned the worker takes no
        other job, so that two jobs never run at once. Meanwhile it sends CancelPoll (no
        poll is pending: the server ignores it) every heartbeat interval, so that the
        server keeps hearing from it, and warns at once and every minute. On ``stop()`` it
        returns at once: the function's thread is a daemon thread, it ends with the process.

        Args:
            conn (Connection): the stream.
            heartbeat_interval_s (float): seconds between keepalives, > 0.

        Raises:
            StreamBroken: the stream broke.
        """
        keepalive = Request(cancel_poll=Request.CancelPoll())
        loop = asyncio.get_running_loop()
        next_keepalive = loop.time() + heartbeat_interval_s
        while calls := abandoned_calls():
            if self._stopping.is_set():
                logger.info(
                    "stopping while %s of job %d still runs",
                    calls[0].target,
                    calls[0].job_id,
                    extra={"worker_id": self.worker_id, "job_id": calls[0].job_id},
                )
                return
            if conn.broken.is_set():
                await conn.send(keepalive)  # raises the stream's StreamBroken
            self._warn_waiting(calls)
            if loop.time() >= next_keepalive:
                await conn.send(keepalive)
                next_keepalive = loop.time() + heartbeat_interval_s
            timeout_s = min(
                next_keepalive - loop.time(), self._next_waiting_warning - time.monotonic()
            )
            await wait_any(
                [self._stopping, conn.broken],
                [call.returned for call in calls],
                max(0.0, timeout_s),
            )

    def _warn_waiting(self, calls: list[AbandonedCall]) -> None:
        """Warn that the worker waits for ``calls[0]``: when it is a new one, then every
        minute with the seconds since its job gave up on it."""
        call = calls[0]
        now = time.monotonic()
        more = f" (and {len(calls) - 1} more)" if len(calls) > 1 else ""
        extra = {"worker_id": self.worker_id, "job_id": call.job_id}
        if call is not self._waiting_for:
            self._waiting_for = call
            self._next_waiting_warning = now + _ABANDONED_WARNING_INTERVAL_S
            logger.warning(
                "the worker waits for %s of job %d%s to return before taking another job "
                "(it was asked to stop)",
                call.target,
                call.job_id,
                more,
                extra=extra,
            )
        elif now >= self._next_waiting_warning:
            self._next_waiting_warning = now + _ABANDONED_WARNING_INTERVAL_S
            logger.warning(
                "the worker still waits for %s of job %d%s to return before taking another "
                "job (%.0f s since it was asked to stop)",
                call.target,
                call.job_id,
                more,
                now - call.since,
                extra=extra,
            )

    def _on_abort(self, job_id: int, reason: str) -> None:
        """Handle AbortJob from the server (called by the stream reader, at once).

        Args:
            job_id (int): the job to stop.
            reason (str): why, e.g. ``"aborted by operator"``.
        """
        reason = reason or "aborted"
        job = self._job
        if job is not None and job.job_id == job_id:
            self._abort(job, reason)
            return
        # The AssignJob may still be queued for the main loop: remember the abort for it.
        logger.info(
            "AbortJob for job %d, which is not running: %s",
            job_id,
            reason,
            extra={"job_id": job_id},
        )
        self._early_aborts[job_id] = reason

    def _abort(self, job: _RunningJob, reason: str) -> None:
        """Cancel the job's handler task once; the handler stops its work and re-raises.

        Args:
            job (_RunningJob): the running job.
            reason (str): reported as the Outcome's error.
        """
        if job.abort_reason is not None or job.task.done():
            return
        job.abort_reason = reason
        logger.info("aborting job %d: %s", job.job_id, reason, extra=job.log_extra)
        job.task.cancel()

    async def _run_job(
        self, conn: Connection, assign: Response.AssignJob, heartbeat_interval_s: float
    ) -> tuple[bool, Response.AssignJob | None]:
        """Run one assigned job and report its outcome; unless the worker is stopping, the
        Outcome also asks for the next job (poll_next).

        Args:
            conn (Connection): the stream.
            assign (Response.AssignJob): the job.
            heartbeat_interval_s (float): seconds between heartbeats, > 0.

        Returns:
            tuple[bool, Response.AssignJob | None]: whether the Outcome's poll for the next
            job is still to be answered (the answer comes next), and the next job when the
            OutcomeAck carried it.

        Raises:
            StreamBroken: the stream broke (the job was stopped; its lease will expire).
            asyncio.CancelledError: the worker was cancelled (the job was aborted and its
                outcome reported first).
        """
        job = assign.job
        extra: dict[str, Any] = {
            "job_id": job.id,
            "task_id": job.task_id,
            "task_name": job.task_name,
        }
        output = JobOutput()
        ctx = JobContext(
            job_id=job.id,
            task_id=job.task_id,
            task_name=job.task_name,
            attempt=job.attempt,
            timeout_s=assign.timeout_seconds or None,
            log=output.add,
            abort_grace_s=self._settings.abort_grace_s,
            service=(
                _JobCalls(self._stub, job.id, assign.lease_token, self._metadata)
                if self._stub is not None
                else None
            ),
        )
        logger.info(
            "running job %d of task %r (attempt %d) with handler %r",
            job.id,
            job.task_name,
            job.attempt,
            assign.handler,
            extra=extra,
        )
        task = asyncio.create_task(
            self._execute(assign.handler, assign.params, ctx, output),
            name=f"tickwork-job-{job.id}",
        )
        running = _RunningJob(job.id, task, extra)
        self._job = running
        early_reason = self._early_aborts.pop(job.id, None)
        self._early_aborts.clear()
        if early_reason is not None:
            self._abort(running, early_reason)
        elif self._abort_now.is_set():
            self._abort(running, _ABORT_SHUTDOWN)
        loop = asyncio.get_running_loop()
        started = loop.time()

        def start_pump() -> asyncio.Task[None]:
            return asyncio.create_task(
                self._pump(conn, job.id, assign.lease_token, output, heartbeat_interval_s, started),
                name=f"tickwork-job-{job.id}-pump",
            )

        # Most jobs of a busy queue end sooner: the pump starts when its first heartbeat or
        # output batch is due, not with every job.
        first_due = min(self._settings.log_flush_interval_s, heartbeat_interval_s)
        pump = _Pump(start_pump, started + first_due)
        cancelled = False
        next_job: Response.AssignJob | None = None
        try:
            try:
                await self._supervise(conn, running, pump)
            except asyncio.CancelledError:
                # The worker itself is being cancelled: still stop the job and report it.
                cancelled = True
                self._abort(running, _ABORT_CANCELLED)
                await _shielded(asyncio.wait([task]))
            finally:
                await pump.stop()
            result = self._result(running)
            logger.info(
                "job %d ended %s%s",
                job.id,
                job_pb2.JobStatus.Name(result.status),
                f": {result.error}" if result.error else "",
                extra=extra,
            )
            # No next job while the job's function still runs (see _wait_for_abandoned).
            poll_next = not (cancelled or self._stopping.is_set() or abandoned_calls())
            try:
                next_job = await _shielded(
                    self._report(conn, job.id, assign.lease_token, output, result, poll_next)
                )
            except StreamBroken as exc:
                if not cancelled:
                    raise
                logger.warning("could not report job %d: %s", job.id, exc, extra=extra)
        finally:
            self._job = None
        if cancelled:
            raise asyncio.CancelledError
        return poll_next and next_job is None, next_job

    async def _supervise(self, conn: Connection, running: _RunningJob, pump: _Pump) -> None:
        """Wait for the job's handler task to end, applying stop and stream breaks.

        Args:
            conn (Connection): the stream.
            running (_RunningJob): the job.
            pump (_Pump): its heartbeat and log task, started here when due.

        Raises:
            StreamBroken: the stream broke; the job was aborted and has ended.
        """
        loop = asyncio.get_running_loop()
        grace_deadline: float | None = None  # set when stop() is noticed
        while not running.task.done():
            not_aborted = running.abort_reason is None
            flags = [conn.broken]
            if not_aborted:
                flags.append(self._abort_now)
                if grace_deadline is None:
                    flags.append(self._stopping)
            timeout_s = pump.start_if_due(loop.time())
            if not_aborted and grace_deadline is not None:
                grace_s = max(0.0, grace_deadline - loop.time())
                timeout_s = grace_s if timeout_s is None else min(timeout_s, grace_s)
            futures = [running.task] if pump.task is None else [running.task, pump.task]
            await wait_any(flags, futures, timeout_s)
            if running.task.done():
                return
            if conn.broken.is_set() or pump.ended():
                self._abort(running, _ABORT_STREAM_LOST)
                await asyncio.wait([running.task])
                error = pump.error()
                if error is not None and not isinstance(error, StreamBroken):
                    raise error  # a bug in the pump: stop the worker loudly
                raise StreamBroken(
                    f"{error or 'the stream broke'} (job {running.job_id} was stopped)"
                )
            if running.abort_reason is not None:
                continue
            if self._abort_now.is_set():
                self._abort(running, _ABORT_SHUTDOWN)
            elif grace_deadline is None and self._stopping.is_set():
                grace_s = self._settings.shutdown_grace_s
                grace_deadline = loop.time() + grace_s
                logger.info(
                    "letting job %d finish within %.1f s before aborting it",
                    running.job_id,
                    grace_s,
                    extra=running.log_extra,
                )
            elif grace_deadline is not None and loop.time() >= grace_deadline:
                self._abort(running, _ABORT_SHUTDOWN)

    def _result(self, running: _RunningJob) -> _Result:
        """Return the Outcome of the ended job.

        A job whose abort was requested is ABORTED unless it succeeded before the abort
        took effect.

        Args:
            running (_RunningJob): the job; its task is done.

        Returns:
            _Result: status, error and output tail.
        """
        aborted = _Result(job_pb2.JOB_STATUS_ABORTED, running.abort_reason or "aborted", "")
        if running.task.cancelled():
            return aborted
        result = running.task.result()
        if running.abort_reason is not None and result.status != job_pb2.JOB_STATUS_SUCCEEDED:
            return _Result(aborted.status, aborted.error, result.output_tail)
        return result

    async def _execute(
        self, handler_name: str, params: struct_pb2.Struct, ctx: JobContext, output: JobOutput
    ) -> _Result:
        """Run the handler; turn its result or error into a ``_Result``.

        A handler that breaks its contract (see :class:`worker_svc.handlers.Handler`) fails
        its job, not the worker: when it returned something else than a HandlerResult with
        a str ``output_tail``, raised JobFailed whose ``error`` or ``output_tail`` is not a
        str, or raised any other exception, ``SystemExit`` and ``GeneratorExit`` included.
        Only ``asyncio.CancelledError`` of an abort (this task was cancelled) and
        ``KeyboardInterrupt`` go through; a CancelledError the handler lets out of something
        it awaited, with no abort asked, fails the job.

        Args:
            handler_name (str): the handler to look up.
            params (struct_pb2.Struct): its parameters.
            ctx (JobContext): the job.
            output (JobOutput): the job's output, for the tail when the handler gives none.

        Returns:
            _Result: SUCCEEDED, or FAILED with the error (``"UnknownHandler: ..."``,
            ``JobFailed.error``, ``"<ExceptionType>: ..."`` for a handler bug, or
            ``"handler 'NAME' ..."`` naming how the handler broke its contract).

        Raises:
            asyncio.CancelledError: the job was aborted.
            KeyboardInterrupt: raised in the handler; it stops the worker as Ctrl-C does.
        """
        allowed = self._settings.handlers
        if allowed and handler_name not in allowed:
            return _Result(
                job_pb2.JOB_STATUS_FAILED,
                f"handler {handler_name!r} is not allowed on this worker (WORKER_HANDLERS: "
                f"{', '.join(allowed)})",
                "",
            )
        try:
            handler = get_handler(handler_name)
        except LookupError as exc:
            return _Result(job_pb2.JOB_STATUS_FAILED, exception_text(exc), "")
        try:
            result = await handler.run(struct_to_dict(params), ctx)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is None or task.cancelling():
                raise  # an abort: _abort cancelled this task
            # The handler let out the CancelledError of something it awaited (a task
            # someone else cancelled): a failure of the job, which may be retried, not an
            # abort nobody asked for.
            self._log_crash(handler_name, ctx)
            error = f"handler {handler_name!r} raised CancelledError, but no abort was asked"
            return _Result(job_pb2.JOB_STATUS_FAILED, error, output.tail())
        except KeyboardInterrupt:
            raise
        except JobFailed as exc:
            return _failed(handler_name, exc)
        except Exception as exc:
            self._log_crash(handler_name, ctx)
            return _Result(job_pb2.JOB_STATUS_FAILED, exception_text(exc), output.tail())
        except BaseException as exc:  # SystemExit, GeneratorExit, a library's own
            self._log_crash(handler_name, ctx)
            error = f"handler {handler_name!r} raised {exception_text(exc)}"
            return _Result(job_pb2.JOB_STATUS_FAILED, error, output.tail())
        return _succeeded(handler_name, result, output)

    def _log_crash(self, handler_name: str, ctx: JobContext) -> None:
        """Log the exception being handled, with its traceback, as a handler crash."""
        logger.exception(
            "handler %r crashed on job %d",
            handler_name,
            ctx.job_id,
            extra={"job_id": ctx.job_id, "task_id": ctx.task_id},
        )

    async def _pump(
        self,
        conn: Connection,
        job_id: int,
        lease_token: str,
        output: JobOutput,
        heartbeat_interval_s: float,
        started: float,
    ) -> None:
        """While the job runs: send Heartbeat every interval and LogLines batches.

        Args:
            conn (Connection): the stream.
            job_id (int): the job.
            lease_token (str): its lease token.
            output (JobOutput): its output.
            heartbeat_interval_s (float): seconds between heartbeats.
            started (float): when the job started, event loop time (the first heartbeat
                is due an interval after it).

        Raises:
            StreamBroken: the stream broke.
        """
        loop = asyncio.get_running_loop()
        flush_s = self._settings.log_flush_interval_s
        next_heartbeat = started + heartbeat_interval_s
        heartbeat = Request(heartbeat=Request.Heartbeat(job_id=job_id, lease_token=lease_token))
        while True:
            if loop.time() >= next_heartbeat:
                await conn.send(heartbeat)
                next_heartbeat = loop.time() + heartbeat_interval_s
            await self._send_output(conn, job_id, lease_token, output)
            await asyncio.sleep(max(0.0, min(flush_s, next_heartbeat - loop.time())))

    async def _send_output(
        self, conn: Connection, job_id: int, lease_token: str, output: JobOutput
    ) -> None:
        """Send the job's pending output lines as LogLines messages.

        Args:
            conn (Connection): the stream.
            job_id (int): the job.
            lease_token (str): its lease token.
            output (JobOutput): its output.

        Raises:
            StreamBroken: the stream broke.
        """
        for stream, lines in output.take_batches():
            await conn.send(
                Request(
                    log_lines=Request.LogLines(
                        job_id=job_id, lease_token=lease_token, stream=stream, lines=lines
                    )
                )
            )

    async def _report(
        self,
        conn: Connection,
        job_id: int,
        lease_token: str,
        output: JobOutput,
        result: _Result,
        poll_next: bool,
    ) -> Response.AssignJob | None:
        """Send the last output lines and the Outcome, then wait for OutcomeAck.

        Until the OutcomeAck comes, the Outcome is kept: if the stream breaks first, it is
        reported again on the next stream (see :meth:`_report_again`).

        Args:
            conn (Connection): the stream.
            job_id (int): the job.
            lease_token (str): its lease token.
            output (JobOutput): its output (lines not sent yet go first).
            result (_Result): the outcome.
            poll_next (bool): the Outcome also asks for the next job.

        Returns:
            Response.AssignJob | None: the next job, when the OutcomeAck carried it (the
            answer to ``poll_next``; the Hello said this worker reads it there).

        Raises:
            StreamBroken: the stream broke, or no OutcomeAck came within
                ``settings.outcome_ack_timeout_s``.
        """
        await self._send_output(conn, job_id, lease_token, output)
        outcome = Request.Outcome(
            job_id=job_id,
            lease_token=lease_token,
            status=result.status,
            error=reported_error(result.error),
            output_tail=reported_tail(result.output_tail or output.tail()),
            poll_next=poll_next,
        )
        self._unacked = outcome
        await conn.send(Request(outcome=outcome))
        ack = await self._outcome_ack(conn, job_id)
        self._unacked = None
        return ack.next_job if ack.HasField("next_job") else None

    async def _report_again(self, conn: Connection) -> None:
        """Report the Outcome whose OutcomeAck the last stream never brought, before
        anything else on this one (without poll_next). The server may have recorded it or
        not: a repeat under the same lease token changes nothing, and an outcome whose
        lease expired meanwhile is kept as late.

        Raises:
            StreamBroken: the stream broke again (the outcome is kept for the next one).
        """
        outcome = self._unacked
        if outcome is None:
            return
        logger.info(
            "reporting the outcome of job %d again: the last stream broke before its ack",
            outcome.job_id,
            extra={"job_id": outcome.job_id},
        )
        again = Request.Outcome()
        again.CopyFrom(outcome)
        again.poll_next = False
        await conn.send(Request(outcome=again))
        await self._outcome_ack(conn, outcome.job_id)
        self._unacked = None

    async def _outcome_ack(self, conn: Connection, job_id: int) -> Response.OutcomeAck:
        """Wait for the OutcomeAck of ``job_id`` (warning when it was recorded as late).

        Raises:
            StreamBroken: the stream broke, or no OutcomeAck came within
                ``settings.outcome_ack_timeout_s``.
        """
        extra = {"job_id": job_id}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._settings.outcome_ack_timeout_s
        while True:
            answer = await conn.receive(max(0.0, deadline - loop.time()))
            if answer is None:
                raise StreamBroken(
                    f"no OutcomeAck for job {job_id} within "
                    f"{self._settings.outcome_ack_timeout_s} s"
                )
            if (
                answer.WhichOneof("message") == "outcome_ack"
                and answer.outcome_ack.job_id == job_id
            ):
                if not answer.outcome_ack.accepted:
                    logger.warning(
                        "the outcome of job %d was recorded as late (its lease had been lost)",
                        job_id,
                        extra=extra,
                    )
                return answer.outcome_ack
            logger.warning(
                "ignoring an unexpected %s while waiting for the OutcomeAck of job %d",
                answer.WhichOneof("message"),
                job_id,
                extra=extra,
            )


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
