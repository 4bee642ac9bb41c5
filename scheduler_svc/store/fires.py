"""Fires: the scheduler's record of each (schedule, fire time), the jobs it enqueues, and
the list of a schedule's fires. A fire is recorded once (unique on schedule and fire
time); a repeat is a logged no-op answered from the recorded row.

Recording a minute's fires is a few set-based statements whatever their number
(:class:`~.driver.Bulk`): claim every fire row, record the missed windows, read the active
jobs of the tasks due, decide each task's run through the fire's overlap policy
(:mod:`.overlap`), insert the new jobs, ask for the abort of the jobs replaced, store each
fire's outcome.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Collection, Sequence
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from scheduler_svc.db import Dialect
from scheduler_svc.errors import NotFound, Reason, Resource
from scheduler_svc.records import (
    DEFAULT_MAX_BUFFERED,
    FireRecord,
    FireRequest,
    FireResult,
    TaskRunResult,
)
from scheduler_svc.schema import fires, schedules
from scheduler_svc.store import alerts, hot, locks, overlap, rows
from scheduler_svc.store.driver import Bulk
from scheduler_svc.store.rows import FiringTask
from scheduler_svc.values import FireOutcome, JobStatus, Lane, OverlapPolicy, SkipReason, Trigger

log = logging.getLogger(__name__)

_FireKey = tuple[int, dt.datetime]
#: Each due task of a fire, what it gets, and the index of its new job's row (None: none).
_Decisions = list[tuple[FiringTask, overlap.Decision, int | None]]


def enqueue_fires(
    conn: Connection, dialect: Dialect, requests: Sequence[FireRequest], now: dt.datetime
) -> list[FireResult]:
    """See :meth:`scheduler_svc.store.Store.enqueue_fires`."""
    if not requests:
        return []
    all_task_ids = {t for r in requests if not r.missed for t in r.task_ids}
    by_id = {
        row.id: FiringTask(*row)
        for row in conn.execute(locks.FIRING_TASKS, {"b_task_ids": list(all_task_ids)})
    }
    # The schedules after their tasks (LOCK_ORDER), FOR KEY SHARE where rows are locked: a
    # DeleteSchedule under way is waited for and its schedule then not found, so a fire's
    # row never fails its foreign key (which would fail every other fire of the call).
    found_query = sa.select(
        schedules.c.id, schedules.c.overlap_policy, schedules.c.max_buffered
    ).where(schedules.c.id.in_({r.schedule_id for r in requests}))
    if dialect.row_locks:
        found_query = locks.key_share(dialect, found_query.order_by(schedules.c.id))
    found = {
        row.id: _Policy(OverlapPolicy(row.overlap_policy), row.max_buffered or DEFAULT_MAX_BUFFERED)
        for row in conn.execute(found_query)
    }
    live = [r for r in requests if r.schedule_id in found]
    recorded = _record_new_fires(conn, dialect, live, by_id, found, now)
    out = []
    for request in requests:
        key = (request.schedule_id, request.fire_time)
        if request.schedule_id not in found:
            out.append(FireResult(request, (), schedule_found=False))
        elif key in recorded:
            # Its first request in this batch; a repeat is answered as a duplicate from the
            # row, as a repeat in a later call is.
            out.append(recorded.pop(key))
        else:
            out.append(_recorded_fire(conn, request))
    return out


def enqueue_fire(
    conn: Connection, dialect: Dialect, request: FireRequest, now: dt.datetime
) -> FireResult:
    """See :meth:`scheduler_svc.store.Store.enqueue_fire`."""
    (result,) = enqueue_fires(conn, dialect, [request], now)
    if not result.schedule_found:
        raise NotFound(
            f"no schedule with id {request.schedule_id}",
            field="schedule_id",
            reason=Reason.SCHEDULE_NOT_FOUND,
            resource=Resource.schedule(request.schedule_id),
        )
    return result


class _Policy(NamedTuple):
    """A schedule's overlap policy and its cap on queued jobs of a task under BUFFER_ALL
    and ALLOW (max_buffered, 0 read as 100)."""

    policy: OverlapPolicy
    cap: int


def _record_new_fires(
    conn: Connection,
    dialect: Dialect,
    requests: Sequence[FireRequest],
    tasks_by_id: dict[int, FiringTask],
    policies: dict[int, _Policy],
    now: dt.datetime,
) -> dict[_FireKey, FireResult]:
    """Record the fires of ``requests`` that are not recorded yet; their results by
    (schedule, fire time). A fire already recorded is left out, for the caller to answer
    from the recorded row."""
    if not requests:
        return {}
    bulk = Bulk(conn)
    fire_ids = _claim_fires(bulk, requests, now)
    # The first request of each (schedule, fire time) claimed it; one named again in the
    # same batch is a repeat, answered from the row the first one writes.
    first: dict[_FireKey, FireRequest] = {}
    for r in requests:
        if (r.schedule_id, r.fire_time) in fire_ids:
            first.setdefault((r.schedule_id, r.fire_time), r)
    claimed = list(first.values())
    _record_missed(bulk, claimed, now)
    alerts.insert_missed_fires(conn, claimed, now)
    wanted = {t for r in claimed if not r.missed for t in r.task_ids if t in tasks_by_id}
    if dialect.row_locks:
        active = _active(conn, dialect, wanted)
        loads = {t: overlap.TaskLoad(active.get(t, ())) for t in wanted}
    else:
        active, loads = {}, overlap.counted_loads(conn, wanted)
    plan, new_rows = _plan_jobs(claimed, tasks_by_id, policies, loads, now)
    inserted = _insert_jobs(bulk, new_rows)
    overlap.request_replacements(
        conn,
        [
            (d.replace_job_id, overlap.replaced_reason(r.fire_time))
            for r, decisions in plan
            for _, d, i in decisions
            if d.replace_job_id and i is not None and i in inserted
        ],
    )
    lost = {new_rows[i]["task_id"] for i in range(len(new_rows)) if i not in inserted}
    if lost:  # another transaction queued a plain job meanwhile: the fire found it
        active.update(_active(conn, dialect, lost))
    return _store_outcomes(bulk, plan, inserted, active, fire_ids, now)


def _claim_fires(
    bulk: Bulk, requests: Sequence[FireRequest], now: dt.datetime
) -> dict[_FireKey, int]:
    """Insert a row for every (schedule, fire time) not recorded yet (outcome ENQUEUED
    until :func:`_store_outcomes` writes it); the ids of those inserted, by key."""
    recorded_at = bulk.when(now)
    return hot.insert_fires(
        bulk,
        [
            (
                r.schedule_id,
                bulk.when(r.fire_time),
                FireOutcome.ENQUEUED,
                "[]",
                recorded_at,
                bulk.when(r.start_at),
                r.trigger,
            )
            for r in requests
        ],
    )


def _record_missed(bulk: Bulk, claimed: Sequence[FireRequest], now: dt.datetime) -> None:
    """Record each claimed fire's missed windows (catch-up SKIP) as MISSED fires."""
    recorded_at = bulk.when(now)
    missed_rows = [
        (r.schedule_id, bulk.when(t), FireOutcome.MISSED, "[]", recorded_at, None, r.trigger)
        for r in claimed
        for t in r.missed_fire_times
    ]
    if missed_rows:
        hot.insert_fires(bulk, missed_rows, ids=False)
        log.info("fires missed (catch-up policy)", extra={"count": len(missed_rows)})


