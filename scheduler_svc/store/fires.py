"""Fires: the scheduler's record of each (schedule, fire time), the jobs it enqueues, and
the list of a schedule's fires. A fire is recorded once (unique on schedule and fire
time); a repeat is a logged no-op answered from the recorded row.

Recording a minute's fires is a few set-based statements whatever their number
(:class:`~.driver.Bulk`): claim every fire row, record the missed windows, read the active
jobs of the tasks due, insert the new jobs, store each fire's outcome.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Collection, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from scheduler_svc.db import Dialect
from scheduler_svc.errors import NotFound, Reason, Resource
from scheduler_svc.records import FireRecord, FireRequest, FireResult, TaskRunResult
from scheduler_svc.schema import fires, schedules
from scheduler_svc.store import alerts, hot, locks, rows
from scheduler_svc.store.driver import Bulk
from scheduler_svc.store.rows import FiringTask
from scheduler_svc.values import FireOutcome, JobStatus, Lane, SkipReason, Trigger

log = logging.getLogger(__name__)

_FireKey = tuple[int, dt.datetime]
#: Each due task of a fire, and why it gets no new job (None: it gets one).
_Decisions = list[tuple[FiringTask, SkipReason | None]]


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
    found_query = sa.select(schedules.c.id).where(
        schedules.c.id.in_({r.schedule_id for r in requests})
    )
    if dialect.row_locks:
        found_query = locks.key_share(dialect, found_query.order_by(schedules.c.id))
    found = set(conn.execute(found_query).scalars())
    live = [r for r in requests if r.schedule_id in found]
    recorded = _record_new_fires(conn, dialect, live, by_id, now)
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


def _record_new_fires(
    conn: Connection,
    dialect: Dialect,
    requests: Sequence[FireRequest],
    tasks_by_id: dict[int, FiringTask],
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
    active = _active(conn, dialect, wanted)
    plan, new_rows = _plan_jobs(claimed, tasks_by_id, active, now)
    inserted = _insert_jobs(conn, dialect, bulk, new_rows, active)
    return _store_outcomes(bulk, plan, inserted, active, fire_ids)


def _claim_fires(
    bulk: Bulk, requests: Sequence[FireRequest], now: dt.datetime
) -> dict[_FireKey, int]:
    """Insert a row for every (schedule, fire time) not recorded yet (outcome ENQUEUED
    until :func:`_store_outcomes` writes it); the ids of those inserted, by key."""
    recorded_at = bulk.when(now)
    return hot.insert_fires(
        bulk,
        [
            (r.schedule_id, bulk.when(r.fire_time), FireOutcome.ENQUEUED, "[]", recorded_at)
            for r in requests
        ],
    )


def _record_missed(bulk: Bulk, claimed: Sequence[FireRequest], now: dt.datetime) -> None:
    """Record each claimed fire's missed windows (catch-up SKIP) as MISSED fires."""
    recorded_at = bulk.when(now)
    missed_rows = [
        (r.schedule_id, bulk.when(t), FireOutcome.MISSED, "[]", recorded_at)
        for r in claimed
        for t in r.missed_fire_times
    ]
    if missed_rows:
        hot.insert_fires(bulk, missed_rows, ids=False)
        log.info("fires missed (catch-up policy)", extra={"count": len(missed_rows)})


def _active(
    conn: Connection, dialect: Dialect, task_ids: Collection[int]
) -> dict[int, tuple[int, str]]:
    """The (job id, status) of the active job of each of ``task_ids`` that has one."""
    found = locks.active_jobs(conn, dialect, task_ids) if task_ids else {}
    return {t: (row.id, row.status) for t, row in found.items()}


def _plan_jobs(
    claimed: Sequence[FireRequest],
    tasks_by_id: dict[int, FiringTask],
    active: dict[int, tuple[int, str]],
    now: dt.datetime,
) -> tuple[list[tuple[FireRequest, _Decisions]], list[dict[str, Any]]]:
    """Decide, in fire order and task-name order, which tasks get a new job: the
    decisions of each fire, and the new job rows in that order (their insertion order)."""
    plan: list[tuple[FireRequest, _Decisions]] = []
    new_rows: list[dict[str, Any]] = []
    new_for_task: set[int] = set()
    for r in claimed:
        decisions: _Decisions = []
        if not r.missed:
            due = sorted(
                (tasks_by_id[t] for t in r.task_ids if t in tasks_by_id), key=lambda t: t.name
            )
            for task in due:
                if not task.enabled:
                    decisions.append((task, SkipReason.TASK_DISABLED))
                elif task.id in active:
                    decisions.append((task, SkipReason.active(active[task.id][1])))
                elif task.id in new_for_task:
                    decisions.append((task, SkipReason.ALREADY_QUEUED))
                else:
                    new_for_task.add(task.id)
                    decisions.append((task, None))
                    new_rows.append(
                        rows.job_row(
                            task,
                            trigger=Trigger.SCHEDULER,
                            lane=Lane.SCHEDULER,
                            now=now,
                            schedule_id=r.schedule_id,
                            fire_time=r.fire_time,
                        )
                    )
        plan.append((r, decisions))
    return plan, new_rows


def _insert_jobs(
    conn: Connection,
    dialect: Dialect,
    bulk: Bulk,
    new_rows: Sequence[dict[str, Any]],
    active: dict[int, tuple[int, str]],
) -> dict[int, int]:
    """Insert ``new_rows``, leaving out a task whose job another transaction queued
    meanwhile (that job is added to ``active``); the new job ids by task id."""
    if not new_rows:
        return {}
    inserted = hot.insert_jobs(bulk, new_rows)
    lost = [row["task_id"] for row in new_rows if row["task_id"] not in inserted]
    if lost:
        active.update(_active(conn, dialect, lost))
    return inserted


def _store_outcomes(
    bulk: Bulk,
    plan: Sequence[tuple[FireRequest, _Decisions]],
    inserted: dict[int, int],
    active: dict[int, tuple[int, str]],
    fire_ids: dict[_FireKey, int],
) -> dict[_FireKey, FireResult]:
    """Each planned fire's runs and outcome, written to its row; the results by key."""
    out: dict[_FireKey, FireResult] = {}
    updates = []
    for r, decisions in plan:
        runs = []
        for task, skip in decisions:
            if skip == SkipReason.TASK_DISABLED:
                job_id = 0
            elif task.id in inserted:
                # The new job, or (ALREADY_QUEUED) the one an earlier fire of this batch
                # created.
                job_id = inserted[task.id]
            else:
                job_id, status = active.get(task.id, (0, JobStatus.QUEUED))
                if skip is None:  # another transaction queued it since the plan
                    skip = SkipReason.active(status)
            runs.append(TaskRunResult(task.id, task.name, job_id, skip))
        if r.missed:
            outcome = FireOutcome.MISSED
        elif any(x.skip_reason is None for x in runs):
            outcome = FireOutcome.ENQUEUED
        else:
            outcome = FireOutcome.SKIPPED
        fire_id = fire_ids[(r.schedule_id, r.fire_time)]
        updates.append((outcome, bulk.json([x.to_json() for x in runs]), fire_id))
        out[(r.schedule_id, r.fire_time)] = FireResult(r, tuple(runs))
    hot.set_fire_outcomes(bulk, updates)
    return out


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
    return FireResult(request, rows.fire(existing).runs, duplicate_fire=True)


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
