"""WorkerService (internal): the worker's bidirectional stream, and the slot rule.

One :class:`WorkerSession` per stream. An active stream holds one of the
TICKWORK_MAX_RUNNING_JOBS worker slot leases (rows ``worker``, ``worker.1``, ... in the
database, renewed by its session while the stream is open), and claims its jobs fenced by
that lease; other sessions are standby and try to take a slot lease as one expires, so the
rule holds across replicas. With the default of one slot this is one active worker. A job's
own lease is renewed by the worker's heartbeats; the reaper fails jobs whose lease expired.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import AsyncIterator
from contextlib import suppress
from typing import Any

import grpc

from scheduler_svc import maintenance, validation
from scheduler_svc.app import App
from scheduler_svc.errors import FailedPrecondition, InvalidArgument
from scheduler_svc.hub import Ticket
from scheduler_svc.records import JobRecord, TaskRecord
from scheduler_svc.schema import slot_lease_name
from scheduler_svc.servicers import _convert as cv
from scheduler_svc.servicers._errors import rpc_errors, translate
from scheduler_svc.storage_health import log_failure
from scheduler_svc.store import ABORTED_BY_OPERATOR
from scheduler_svc.values import JobStatus
from scheduler_svc.worker_registry import WorkerRegistry, WorkerSeen
from tickwork.v1 import worker_pb2, worker_pb2_grpc

log = logging.getLogger(__name__)

Ctx = grpc.aio.ServicerContext[Any, Any]
Req = worker_pb2.ConnectRequest
Resp = worker_pb2.ConnectResponse

_OUTCOMES = {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.ABORTED}


class WorkerSession:
    """The server's side of one worker stream."""

    def __init__(
        self, app: App, worker_id: str, *, next_job_in_ack: bool = False, slots: int = 1
    ) -> None:
        self.app = app
        self.worker_id = worker_id
        self.holder = f"{worker_id}#{secrets.token_hex(4)}"
        """This stream's name as the ``worker`` lease holder (and on the jobs it claims): the
        worker id and a nonce of the session. A worker that reconnects is a new holder, so the
        old stream's session, ending later, cannot give up the lease the new one holds."""
        self.next_job_in_ack = next_job_in_ack
        """The worker's Hello set next_job_in_outcome_ack."""
        self.worker_slots = max(1, slots)
        """The worker's Hello.slots: the streams it opens (logged, nothing more)."""
        self.active = False
        self.slot = 0
        """The slot whose lease this session holds (while ``active``)."""
        self.slot_token: int | None = None
        """That lease's fencing token, which every claim of this session checks."""
        self._gauge_state: str | None = None  # how tickwork_workers counts this stream
        self.out: asyncio.Queue[Resp | None] = asyncio.Queue()
        self.job_id = 0
        self.lease_token = ""
        self._poll: asyncio.Task[None] | None = None
        self._poll_cancelled = asyncio.Event()  # CancelPoll came for the pending poll
        self._tasks: list[asyncio.Task[None]] = []
        self.seen = WorkerSeen(worker_id, app.clock())
        """What status pages show of this stream (SystemService.GetStatus)."""

    @property
    def _s(self) -> Any:
        return self.app.settings

    async def _hold_worker_lease(self) -> bool:
        """Take or renew a slot lease (the one held, else the lowest free one); True when
        this session holds one."""
        held = await self.app.store.acquire_slot_lease(
            self.holder, self.app.clock(), self._s.lease_ttl_s, self._s.max_running_jobs
        )
        was, self.active = self.active, held is not None
        if held is not None:
            self.slot, self.slot_token = held
        else:
            self.slot_token = None
        self.seen.state(self.active, self.app.clock())
        state = "active" if self.active else "standby"
        self.app.metrics.worker_state(self._gauge_state, state)
        self._gauge_state = state
        if self.active and not was:
            log.info(
                "worker is active in slot %d",
                self.slot,
                extra={"worker_id": self.worker_id, "slot": self.slot},
            )
            self.app.hub.queue.fire()
        elif was and not self.active:
            log.warning("worker lost the worker lease", extra={"worker_id": self.worker_id})
        return self.active

    async def _keep_lease(self) -> None:
        while True:
            await asyncio.sleep(self._s.lease_ttl_s / 3)
            try:
                await self._hold_worker_lease()
            except Exception as err:
                # Not renewed: claims are fenced by the lease row, so a session that still
                # believes it is active hands out nothing once another worker took over.
                log_failure(log, f"worker lease renewal failed ({self.worker_id})", err)

    async def start(self) -> None:
        """Answer Hello with Welcome and start renewing (or waiting for) the worker lease."""
        await self._hold_worker_lease()
        self.out.put_nowait(
            Resp(
                welcome=Resp.Welcome(
                    active=self.active,
                    heartbeat_interval_seconds=self._s.heartbeat_interval_s,
                    lease_ttl_seconds=self._s.lease_ttl_s,
                    max_running_jobs=self._s.max_running_jobs,
                )
            )
        )
        self._tasks.append(asyncio.create_task(self._keep_lease(), name="worker-lease"))

    async def handle(self, msg: Req) -> None:
        """Handle one message from the worker."""
        kind = msg.WhichOneof("message")
        self.seen.message(self.app.clock())
        if kind in ("heartbeat", "log_lines", "outcome"):
            # Tokens are ours (hex); one with a NUL matches nothing, and PostgreSQL cannot
            # even compare against it: refused here, not a database error.
            validation.free_text(getattr(msg, kind).lease_token, f"{kind}.lease_token")
        if kind == "poll_job":
            self._poll_for_job()
        elif kind == "cancel_poll":
            self._poll_cancelled.set()
        elif kind == "heartbeat":
            await self._heartbeat(msg.heartbeat.job_id, msg.heartbeat.lease_token)
        elif kind == "log_lines":
            m = msg.log_lines
            if m.lines and await self.app.store.append_output(
                m.job_id, m.lease_token, "".join(line + "\n" for line in m.lines)
            ):
                self.app.hub.job_changed(m.job_id)
        elif kind == "outcome":
            await self._outcome(msg.outcome)
        elif kind == "hello":
            raise FailedPrecondition("sent twice; a stream has one Hello", field="hello")

    def _poll_for_job(self) -> None:
        """Start answering a poll (PollJob, or an Outcome with poll_next), unless one is
        being answered already."""
        if self._poll is None or self._poll.done():
            self._poll_cancelled.clear()
            self._poll = asyncio.create_task(self._answer_poll(), name="worker-poll")

    async def _answer_poll(self) -> None:
        """Answer one PollJob: AssignJob as soon as a job is ready and this worker is the
        active one, else NoJob after the poll interval, or at once after CancelPoll (a
        claim already under way is finished and assigned first). Woken by the hub's queue
        signal (enqueue, a finished job, a released worker lease); jobs that become ready by
        time (retries) are claimed at their not_before. When the service is stopping, the
        stream of an idle worker is ended instead. A storage error is logged and answered
        with NoJob at the end of the poll interval (the worker polls again) or at a CancelPoll."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._s.worker_poll_interval_s
        try:
            await self._wait_for_job(deadline)
        except Exception as err:
            log_failure(log, f"answering a poll failed ({self.worker_id})", err)
            with suppress(TimeoutError):  # the end of the poll interval, or a CancelPoll
                await asyncio.wait_for(
                    self._poll_cancelled.wait(), max(0.0, deadline - loop.time())
                )
            self.out.put_nowait(Resp(no_job=Resp.NoJob()))

    async def _wait_for_job(self, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        woken = False
        while True:
            if self._poll_cancelled.is_set():  # woken by CancelPoll: claim nothing more
                self.out.put_nowait(Resp(no_job=Resp.NoJob()))
                return
            signal = self.app.hub.queue
            wait_s = deadline - loop.time()
            if not self.app.dispatching:
                if not self.job_id:
                    self.out.put_nowait(None)  # end the stream; the worker reconnects later
                    return
            elif not self.active and woken:
                await self._hold_worker_lease()  # the active worker may have let go
            if self.app.dispatching and self.active and not self.job_id and not self.app.hub.firing:
                now = self.app.clock()
                claimed = await self.app.store.claim_next_job(
                    self.holder,
                    now,
                    self._s.lease_ttl_s,
                    worker_lease_holder=self.holder,
                    slot=self.slot,
                    lease_token=self.slot_token,
                )
                if claimed is not None:
                    await self._assign(*claimed)
                    return
                ready = await self.app.store.next_ready_time(now)
                if ready is not None and ready > now:
                    wait_s = min(wait_s, max(0.01, (ready - now).total_seconds()))
                # A job ready now but not claimed waits for the running job (or the lock
                # holder) to finish, which fires the signal; no busy loop.
            if deadline - loop.time() <= 0:
                self.out.put_nowait(Resp(no_job=Resp.NoJob()))
                return
            woken = await self._wait_for_signal(signal, max(0.0, wait_s))

    async def _wait_for_signal(self, signal: Ticket, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` seconds for ``signal`` or a CancelPoll; True when woken."""
        woken = asyncio.ensure_future(signal.wait(timeout_s))
        cancelled = asyncio.ensure_future(self._poll_cancelled.wait())
        try:
            await asyncio.wait([woken, cancelled], return_when=asyncio.FIRST_COMPLETED)
        finally:
            cancelled.cancel()
            woken.cancel()
        return woken.done() and not woken.cancelled() and woken.result()

    async def _assign(self, job: JobRecord, task: TaskRecord) -> None:
        """Send AssignJob for ``job`` (already leased to this worker)."""
        self.out.put_nowait(Resp(assign_job=await self._assignment(job, task)))

    async def _assignment(self, job: JobRecord, task: TaskRecord) -> Resp.AssignJob:
        """The AssignJob of ``job`` (already leased to this worker), now this session's
        running job: with the task's process limits, and for a scheduled job the window it
        was fired for (a retry keeps its first attempt's fire time)."""
        self.job_id, self.lease_token = job.id, job.lease_token or ""
        self.seen.running_job_ids = {job.id}
        self.app.hub.on_abort(job.id, self._abort)
        self.app.hub.job_changed(job.id)
        log.debug(
            "job assigned",
            extra={"job_id": job.id, "task_id": task.id, "worker_id": self.worker_id},
        )
        assignment = Resp.AssignJob(
            job=cv.job(job),
            handler=task.handler,
            params=cv.struct(job.run_params(task.params)),
            timeout_seconds=task.timeout_seconds,
            lease_token=self.lease_token,
            slot=job.slot if job.slot is not None else 0,
            memory_limit_bytes=task.memory_limit_bytes,
            cpu_limit_seconds=task.cpu_limit_seconds,
        )
        if job.schedule_id is not None and job.fire_time is not None:
            try:
                name, previous = await self.app.store.fire_window(job.schedule_id, job.fire_time)
            except Exception as err:
                # The job runs without its previous fire time rather than not at all.
                log_failure(log, f"fire window of job {job.id} not read", err)
            else:
                assignment.schedule_name = name
                stamp = cv.ts(previous)
                if stamp is not None:
                    assignment.previous_fire_time.CopyFrom(stamp)
        return assignment

    def _abort(self, job_id: int, reason: str) -> None:
        if job_id == self.job_id:
            self.out.put_nowait(Resp(abort_job=Resp.AbortJob(job_id=job_id, reason=reason)))

    async def _heartbeat(self, job_id: int, token: str) -> None:
        abort_requested = False
        reason = ABORTED_BY_OPERATOR
        try:
            ok = await self.app.store.renew_job_lease(
                job_id, token, self.app.clock(), self._s.lease_ttl_s
            )
            if ok:
                job = await self.app.store.get_job(job_id)
                # A running job's error holds why its abort was asked for, when it was not
                # an operator (a REPLACE fire: "replaced by the fire of ...").
                abort_requested, reason = job.abort_requested, job.error or reason
        except Exception as err:
            # A storage hiccup must not end the stream (and with it the running job): the
            # next heartbeat renews the lease; if none can, the lease expires as it should.
            log_failure(log, f"heartbeat of job {job_id} not recorded", err)
            return
        if not ok:
            self._abort(job_id, "lease lost")
        elif abort_requested:
            self._abort(job_id, reason)

    async def _outcome(self, m: Req.Outcome) -> None:
        status = cv.job_status_name(m.status, "outcome.status")
        if status not in _OUTCOMES:
            status = JobStatus.FAILED
        # poll_next: the next job is taken in the transaction that records this outcome.
        claim = (
            m.poll_next
            and self.active
            and self.app.dispatching
            and not self.app.hub.firing
            and m.job_id == self.job_id
        )
        result = await self.app.finish_job(
            m.job_id,
            m.lease_token,
            status,
            m.error,
            m.output_tail,
            claim_next_for=self.holder if claim else None,
            claim_slot=self.slot,
            claim_lease_token=self.slot_token,
        )
        if m.job_id == self.job_id:
            self.app.hub.on_abort(m.job_id, None)
            self.job_id, self.lease_token = 0, ""
            self.seen.running_job_ids = set()
        ack = Resp.OutcomeAck(job_id=m.job_id, accepted=result.accepted)
        if result.next_job is not None and self.next_job_in_ack:
            ack.next_job.CopyFrom(await self._assignment(*result.next_job))
            self.out.put_nowait(Resp(outcome_ack=ack))
            return
        self.out.put_nowait(Resp(outcome_ack=ack))
        if result.next_job is not None:
            await self._assign(*result.next_job)
        elif not self.app.dispatching and not self.job_id:
            self.out.put_nowait(None)  # stopping: the outcome is recorded, end the stream
        elif m.poll_next:
            self._poll_for_job()

    async def close(self) -> None:
        """Stop the session's tasks and give up the worker lease so a standby takes over.

        A job still running keeps its own lease until it expires; the reaper recovers it.
        """
        for task in [*self._tasks, self._poll]:
            if task is not None:
                task.cancel()
                with suppress(asyncio.CancelledError):
                    await task
        if self.job_id:
            self.app.hub.on_abort(self.job_id, None)
        self.app.metrics.worker_state(self._gauge_state, None)
        self._gauge_state = None
        if self.active:
            await self.app.store.release_lease(
                slot_lease_name(self.slot), self.holder, self.app.clock()
            )
            self.app.queue_changed()  # a standby, here or on another replica, takes over
        log.info("worker disconnected", extra={"worker_id": self.worker_id})


