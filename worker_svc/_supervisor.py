"""The supervisor of one running job: its handler, heartbeats, output, abort and stop.

A supervisor is made per AssignJob and serves that job only; the session keeps the
running ones by job id and routes AbortJob to them. While the job runs, the supervisor
heartbeats every heartbeat interval and sends the job's output as LogLines batches; it
applies an abort (from the server, or the worker stopping) by cancelling the handler's
task, lets the job finish within the shutdown grace once the worker stops, and stops the
job when the stream breaks. It never reports the outcome: the session does, through the
:class:`~worker_svc._outcome.OutcomeReporter`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
from collections.abc import Callable
from typing import Any

from tickwork import JobContext as Window
from tickwork.v1 import common_pb2, job_pb2, worker_pb2
from worker_svc._connection import Connection, StreamBroken
from worker_svc._execute import execute
from worker_svc._flag import Flag, wait_any
from worker_svc._job_output import JobOutput
from worker_svc._outcome import JobResult, send_output
from worker_svc._shield import shielded
from worker_svc.handlers import JobContext, ProcessLimits, ServiceCalls
from worker_svc.handlers._environment import base_environment
from worker_svc.handlers._guard import feed as feed_guard
from worker_svc.settings import WorkerSettings

__all__ = [
    "ABORT_CANCELLED",
    "ABORT_SHUTDOWN",
    "ABORT_STREAM_LOST",
    "JobSupervisor",
    "StopSignals",
]

logger = logging.getLogger(__name__)

ABORT_SHUTDOWN = "worker shutting down"
ABORT_CANCELLED = "worker cancelled"
ABORT_STREAM_LOST = "connection to the server lost"

Request = worker_pb2.ConnectRequest
Response = worker_pb2.ConnectResponse


def job_window(assign: Response.AssignJob) -> Window:
    """What the job's processes are told about it (the ``TICKWORK_*`` variables): its
    identity, and for a scheduled job the window it was fired for (a retry keeps its first
    attempt's)."""
    job = assign.job
    scheduled = job.schedule_id != 0 and job.HasField("fire_time")
    trigger = common_pb2.Trigger.Name(job.trigger).removeprefix("TRIGGER_")
    return Window(
        job_id=job.id,
        task_id=job.task_id,
        task=job.task_name,
        attempt=job.attempt,
        trigger=trigger,
        schedule=(assign.schedule_name or str(job.schedule_id)) if scheduled else None,
        fire_time=job.fire_time.ToDatetime(dt.UTC) if scheduled else None,
        previous_fire_time=(
            assign.previous_fire_time.ToDatetime(dt.UTC)
            if scheduled and assign.HasField("previous_fire_time")
            else None
        ),
    )


class StopSignals:
    """The worker's stop flags, shared by its sessions and supervisors.

    Attributes:
        stopping (Flag): set by ``Worker.stop()``: poll no more, let running jobs finish
            within the shutdown grace, then abort them.
        abort_now (Flag): set by ``Worker.stop(abort_running=True)``: abort them now.
    """

    def __init__(self) -> None:
        self.stopping = Flag()
        self.abort_now = Flag()


class _Pump:
    """A running job's heartbeat-and-output task, started only once its first heartbeat
    or output batch is due: a job that ends sooner costs no task."""

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


class JobSupervisor:
    """Runs one assigned job to its end; see the module docstring.

    Create it, apply an early abort with :meth:`abort` if one is known, then ``await
    run()``. :meth:`abort` may be called at any time from the event loop.
    """

    def __init__(
        self,
        *,
        settings: WorkerSettings,
        conn: Connection,
        assign: Response.AssignJob,
        heartbeat_interval_s: float,
        signals: StopSignals,
        service: ServiceCalls | None,
    ) -> None:
        """Prepare the job; nothing runs until :meth:`run`.

        Args:
            settings (WorkerSettings): the worker's settings.
            conn (Connection): the stream the job came on.
            assign (Response.AssignJob): the job.
            heartbeat_interval_s (float): seconds between heartbeats, > 0.
            signals (StopSignals): the worker's stop flags.
            service (ServiceCalls | None): service calls on behalf of this job.
        """
        job = assign.job
        self._settings = settings
        self._conn = conn
        self._assign = assign
        self._heartbeat_interval_s = heartbeat_interval_s
        self._signals = signals
        self.job_id: int = job.id
        self.lease_token: str = assign.lease_token
        self.log_extra: dict[str, Any] = {
            "job_id": job.id,
            "task_id": job.task_id,
            "task_name": job.task_name,
        }
        self.output = JobOutput()
        self.abort_reason: str | None = None
        """Why the job was aborted, once it was."""
        self.cancelled = False
        """Whether the task running :meth:`run` was cancelled (the worker itself was)."""
        self._ctx = JobContext(
            job_id=job.id,
            task_id=job.task_id,
            task_name=job.task_name,
            attempt=job.attempt,
            timeout_s=assign.timeout_seconds or None,
            log=self.output.add,
            abort_grace_s=settings.abort_grace_s,
            service=service,
            env=job_window(assign).to_env(),
            limits=ProcessLimits(assign.memory_limit_bytes, assign.cpu_limit_seconds),
            base_env=base_environment(os.environ, settings.pass_env),
        )
        self._task: asyncio.Task[JobResult] | None = None

    def abort(self, reason: str) -> None:
        """Abort the job once: cancel its handler's task, which stops its work and
        re-raises. Before :meth:`run`, the abort applies as soon as the job starts.

        Args:
            reason (str): reported as the Outcome's error.
        """
        if self.abort_reason is not None or (self._task is not None and self._task.done()):
            return
        self.abort_reason = reason
        logger.info("aborting job %d: %s", self.job_id, reason, extra=self.log_extra)
        if self._task is not None:
            self._task.cancel()

    async def run(self) -> JobResult:
        """Run the job until it ended, and return how it ended.

        When the task awaiting this is cancelled, the job is aborted and waited for, then
        its result is returned with :attr:`cancelled` set (the caller reports it and
        re-raises).

        Returns:
            JobResult: the outcome to report.

        Raises:
            StreamBroken: the stream broke (the job was stopped; its lease will expire).
        """
        assign = self._assign
        logger.info(
            "running job %d of task %r (attempt %d) with handler %r",
            self.job_id,
            assign.job.task_name,
            assign.job.attempt,
            assign.handler,
            extra=self.log_extra,
        )
        task = self._task = asyncio.create_task(
            execute(assign.handler, assign.params, self._ctx, self.output, self._settings.handlers),
            name=f"tickwork-job-{self.job_id}",
        )
        if self.abort_reason is not None:
            task.cancel()
        elif self._signals.abort_now.is_set():
            self.abort(ABORT_SHUTDOWN)
        loop = asyncio.get_running_loop()
        started = loop.time()

        def start_pump() -> asyncio.Task[None]:
            return asyncio.create_task(self._pump(started), name=f"tickwork-job-{self.job_id}-pump")

        # Most jobs of a busy queue end sooner: the pump starts when its first heartbeat or
        # output batch is due, not with every job.
        first_due = min(self._settings.log_flush_interval_s, self._heartbeat_interval_s)
        pump = _Pump(start_pump, started + first_due)
        try:
            try:
                await self._supervise(task, pump)
            except asyncio.CancelledError:
                # The worker itself is being cancelled: still stop the job and report it.
                self.cancelled = True
                self.abort(ABORT_CANCELLED)
                await shielded(asyncio.wait([task]))
        finally:
            await pump.stop()
        result = self._result(task)
        logger.info(
            "job %d ended %s%s",
            self.job_id,
            job_pb2.JobStatus.Name(result.status),
            f": {result.error}" if result.error else "",
            extra=self.log_extra,
        )
        return result

    async def _supervise(self, task: asyncio.Task[JobResult], pump: _Pump) -> None:
        """Wait for the job's handler task to end, applying stop and stream breaks.

        Raises:
            StreamBroken: the stream broke; the job was aborted and has ended.
        """
        conn = self._conn
        stopping = self._signals.stopping
        abort_now = self._signals.abort_now
        loop = asyncio.get_running_loop()
        grace_deadline: float | None = None  # set when stop() is noticed
        while not task.done():
            not_aborted = self.abort_reason is None
            flags = [conn.broken]
            if not_aborted:
                flags.append(abort_now)
                if grace_deadline is None:
                    flags.append(stopping)
            timeout_s = pump.start_if_due(loop.time())
            if not_aborted and grace_deadline is not None:
                grace_s = max(0.0, grace_deadline - loop.time())
                timeout_s = grace_s if timeout_s is None else min(timeout_s, grace_s)
            futures = [task] if pump.task is None else [task, pump.task]
            await wait_any(flags, futures, timeout_s)
            if task.done():
                return
            if conn.broken.is_set() or pump.ended():
                self.abort(ABORT_STREAM_LOST)
                await asyncio.wait([task])
                error = pump.error()
                if error is not None and not isinstance(error, StreamBroken):
                    raise error  # a bug in the pump: stop the worker loudly
                raise StreamBroken(f"{error or 'the stream broke'} (job {self.job_id} was stopped)")
            if self.abort_reason is not None:
                continue
            if abort_now.is_set():
                self.abort(ABORT_SHUTDOWN)
            elif grace_deadline is None and stopping.is_set():
                grace_s = self._settings.job_finish_grace_s
                grace_deadline = loop.time() + grace_s
                logger.info(
                    "letting job %d finish within %.1f s before aborting it",
                    self.job_id,
                    grace_s,
                    extra=self.log_extra,
                )
            elif grace_deadline is not None and loop.time() >= grace_deadline:
                self.abort(ABORT_SHUTDOWN)

    def _result(self, task: asyncio.Task[JobResult]) -> JobResult:
        """The outcome of the ended job: a job whose abort was requested is ABORTED
        unless it succeeded before the abort took effect."""
        aborted = JobResult(job_pb2.JOB_STATUS_ABORTED, self.abort_reason or "aborted", "")
        if task.cancelled():
            return aborted
        result = task.result()
        if self.abort_reason is not None and result.status != job_pb2.JOB_STATUS_SUCCEEDED:
            return JobResult(aborted.status, aborted.error, result.output_tail)
        return result

    async def _pump(self, started: float) -> None:
        """While the job runs: send Heartbeat every interval and LogLines batches, and
        feed the process-group guard's watchdog with each heartbeat sent.

        Args:
            started (float): when the job started, event loop time (the first heartbeat
                is due an interval after it).

        Raises:
            StreamBroken: the stream broke.
        """
        conn = self._conn
        loop = asyncio.get_running_loop()
        flush_s = self._settings.log_flush_interval_s
        interval_s = self._heartbeat_interval_s
        next_heartbeat = started + interval_s
        heartbeat = Request(
            heartbeat=Request.Heartbeat(job_id=self.job_id, lease_token=self.lease_token)
        )
        while True:
            if loop.time() >= next_heartbeat:
                await conn.send(heartbeat)
                feed_guard()  # alive: the guard's watchdog leaves the job's processes be
                next_heartbeat = loop.time() + interval_s
            await send_output(conn, self.job_id, self.lease_token, self.output)
            await asyncio.sleep(max(0.0, min(flush_s, next_heartbeat - loop.time())))
