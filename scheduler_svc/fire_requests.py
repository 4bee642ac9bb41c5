"""The scheduler's EnqueueFires requests: due schedules cut into batches, a schedule's fire
plan as ScheduleFire items (its jittered starts drawn), and the items cut into calls whose
replies stay bounded."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

from scheduler_svc.firing import FirePlan, start_of
from scheduler_svc.records import ScheduleRecord
from tickwork.timestamps import to_timestamp as ts
from tickwork.v1 import queue_pb2

#: Fires recorded per EnqueueFires call (one transaction each).
FIRES_PER_CALL = 500
#: Task runs (the due schedules' tasks, summed) per EnqueueFires call. Its reply holds one
#: TaskRun each, at most ~840 bytes with a 200-character name: 4,000 keep it under the
#: 4 MiB a gRPC message may be. (Eight schedules of 1,000 such tasks made a reply of
#: 4.8 MB that the scheduler could not read, after the fires were recorded; every tick
#: then asked again and those schedules never moved on.)
RUNS_PER_CALL = 4000


def fire_batches(
    due: Sequence[ScheduleRecord], fires: int, runs: int
) -> Iterator[Sequence[ScheduleRecord]]:
    """``due`` in order, cut into batches of at most ``fires`` schedules whose tasks add up
    to at most ``runs`` (a schedule with more tasks than that makes a batch alone)."""
    start, count = 0, 0
    for i, schedule in enumerate(due):
        tasks = len(schedule.task_ids)
        if i > start and (i - start >= fires or count + tasks > runs):
            yield due[start:i]
            start, count = i, 0
        count += tasks
    if start < len(due):
        yield due[start:]


def fire_chunks(
    fires: Sequence[queue_pb2.ScheduleFire], most: int, runs: int
) -> Iterator[list[queue_pb2.ScheduleFire]]:
    """``fires`` in order, cut into EnqueueFires calls of at most ``most`` fires whose
    tasks add up to at most ``runs`` (a fire with more tasks than that is a call alone)."""
    chunk: list[queue_pb2.ScheduleFire] = []
    count = 0
    for fire in fires:
        tasks = len(fire.task_ids)
        if chunk and (len(chunk) >= most or count + tasks > runs):
            yield chunk
            chunk, count = [], 0
        chunk.append(fire)
        count += tasks
    if chunk:
        yield chunk


def schedule_fires(
    schedule: ScheduleRecord, plan: FirePlan, rng: random.Random
) -> list[queue_pb2.ScheduleFire]:
    """The plan as EnqueueFires items: each window to fire, oldest first (the first
    carrying the missed windows), or the latest missed window alone; an enqueued fire
    carries its jittered start (a RANDOM one drawn from ``rng``)."""
    tasks = list(schedule.task_ids)
    if not plan.fire_times:
        *older, last = plan.missed_fire_times
        return [
            queue_pb2.ScheduleFire(
                schedule_id=schedule.id,
                fire_time=ts(last),
                task_ids=tasks,
                missed=True,
                missed_fire_times=[t for m in older if (t := ts(m))],
            )
        ]
    out = []
    for i, when in enumerate(plan.fire_times):
        jittered = schedule.jitter_seconds > 0
        fire = queue_pb2.ScheduleFire(
            schedule_id=schedule.id,
            fire_time=ts(when),
            task_ids=tasks,
            missed_fire_times=[t for m in plan.missed_fire_times if (t := ts(m))] if i == 0 else [],
            start_time=ts(start_of(schedule, when, rng)) if jittered else None,
        )
        out.append(fire)
    return out
