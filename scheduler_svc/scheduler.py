"""The scheduler loop: ticks enabled schedules and pushes due tasks to QueueService over gRPC.

``Scheduler.tick(now)`` does one pass at the instant given (tests drive it with their own
clock, without sleeping); ``Scheduler.run()`` loops, sleeping until the earliest next fire
time or SCHEDULER_POLL_INTERVAL_SECONDS, whichever comes first, and waking early when a
schedule is created or changed. Only the holder of the ``scheduler`` lease ticks, so several
replicas on one database fire each window once; the (schedule, fire time) unique row makes
a repeat after a crash or a lease handover a no-op.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import random
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Protocol

import grpc

from scheduler_svc.app import Clock
from scheduler_svc.failpoints import failpoint
from scheduler_svc.fire_requests import (
    FIRES_PER_CALL,
    RUNS_PER_CALL,
    fire_batches,
    fire_chunks,
    schedule_fires,
)
from scheduler_svc.firing import FirePlan, first_fire_after, plan_fire
from scheduler_svc.hub import Hub
from scheduler_svc.metrics import Metrics
from scheduler_svc.records import ScheduleRecord
from scheduler_svc.settings import Settings
from scheduler_svc.storage_health import log_failure
from scheduler_svc.store import Store
from tickwork.cron import CronError
from tickwork.v1 import queue_pb2, queue_pb2_grpc

log = logging.getLogger(__name__)

#: Most schedules handled in one pass of a tick; a tick loops until none is due.
BATCH = 1000
#: A wall clock that moved this much more or less than the monotonic clock between two
#: ticks was stepped (NTP, a VM restore), seconds.
CLOCK_STEP_S = 1.0


class QueueClient(Protocol):
    """What the scheduler needs of QueueService: one call per batch of due schedules."""

    async def EnqueueFires(
        self, request: queue_pb2.EnqueueFiresRequest
    ) -> queue_pb2.EnqueueFiresResponse:
        """QueueService.EnqueueFires."""
        ...


class _QueueStub:
    """QueueService on a channel, every call carrying ``metadata`` (the internal token)."""

    def __init__(self, channel: grpc.aio.Channel, metadata: tuple[tuple[str, str], ...]) -> None:
        self._stub = queue_pb2_grpc.QueueServiceStub(channel)
        self._metadata = metadata

    async def EnqueueFires(
        self, request: queue_pb2.EnqueueFiresRequest
    ) -> queue_pb2.EnqueueFiresResponse:
        """QueueService.EnqueueFires."""
        response: queue_pb2.EnqueueFiresResponse = await self._stub.EnqueueFires(
            request, metadata=self._metadata
        )
        return response


def grpc_queue_client(
    channel: grpc.aio.Channel, metadata: tuple[tuple[str, str], ...] = ()
) -> QueueClient:
    """The QueueService stub on ``channel``; ``metadata`` goes with every call."""
    return _QueueStub(channel, metadata)


class Scheduler:
    """Ticks schedules. ``clock`` returns aware UTC; ``hub.schedules`` wakes the loop."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        queue: QueueClient,
        *,
        clock: Clock,
        hub: Hub,
        holder_id: str | None = None,
        metrics: Metrics | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self.monotonic = monotonic
        #: The wall and monotonic readings of the last tick, to detect a clock step.
        self._last_reading: tuple[dt.datetime, float] | None = None
        #: Wall-clock steps detected: back, forward.
        self.clock_steps = {"back": 0, "forward": 0}
        self.store = store
        self.queue = queue
        self.clock = clock
        self.hub = hub
        self.holder_id = holder_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._stop = asyncio.Event()
        #: Fires recorded per EnqueueFires call; the lease is renewed between calls.
        self.fires_per_call = FIRES_PER_CALL
        #: The scheduler lease's fencing token while this replica holds it, else None.
        self.lease_token: int | None = None
        #: Draws the RANDOM jitter of each fire.
        self.rng = random.Random()

    def stop(self) -> None:
        """Ask the loop to end after the current tick."""
        self._stop.set()
        self.hub.schedules.fire()

    async def tick(self, now: dt.datetime) -> dt.datetime:
        """One pass at ``now``: heal NULL next runs, fire every due schedule.

        Returns when the next pass should run (aware UTC). A replica that does not hold the
        scheduler lease does nothing and returns a time to try again. A long pass (catching
        up after a handover) renews the lease every third of its TTL and stops when the lease
        was lost, so two replicas do not tick at once.
        """
        renew_every = dt.timedelta(seconds=self.settings.scheduler_lease_ttl_s / 3)
        retry_lease_at = now + renew_every
        step_s = self._clock_step(now)
        if not await self._hold_lease(now):
            return retry_lease_at
        renew_at = self.clock() + renew_every
        if step_s < 0:
            await self._after_step_back(now, -step_s)
        await self._heal(now)
        pause_end = await self._end_pauses(now)
        try:
            for _ in range(1000):
                due = await self.store.due_schedules(now, BATCH)
                if not due:
                    break
                self.hub.firing = True  # dispatch waits until these fires are recorded
                for batch in fire_batches(due, self.fires_per_call, RUNS_PER_CALL):
                    if self.clock() >= renew_at:
                        if not await self._hold_lease(self.clock()):
                            return self.clock() + renew_every
                        renew_at = self.clock() + renew_every
                    await self._fire_batch(batch, now)
        finally:
            if self.hub.firing:
                self.hub.firing = False
                self.hub.queue.fire()
        wake = now + dt.timedelta(seconds=self.settings.scheduler_poll_interval_s)
        for earliest in (await self.store.earliest_next_run(), pause_end):
            if earliest is not None:
                wake = min(wake, earliest)
        return min(wake, retry_lease_at)

    async def _end_pauses(self, now: dt.datetime) -> dt.datetime | None:
        """Enable the tasks whose disabled_until came and resume the schedules whose
        paused_until came (their next runs as a resume computes them), before the due
        schedules are read: a resumed schedule that catches up fires in this tick. One read
        when no pause ends by ``now``. Returns the earliest pause end still ahead (None:
        none)."""
        end = await self.store.earliest_pause_end()
        if end is None or end > now:
            return end
        enabled = await self.store.enable_due_tasks(now)
        if enabled:
            log.info("tasks enabled at the end of their disable", extra={"task_ids": enabled})
        for _ in range(1000):
            resumed = await self.store.resume_due_schedules(now, BATCH)
            if resumed:
                log.info(
                    "schedules resumed at the end of their pause",
                    extra={"schedule_ids": [s.id for s in resumed]},
                )
            if len(resumed) < BATCH:
                break
        return await self.store.earliest_pause_end()

    def _clock_step(self, now: dt.datetime) -> float:
        """Seconds the wall clock was stepped since the last tick (negative: back; 0: none),
        measured against the monotonic clock; a step is logged and counted."""
        mono = self.monotonic()
        last, self._last_reading = self._last_reading, (now, mono)
        if last is None:
            return 0.0
        drift = (now - last[0]).total_seconds() - (mono - last[1])
        if abs(drift) < CLOCK_STEP_S:
            return 0.0
        direction = "back" if drift < 0 else "forward"
        self.clock_steps[direction] += 1
        if self.metrics is not None:
            self.metrics.clock_steps.labels(direction).inc()
        if drift < 0:
            log.warning(
                "wall clock stepped back %.0f s: next runs are recomputed from the new now",
                -drift,
            )
        else:
            log.info(
                "wall clock stepped forward %.0f s: the windows passed over follow each "
                "schedule's catch-up policy",
                drift,
            )
        return drift

    async def _after_step_back(self, now: dt.datetime, step_s: float) -> None:
        """After the wall clock went back ``step_s`` seconds: each enabled schedule whose
        next run is later than it would be computed from ``now`` gets that earlier next run
        (compare-and-set), so schedules fire through the repeated stretch of time instead
        of waiting for the old next run. A window already recorded is not fired again (the
        (schedule, fire time) row); the tick records it as a duplicate and moves on."""
        moved = 0
        after = ""
        while True:
            page = await self.store.list_schedules(BATCH, after)
            if not page:
                break
            after = page[-1].name
            moves: list[tuple[int, dt.datetime | None, dt.datetime | None, dt.datetime | None]] = []
            for schedule in page:
                if not schedule.enabled or schedule.next_run_at is None:
                    continue
                if schedule.next_run_at <= now:
                    continue
                try:
                    nxt = first_fire_after(schedule, now)
                except CronError:
                    continue
                if nxt is not None and nxt < schedule.next_run_at:
                    moves.append((schedule.id, schedule.next_run_at, nxt, None))
            if moves:
                await self.store.set_next_runs(moves)
                moved += len(moves)
        log.warning(
            "after a clock step back of %.0f s, %d schedules run from the new now",
            step_s,
            moved,
        )

    async def _hold_lease(self, now: dt.datetime) -> bool:
        """Take or renew the scheduler lease; True while this replica holds it."""
        token = await self.store.acquire_lease(
            "scheduler", self.holder_id, now, self.settings.scheduler_lease_ttl_s
        )
        if token is None and self.lease_token is not None:
            log.warning(
                "scheduler lease lost",
                extra={"holder_id": self.holder_id, "token": self.lease_token},
            )
        elif token is not None and token != self.lease_token:
            log.info(
                "scheduler lease acquired", extra={"holder_id": self.holder_id, "token": token}
            )
        self.lease_token = token
        return token is not None

    async def _heal(self, now: dt.datetime) -> None:
        """Schedules whose next run is NULL (written to the database directly) get one
        computed and stored; nothing is enqueued for them in this tick."""
        for schedule in await self.store.schedules_without_next_run(BATCH, now):
            try:
                nxt = first_fire_after(schedule, now)
            except CronError as err:
                log.error(
                    "schedule has an invalid expression: %s",
                    err,
                    extra={"schedule_id": schedule.id},
                )
                continue
            if nxt is None:  # it never fires (its first fire would be after the year 9999)
                continue
            await self.store.set_next_run(schedule.id, None, nxt)
            log.info(
                "next run computed for a schedule that had none", extra={"schedule_id": schedule.id}
            )

    async def _fire_batch(self, due: Sequence[ScheduleRecord], now: dt.datetime) -> None:
        """Plan each due schedule's fires, record them with EnqueueFires (one call, one
        transaction, unless a catch-up makes them more than :data:`RUNS_PER_CALL` task runs),
        then move their next runs in one transaction.

        A crash between the two leaves the windows due: the next tick asks again and the
        (schedule, fire time) rows turn the repeat into a no-op.
        """
        plans: list[tuple[ScheduleRecord, FirePlan]] = []
        moves: list[tuple[int, dt.datetime | None, dt.datetime | None, dt.datetime | None]] = []
        for schedule in due:
            try:
                if not self._within_bounds(schedule, now, moves):
                    continue
                plans.append((schedule, plan_fire(schedule, now)))
            except CronError as err:
                log.error(
                    "schedule has an invalid expression: %s",
                    err,
                    extra={"schedule_id": schedule.id},
                )
                moves.append((schedule.id, schedule.next_run_at, None, None))
        fires = [f for schedule, plan in plans for f in schedule_fires(schedule, plan, self.rng)]
        results: list[queue_pb2.ScheduleFireResult] = []
        for chunk in fire_chunks(fires, self.fires_per_call, RUNS_PER_CALL):
            request = queue_pb2.EnqueueFiresRequest(fires=chunk)
            try:
                response = await self.queue.EnqueueFires(request)
            except grpc.RpcError as err:
                log_failure(log, "enqueue failed; the fires are retried at the next tick", err)
                raise
            results.extend(response.results)
        failpoint("after-enqueue")
        # One INFO line per batch (10,000 schedules on one cron make 10,000 fires a minute);
        # each fire at DEBUG, and every fire is in ListFires.
        detail = log.isEnabledFor(logging.DEBUG)
        counts = {"fires": 0, "enqueued": 0, "skipped": 0, "missed": 0, "duplicates": 0}
        for fire, result in zip(fires, results, strict=True):
            if not result.schedule_found:
                continue  # deleted meanwhile
            jobs = [r.job_id for r in result.runs if not r.skipped]
            counts["fires"] += 1
            counts["enqueued"] += bool(jobs) and not fire.missed
            counts["skipped"] += not fire.missed and not jobs and not result.duplicate_fire
            counts["missed"] += len(fire.missed_fire_times) + fire.missed
            counts["duplicates"] += result.duplicate_fire
            if detail:
                log.debug(
                    "schedule fired",
                    extra={
                        "schedule_id": fire.schedule_id,
                        "fire_time": fire.fire_time.ToDatetime(tzinfo=dt.UTC).isoformat(),
                        "missed": fire.missed,
                        "missed_windows": len(fire.missed_fire_times),
                        "jobs": jobs,
                        "duplicate": result.duplicate_fire,
                    },
                )
        found = {r.schedule_id for r in results if r.schedule_found}
        for schedule, plan in plans:
            if schedule.id in found:
                moves.append(
                    (schedule.id, schedule.next_run_at, plan.next_run_at, plan.last_window)
                )
        if counts["fires"]:
            first = min(min(plan.fire_times + plan.missed_fire_times) for _, plan in plans)
            log.info("fires recorded", extra={**counts, "first_fire_time": first.isoformat()})
        await self.store.set_next_runs(moves)

    def _within_bounds(
        self,
        schedule: ScheduleRecord,
        now: dt.datetime,
        moves: list[tuple[int, dt.datetime | None, dt.datetime | None, dt.datetime | None]],
    ) -> bool:
        """True when the schedule's due run lies within its start_at and end_at; otherwise
        its next run is recomputed (None past end_at) into ``moves`` and nothing fires (a
        next run stored before the bounds changed)."""
        due = schedule.next_run_at
        assert due is not None
        if schedule.end_at is not None and due >= schedule.end_at:
            moves.append((schedule.id, due, None, None))
            return False
        if schedule.start_at is not None and due < schedule.start_at:
            moves.append((schedule.id, due, first_fire_after(schedule, now), None))
            return False
        return True

    async def run(self) -> None:
        """Tick until :meth:`stop`. A failing tick is logged and retried after a pause."""
        log.info("scheduler loop started", extra={"holder_id": self.holder_id})
        while not self._stop.is_set():
            signal = self.hub.schedules
            try:
                wake = await self.tick(self.clock())
            except Exception as err:
                log_failure(log, "scheduler tick failed", err)
                wake = self.clock() + dt.timedelta(seconds=1)
            if not self._stop.is_set():  # stop() during the tick fired before this wait
                self.hub.scheduler_wakes_at = wake
                try:
                    await signal.wait((wake - self.clock()).total_seconds())
                finally:
                    self.hub.scheduler_wakes_at = None
        if self.lease_token is not None:
            # Hand over now rather than when the lease expires (a restart or a deploy).
            try:
                await self.store.release_lease("scheduler", self.holder_id, self.clock())
            except Exception:
                log.exception("releasing the scheduler lease failed; it expires by itself")
            self.lease_token = None
        log.info("scheduler loop stopped")
