"""The scheduler service's domain core, shared by servicers, the scheduler loop and the reaper.

``App`` holds the settings, the store, the wake-up hub and the clock, and owns the
operations that more than one entry point uses: enqueueing (RunTasks and QueueService take
the same path), recording job outcomes (worker stream and lease reaper), and recomputing a
schedule's next run.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable, Sequence

from scheduler_svc.failpoints import failpoint
from scheduler_svc.firing import first_fire_after
from scheduler_svc.hub import Hub
from scheduler_svc.metrics import Metrics
from scheduler_svc.records import (
    NO_OPTIONS,
    EnqueueResult,
    FinishResult,
    FireRequest,
    FireResult,
    RunOptions,
    ScheduleRecord,
    TaskRunResult,
)
from scheduler_svc.replicas import ReplicaWakeups
from scheduler_svc.settings import Settings
from scheduler_svc.store import Remember, Store
from scheduler_svc.store.overlap import replaced_reason
from scheduler_svc.values import FireOutcome, JobStatus, Trigger

log = logging.getLogger(__name__)

Clock = Callable[[], dt.datetime]


def utc_now() -> dt.datetime:
    """The real clock: now, aware UTC."""
    return dt.datetime.now(dt.UTC)


class App:
    """Everything a request handler needs. ``clock`` returns aware UTC datetimes."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        *,
        clock: Clock = utc_now,
        hub: Hub | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.clock = clock
        self.hub = hub or Hub()
        self.metrics = metrics or Metrics()
        self.dispatching = True
        #: The wake-up channel to the other replicas (PostgreSQL; set by the server), or
        #: None: changes are seen by other replicas at their next poll.
        self.replicas: ReplicaWakeups | None = None
        #: Since when ready jobs have waited with no active worker (None: not waiting).
        self.queue_stalled_since: dt.datetime | None = None
        self._background: set[asyncio.Task[None]] = set()
        self._stream_ends: set[asyncio.Future[None]] = set()

    async def enqueue(
        self,
        task_ids: Sequence[int],
        trigger: Trigger,
        *,
        options: RunOptions = NO_OPTIONS,
        remember: Remember | None = None,
    ) -> EnqueueResult:
        """Enqueue a manual or API run of tasks (see :meth:`Store.enqueue`, ``options`` and
        ``remember`` too) and wake an idle worker at once."""
        now = remember.now if remember is not None else self.clock()
        result = await self.store.enqueue(
            task_ids, trigger, now, options=options, remember=remember
        )
        self._enqueued(result.runs)
        return result

    async def enqueue_fire(
        self, fire: FireRequest, *, remember: Remember | None = None
    ) -> FireResult:
        """Record one fire (see :meth:`Store.enqueue_fire`, ``remember`` too), wake an idle
        worker, and count the fire unless it was recorded already."""
        now = remember.now if remember is not None else self.clock()
        result = await self.store.enqueue_fire(fire, now, remember=remember)
        self._enqueued(result.runs)
        if not result.duplicate_fire:
            self._observe_fires([result], now)
        return result

    async def enqueue_fires(self, fires: Sequence[FireRequest]) -> list[FireResult]:
        """Record a batch of scheduler fires in one transaction (see
        :meth:`Store.enqueue_fires`), wake an idle worker, and count the fires."""
        now = self.clock()
        results = await self.store.enqueue_fires(fires, now)
        runs = [run for result in results for run in result.runs]
        self._enqueued(runs)
        self._observe_fires([r for r in results if r.schedule_found and not r.duplicate_fire], now)
        return results

    def _enqueued(self, runs: Sequence[TaskRunResult]) -> None:
        for run in runs:
            if run.job_id:
                self.hub.job_changed(run.job_id)
        if any(r.skip_reason is None or r.made_ready for r in runs):
            self.queue_changed()

    def queue_changed(self) -> None:
        """A job may be ready for a worker (one was enqueued, the worker lease was let go):
        wake this process's worker polls and tell the other replicas."""
        self.hub.queue.fire()
        if self.replicas is not None:
            self.replicas.queue_changed()

    def _observe_fires(self, recorded: Sequence[FireResult], now: dt.datetime) -> None:
        """Count newly recorded fires by outcome (one increment per outcome and batch),
        observe the enqueue lateness of each fire that enqueued a job (from its start: the
        fire time plus its jitter), and tell this process's worker streams to abort the jobs
        a REPLACE fire replaced (a job on another replica's stream hears it at its next
        heartbeat)."""
        counts = {"missed": 0, "enqueued": 0, "skipped": 0, "buffered": 0, "replaced": 0}
        for result in recorded:
            req = result.request
            counts["missed"] += len(req.missed_fire_times) + req.missed
            if req.missed:
                continue
            fired = FireOutcome(result.outcome)
            counts[fired.lower()] += 1
            if fired != FireOutcome.SKIPPED:
                # Measured from the fire's jittered start: jitter is not lateness.
                lateness = (now - (req.start_at or req.fire_time)).total_seconds()
                self.metrics.fire_lateness.observe(max(0.0, lateness))
            for run in result.runs:
                if run.replaced_job_id:
                    self.hub.request_abort(run.replaced_job_id, replaced_reason(req.fire_time))
        for outcome, count in counts.items():
            if count:
                self.metrics.fires.labels(outcome).inc(count)

    async def finish_job(
        self,
        job_id: int,
        token: str,
        status: JobStatus,
        error: str,
        output_tail: str,
        *,
        claim_next_for: str | None = None,
        claim_slot: int = 0,
        claim_lease_token: int | None = None,
    ) -> FinishResult:
        """Record a job's outcome (see :meth:`Store.finish_job`), then wake watchers, wake
        the worker for a retry, and wake the notification sender when events were written. With
        ``claim_next_for`` (an active worker session's id), the next job is leased to that
        worker in slot ``claim_slot``, fenced by that slot's lease under
        ``claim_lease_token``, in the same transaction (the result's ``next_job``)."""
        result = await self.store.finish_job(
            job_id,
            token,
            status,
            error,
            output_tail,
            self.clock(),
            auto_disable_count=self.settings.auto_disable_task_failure_count,
            claim_next_for=claim_next_for,
            claim_slot=claim_slot,
            claim_lease_token=claim_lease_token,
            lease_ttl_s=self.settings.lease_ttl_s,
        )
        self._after_finish(result)
        return result

    async def reap_expired_leases(self) -> list[FinishResult]:
        """Recover running jobs whose lease expired ("lease lost"; retried per policy).

        After this process's storage was down (:mod:`scheduler_svc.outages`), the running
        jobs' leases are first moved later by the outage's length, to at most a TTL from its
        end: nobody could renew them meanwhile, and an outcome already on its way is
        recorded rather than turned into a late one."""
        outages = self.store.db.outages
        grace_s = outages.grace_s()
        results = await self.store.reap_expired_leases(
            self.clock(),
            auto_disable_count=self.settings.auto_disable_task_failure_count,
            kill_deadline_s=self.settings.kill_deadline_s,
            grace_s=grace_s,
            lease_ttl_s=self.settings.lease_ttl_s,
        )
        if grace_s:
            outages.granted(grace_s)
        for result in results:
            if result.job is not None:
                self.metrics.lease_losses.labels(result.job.task_name).inc()
            self._after_finish(result)
        return results

    async def take_over_dead_holders(self) -> list[FinishResult]:
        """Before the loops start: take over at once the leases a dead process of this
        host held (a predecessor killed with SIGKILL), and recover its embedded worker's
        running jobs ("lease lost"; retried per policy), so that the first tick finds them
        ended and the embedded worker need not wait for the leases to expire."""
        results = await self.store.take_over_dead_holders(
            self.clock(), auto_disable_count=self.settings.auto_disable_task_failure_count
        )
        for result in results:
            if result.job is not None:
                self.metrics.lease_losses.labels(result.job.task_name).inc()
            self._after_finish(result)
        if results:
            log.warning(
                "recovered the running jobs of a dead predecessor on this host",
                extra={"jobs": [r.job.id for r in results if r.job is not None]},
            )
        return results

    def _after_finish(self, result: FinishResult) -> None:
        if result.job is not None:
            self.hub.job_changed(result.job.id)
            if result.accepted and not result.repeat:
                job = result.job
                self.metrics.job_finished(
                    job.task_name, job.status, job.started_at, job.finished_at
                )
                if job.status == JobStatus.SUCCEEDED and job.finished_at is not None:
                    self.metrics.last_success.labels(job.task_name).set(job.finished_at.timestamp())
            # Quiet on success (the worker logs each job's start and end, and the jobs
            # table keeps them): a busy queue's successes are not two server lines a job.
            succeeded = result.accepted and result.job.status == JobStatus.SUCCEEDED
            log.log(
                logging.DEBUG if succeeded else logging.INFO,
                "job finished",
                extra={
                    "job_id": result.job.id,
                    "task_id": result.job.task_id,
                    "status": result.job.status,
                    "accepted": result.accepted,
                },
            )
        if result.retry is not None:
            self.hub.job_changed(result.retry.id)
            if self.replicas is not None:  # the reaper may run on another worker's replica
                self.replicas.queue_changed()
        if result.accepted:
            # The one running job ended: the next one (or the retry) may go now.
            self.hub.queue.fire()
        if result.anchored_next_run is not None:
            # An interval schedule's next run moved: the scheduler loop may need to wake
            # earlier than it planned (here, or on the replica that ticks). Other finishes
            # do not concern it.
            self.hub.schedules.fire()
            if self.replicas is not None:
                self.replicas.schedules_changed(result.anchored_next_run)
        if result.disabled_task is not None:
            task = result.disabled_task
            self.metrics.auto_disables.labels(task.name).inc()
            last_error = result.job.error if result.job else ""
            log.warning(
                "task %r disabled after %d consecutive failures; last error: %s",
                task.name,
                task.consecutive_failure_count,
                last_error.strip().splitlines()[0][:200] if last_error.strip() else "-",
                extra={"task_id": task.id, "count": task.consecutive_failure_count},
            )
        if result.events:
            # The events are committed with the outcome: a crash from here on loses none
            # (the sender finds them after a restart).
            failpoint("after-outbox-commit")
            self.hub.outbox.fire()

    def stop_dispatch(self) -> None:
        """The service is stopping: hand no more jobs to workers. Idle worker streams end
        at once and a busy one once its outcome is recorded; queued jobs stay queued in
        the database for the next start (or another replica)."""
        self.dispatching = False
        self.hub.queue.fire()

    def spawn(self, coro: object, *, name: str) -> None:
        """Run a fire-and-forget coroutine, keeping a reference until it ends."""
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro, name=name)  # type: ignore[arg-type]
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def next_run(self, schedule: ScheduleRecord) -> dt.datetime | None:
        """A schedule's next run computed from now (on create and on relevant updates)."""
        return first_fire_after(schedule, self.clock())

    def schedules_changed(self, next_run_at: dt.datetime | None = None) -> None:
        """Wake the scheduler loop so a new or changed schedule is not late.

        With ``next_run_at`` (a new schedule's first run), the loop is left asleep when it
        will tick by then anyway: a bulk import does not cost a tick per schedule. The other
        replicas are told too (the one that ticks applies the same rule).
        """
        if self.replicas is not None:
            self.replicas.schedules_changed(next_run_at)
        self.wake_scheduler_loop(next_run_at)

    def wake_scheduler_loop(self, next_run_at: dt.datetime | None = None) -> None:
        """Wake this process's scheduler loop, unless it will tick by ``next_run_at``
        anyway (see :meth:`schedules_changed`)."""
        wakes_at = self.hub.scheduler_wakes_at
        if next_run_at is not None and wakes_at is not None and wakes_at <= next_run_at:
            return
        self.hub.schedules.fire()

    def stream_ends_with(self, ended: asyncio.Future[None]) -> None:
        """Register a worker stream, which resolves ``ended`` once its clean-up (giving
        the worker lease up, a database write) is done; see :meth:`streams_ended`."""
        self._stream_ends.add(ended)
        ended.add_done_callback(self._stream_ends.discard)

    async def streams_ended(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for the clean-up of every worker stream; used on
        shutdown, after the gRPC server has ended the streams and before the database is
        closed."""
        if self._stream_ends:
            await asyncio.wait(list(self._stream_ends), timeout=timeout_s)

    async def drain(self, timeout_s: float | None = None) -> None:
        """Wait up to ``timeout_s`` seconds (None: no bound) for background work (emails)
        to finish; used on shutdown."""
        if self._background:
            await asyncio.wait(list(self._background), timeout=timeout_s)