class WorkerServicer(worker_pb2_grpc.WorkerServiceServicer):
    """tickwork.v1.WorkerService."""

    def __init__(self, app: App, registry: WorkerRegistry | None = None) -> None:
        self.app = app
        #: The open streams, for SystemService.GetStatus.
        self.registry = registry if registry is not None else WorkerRegistry()

    @rpc_errors
    async def PurgeHistory(
        self, request: worker_pb2.PurgeHistoryRequest, context: Ctx
    ) -> worker_pb2.PurgeHistoryResponse:
        token = validation.free_text(request.lease_token, "lease_token")
        task = await self.app.store.running_job_task(request.job_id, token)
        if task is None:
            raise FailedPrecondition(
                f"no running job {request.job_id} under that lease token", field="job_id"
            )
        if task.handler != maintenance.RETENTION_HANDLER:
            raise FailedPrecondition(
                f"job {request.job_id} runs handler {task.handler!r}, not "
                f"{maintenance.RETENTION_HANDLER!r}",
                field="job_id",
            )
        days = maintenance.keep_days(task.params)
        cutoff = maintenance.cutoff(self.app.clock(), days)
        jobs, fires = await self.app.store.purge_history(cutoff)
        answers = await self.app.store.purge_requests(self.app.clock())
        log.info(
            "history purged",
            extra={
                "job_id": request.job_id,
                "task_id": task.id,
                "cutoff": cutoff.isoformat(),
                "jobs_deleted": jobs,
                "fires_deleted": fires,
                "requests_deleted": answers,
            },
        )
        return worker_pb2.PurgeHistoryResponse(
            jobs_deleted=jobs,
            fires_deleted=fires,
            cutoff_time=cv.ts(cutoff),
            keep_days=days,
            requests_deleted=answers,
        )

    async def Connect(
        self, request_iterator: AsyncIterator[Req], context: Ctx
    ) -> AsyncIterator[Resp]:
        requests = request_iterator.__aiter__()
        try:
            first = await anext(requests)
        except StopAsyncIteration:
            return
        if first.WhichOneof("message") != "hello" or not first.hello.worker_id:
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, "hello: the first message must be a Hello"
            )
        try:
            validation.worker_id(first.hello.worker_id)
        except InvalidArgument as err:
            await context.abort(*translate(err, "WorkerService.Connect"))
        session = WorkerSession(
            self.app,
            first.hello.worker_id,
            next_job_in_ack=first.hello.next_job_in_outcome_ack,
            slots=first.hello.slots,
        )
        log.info(
            "worker connected (%d slots)",
            session.worker_slots,
            extra={"worker_id": session.worker_id},
        )
        self.registry.open(session.holder, session.seen)

        async def read() -> None:
            try:
                async for msg in requests:
                    await session.handle(msg)
            finally:
                session.out.put_nowait(None)

        async def end() -> None:
            self.registry.close(session.holder)
            reader.cancel()
            with suppress(asyncio.CancelledError, Exception):
                await reader
            await session.close()

        reader = asyncio.create_task(read(), name="worker-read")
        # A stopping service cancels this stream when its grace ends and then closes the
        # database: it waits for this (App.streams_ended) first, so that the session still gives
        # the worker lease up (a worker reconnecting to the restarted service is active at
        # once) instead of failing on a closed database.
        ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.app.stream_ends_with(ended)
        try:
            await session.start()
            while True:
                item = await session.out.get()
                if item is None:
                    break
                yield item
            if reader.done() and not reader.cancelled() and reader.exception() is not None:
                raise reader.exception()  # type: ignore[misc]
        except grpc.aio.AbortError:
            raise
        except Exception as err:
            # The stream ends with the error's own status and a short message (a domain
            # error's, or UNAVAILABLE for the database), never the exception's text: that
            # was UNKNOWN with the SQL and its parameters.
            await context.abort(*translate(err, "WorkerService.Connect"))
        finally:
            ending = asyncio.ensure_future(end())
            ending.add_done_callback(lambda _: None if ended.done() else ended.set_result(None))
            await asyncio.shield(ending)