def _active(
    conn: Connection, dialect: Dialect, task_ids: Collection[int]
) -> dict[int, list[overlap.ActiveJob]]:
    """The active jobs of each of ``task_ids`` that has one, in job id order."""
    found = locks.all_active_jobs(conn, dialect, task_ids) if task_ids else {}
    return {
        t: [overlap.ActiveJob(row.id, row.status, row.overlap) for row in found_rows]
        for t, found_rows in found.items()
    }


def lane_of(trigger: Trigger | str) -> Lane:
    """The lane of a fire's jobs: the scheduler's for its loop's fires, the backfill lane
    (below it) for a backfill's windows, the manual lane for one a person or a program
    asked for (TriggerSchedule)."""
    if trigger == Trigger.SCHEDULER:
        return Lane.SCHEDULER
    return Lane.BACKFILL if trigger == Trigger.BACKFILL else Lane.MANUAL


def _plan_jobs(
    claimed: Sequence[FireRequest],
    tasks_by_id: dict[int, FiringTask],
    policies: dict[int, _Policy],
    loads: dict[int, overlap.TaskLoad],
    now: dt.datetime,
) -> tuple[list[tuple[FireRequest, _Decisions]], list[dict[str, Any]]]:
    """Decide, in fire order and task-name order, what each task of each fire gets, through
    the fire's overlap policy (:func:`overlap.decide`): the decisions of each fire, and the
    new job rows in that order (their insertion order). A job planned for an earlier fire
    of the same call counts as the task's queued job (a negative id: -1 - its row's index)."""
    plan: list[tuple[FireRequest, _Decisions]] = []
    new_rows: list[dict[str, Any]] = []
    # Each task's load (``loads``: its stored active jobs, counted) is kept up to date with
    # the jobs planned here: a fire costs the same however many jobs the call's earlier
    # fires planned (a long backfill stays linear). It is updated in place.
    for r in claimed:
        decisions: _Decisions = []
        policy = policies[r.schedule_id]
        if not r.missed:
            due = sorted(
                (tasks_by_id[t] for t in r.task_ids if t in tasks_by_id), key=lambda t: t.name
            )
            for task in due:
                if not task.enabled:
                    decisions.append((task, overlap.Decision(SkipReason.TASK_DISABLED), None))
                    continue
                load = loads.setdefault(task.id, overlap.TaskLoad())
                decision = overlap.decide_load(r.overlap_policy or policy.policy, load, policy.cap)
                if decision.skip is not None:
                    decisions.append((task, decision, None))
                    continue
                index = len(new_rows)
                load.add(overlap.ActiveJob(-1 - index, JobStatus.QUEUED, decision.behind))
                decisions.append((task, decision, index))
                new_rows.append(
                    rows.job_row(
                        task,
                        trigger=r.trigger,
                        lane=lane_of(r.trigger),
                        now=now,
                        schedule_id=r.schedule_id,
                        fire_time=r.fire_time,
                        overlap=decision.behind,
                        # A jittered fire's jobs are not started before its start.
                        not_before=_not_before(r, now),
                    )
                )
        plan.append((r, decisions))
    return plan, new_rows


