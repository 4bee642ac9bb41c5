"""A backfill's transaction: read the schedule, plan its windows, leave out those already
fired, record the others as fires with trigger BACKFILL through the fire path
(:func:`.fires.enqueue_fires`, so the overlap policy and the one-active-job rule apply as
to any fire), in one transaction: all the windows of the call or none. A long backfill
is several calls, one per batch of windows (a ``span`` of its range each), so that the
scheduler's fires, claims and heartbeats get the writer between them."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from scheduler_svc.db import Dialect
from scheduler_svc.errors import NotFound, Reason, Resource
from scheduler_svc.records import FireRequest, FireResult, ScheduleRecord, TaskRunResult
from scheduler_svc.schema import fires
from scheduler_svc.store import schedules
from scheduler_svc.store.fires import enqueue_fires
from scheduler_svc.values import OverlapPolicy, Trigger

#: The windows of a schedule (as it is in the transaction) that a backfill covers, oldest
#: first; raises (InvalidArgument, FailedPrecondition) to refuse the backfill.
PlanWindows = Callable[[ScheduleRecord], list[dt.datetime]]
#: Windows planned before the transaction, from the schedule as it was then.
Planned = tuple[ScheduleRecord, list[dt.datetime]]
#: The part [start, end) (aware UTC) of a backfill's range one transaction covers.
Span = tuple[dt.datetime, dt.datetime]


def _same_windows(a: ScheduleRecord, b: ScheduleRecord) -> bool:
    """Whether two reads of a schedule have the same windows and tasks."""
    return (a.cron_expression, a.timezone, a.task_ids, a.task_names) == (
        b.cron_expression,
        b.timezone,
        b.task_ids,
        b.task_names,
    )


@dataclass(frozen=True)
class Window:
    """One window of a backfill: its fire time (aware UTC), whether it already had a fire
    record (nothing was enqueued for it), the fire recorded for it (0 in a dry run or when
    already fired) and its tasks' runs (empty in a dry run or when already fired)."""

    fire_time: dt.datetime
    already_fired: bool
    fire_id: int = 0
    runs: tuple[TaskRunResult, ...] = ()


def _no_schedule(schedule_id: int) -> NotFound:
    return NotFound(
        f"no schedule with id {schedule_id}",
        field="id",
        reason=Reason.SCHEDULE_NOT_FOUND,
        resource=Resource.schedule(schedule_id),
    )


def schedule_of(conn: Connection, schedule_id: int) -> ScheduleRecord:
    """The schedule with its tasks. Raises NotFound naming ``id`` (the request's field)."""
    try:
        return schedules.get_schedule(conn, schedule_id)
    except NotFound:
        raise _no_schedule(schedule_id) from None


def _fired(conn: Connection, schedule_id: int, times: Sequence[dt.datetime]) -> set[dt.datetime]:
    """Which of ``times`` (ascending) already have a fire of the schedule: one range read
    on uq_fires_schedule_fire_time."""
    if not times:
        return set()
    query = sa.select(fires.c.fire_time).where(
        fires.c.schedule_id == schedule_id,
        fires.c.fire_time >= times[0],
        fires.c.fire_time <= times[-1],
    )
    wanted = set(times)
    return {t for t in conn.execute(query).scalars() if t in wanted}


def _fire_request(
    schedule: ScheduleRecord, fire_time: dt.datetime, overlap_policy: str | None
) -> FireRequest:
    """One window's fire, through ``overlap_policy`` (a stored name; None: the schedule's
    own)."""
    return FireRequest(
        schedule.id,
        fire_time,
        schedule.task_ids,
        trigger=Trigger.BACKFILL,
        overlap_policy=OverlapPolicy(overlap_policy) if overlap_policy else None,
    )


def _enqueue_windows(
    conn: Connection, dialect: Dialect, requests: Sequence[FireRequest], now: dt.datetime
) -> list[FireResult]:
    """The windows' fires through the fire path: each through the overlap policy, oldest
    first (an earlier window's new job makes a later one find its task queued)."""
    return enqueue_fires(conn, dialect, requests, now)


def backfill(
    conn: Connection,
    dialect: Dialect,
    schedule_id: int,
    plan_windows: PlanWindows,
    now: dt.datetime,
    *,
    overlap_policy: str | None,
    dry_run: bool,
    planned: Planned | None = None,
    span: Span | None = None,
) -> list[Window]:
    """See :meth:`scheduler_svc.store.Store.backfill`."""
    schedule = schedule_of(conn, schedule_id)
    if planned is not None and _same_windows(planned[0], schedule):
        times = planned[1]
    else:
        times = plan_windows(schedule)
    if span is not None:
        times = [t for t in times if span[0] <= t < span[1]]
    fired = _fired(conn, schedule_id, times)
    if dry_run:
        return [Window(t, t in fired) for t in times]
    requests = [_fire_request(schedule, t, overlap_policy) for t in times if t not in fired]
    results = {r.request.fire_time: r for r in _enqueue_windows(conn, dialect, requests, now)}
    out = []
    for t in times:
        result = results.get(t)
        if result is None or result.duplicate_fire:
            # Recorded before this backfill, or by a fire that committed since the read.
            out.append(Window(t, True))
        elif not result.schedule_found:
            raise _no_schedule(schedule_id)  # deleted meanwhile: nothing is written
        else:
            out.append(Window(t, False, result.fire_id, result.runs))
    return out