def _not_before(request: FireRequest, now: dt.datetime) -> dt.datetime | None:
    """A fire's jobs' not_before: its jittered start while that is ahead of ``now``."""
    start = request.start_at
    return start if start is not None and start > now else None


def _insert_jobs(bulk: Bulk, new_rows: Sequence[dict[str, Any]]) -> dict[int, int]:
    """Insert ``new_rows``, leaving out a plain job whose task another transaction gave a
    plain job meanwhile; the new job ids by row index."""
    if not new_rows:
        return {}
    ids = hot.insert_jobs(bulk, new_rows)
    out = {}
    for i, row in enumerate(new_rows):
        job_id = ids.get((row["task_id"], row["schedule_id"], row["fire_time"]))
        if job_id is not None:
            out[i] = job_id
    return out


def _store_outcomes(
    bulk: Bulk,
    plan: Sequence[tuple[FireRequest, _Decisions]],
    inserted: dict[int, int],
    active: dict[int, list[overlap.ActiveJob]],
    fire_ids: dict[_FireKey, int],
    now: dt.datetime,
) -> dict[_FireKey, FireResult]:
    """Each planned fire's runs and outcome, written to its row; the results by key."""
    out: dict[_FireKey, FireResult] = {}
    updates = []
    for r, decisions in plan:
        runs = []
        for task, d, index in decisions:
            skip, job_id, how = d.skip, d.job_id, d.outcome
            if job_id < 0:  # the job an earlier fire of this call planned
                job_id = inserted.get(-1 - job_id, 0)
            if index is not None:
                if index in inserted:
                    job_id = inserted[index]
                else:  # another transaction queued a plain job since the plan
                    found = active.get(task.id) or [overlap.ActiveJob(0, JobStatus.QUEUED, "")]
                    job_id, skip, how = found[0].id, SkipReason.active(found[0].status), ""
            runs.append(
                TaskRunResult(
                    task.id,
                    task.name,
                    job_id,
                    skip,
                    overlap=how,
                    replaced_job_id=d.replace_job_id if how == overlap.REPLACED else 0,
                )
            )
        outcome = _outcome(r, runs)
        fire_id = fire_ids[(r.schedule_id, r.fire_time)]
        updates.append((outcome, bulk.json([x.to_json() for x in runs]), fire_id))
        out[(r.schedule_id, r.fire_time)] = FireResult(
            r, tuple(runs), outcome=outcome, fire_id=fire_id, recorded_at=now
        )
    hot.set_fire_outcomes(bulk, updates)
    return out


def _outcome(request: FireRequest, runs: Sequence[TaskRunResult]) -> FireOutcome:
    """A fire's outcome from its tasks': MISSED, else REPLACED when a task replaced its
    running job, BUFFERED when a task's new job waits, ENQUEUED when a task got a job,
    SKIPPED when none did."""
    if request.missed:
        return FireOutcome.MISSED
    if any(x.overlap == overlap.REPLACED for x in runs):
        return FireOutcome.REPLACED
    if any(x.overlap == overlap.BUFFERED for x in runs):
        return FireOutcome.BUFFERED
    if any(x.skip_reason is None for x in runs):
        return FireOutcome.ENQUEUED
    return FireOutcome.SKIPPED


def _recorded_fire(conn: Connection, request: FireRequest) -> FireResult:
    """The result stored for a fire that was already recorded (a repeat after a crash, or
    a second scheduler): nothing is enqueued again."""
    existing = conn.execute(
        fires.select().where(
            fires.c.schedule_id == request.schedule_id, fires.c.fire_time == request.fire_time
        )
    ).one()
    log.info(
        "fire already recorded; not enqueued again",
        extra={"schedule_id": request.schedule_id, "fire_time": request.fire_time.isoformat()},
    )
    record = rows.fire(existing)
    return FireResult(
        request,
        record.runs,
        duplicate_fire=True,
        outcome=record.outcome,
        fire_id=record.id,
        recorded_at=record.recorded_at,
    )


def list_fires(
    conn: Connection, schedule_id: int, limit: int, before: dt.datetime | None
) -> list[FireRecord]:
    """See :meth:`scheduler_svc.store.Store.list_fires`."""
    query = fires.select().where(fires.c.schedule_id == schedule_id)
    if before is not None:
        query = query.where(fires.c.fire_time < before)
    exists = conn.scalar(sa.select(schedules.c.id).where(schedules.c.id == schedule_id))
    if exists is None:
        raise NotFound(
            f"no schedule with id {schedule_id}",
            field="schedule_id",
            reason=Reason.SCHEDULE_NOT_FOUND,
            resource=Resource.schedule(schedule_id),
        )
    found = conn.execute(query.order_by(fires.c.fire_time.desc()).limit(limit)).all()
    return [rows.fire(r) for r in found]


def fire_window(
    conn: Connection, schedule_id: int, fire_time: dt.datetime
) -> tuple[str, dt.datetime | None]:
    """See :meth:`scheduler_svc.store.Store.fire_window`."""
    name = conn.scalar(sa.select(schedules.c.name).where(schedules.c.id == schedule_id))
    previous = conn.scalar(
        sa.select(fires.c.fire_time)
        .where(fires.c.schedule_id == schedule_id, fires.c.fire_time < fire_time)
        .order_by(fires.c.fire_time.desc())
        .limit(1)
    )
    return name or "", previous
