"""Backfills: a schedule's past windows in a range, enqueued as fires of their own.

The windows of a backfill are the fire times of the schedule's cron expression in its time
zone within [start, end), with the DST rules of :mod:`tickwork.cron` (a time skipped by
spring forward fires once at the first instant after the gap; a repeated hour fires once),
oldest first. An interval schedule has no windows to backfill: its fire times follow the
finish of each run, so a past window is not defined (FAILED_PRECONDITION).

Each window is recorded as a fire with trigger BACKFILL through the fire path
(:func:`scheduler_svc.store.fires.enqueue_fires`): a window that already has a fire is left
alone (reported already fired), the others go through the overlap policy, and their jobs
carry the window as their fire time, in the backfill lane (below the scheduler's).

The windows are written oldest first in batches of at most :data:`BATCH_WINDOWS`, one
transaction each: between two batches the scheduler's fires, the workers' claims and
their heartbeats get the database's writer, so a backfill of 10,000 windows does not hold
it for seconds. A backfill that fails part way keeps the batches written before; asking
again (or repeating its request_id) writes the rest, the windows written reported
already fired.

This module holds the pure part (which windows, the limits) and the one entry point
(:func:`backfill_schedule`) the servicer calls; the transaction is
:func:`scheduler_svc.store.backfill.backfill`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from scheduler_svc.app import App
from scheduler_svc.errors import FailedPrecondition, InvalidArgument, Reason
from scheduler_svc.firing import next_cron_fire
from scheduler_svc.records import ScheduleRecord
from scheduler_svc.store import Remember
from scheduler_svc.store.backfill import PlanWindows, Span, Window

#: The most windows one backfill may cover.
MAX_WINDOWS = 10_000
#: The most windows written in one transaction.
BATCH_WINDOWS = 500

#: The largest reply a backfill may build, in bytes: a gRPC client accepts 4 MiB by
#: default, less room for the envelope.
MAX_REPLY_BYTES = 4 * 1024 * 1024 - 64 * 1024
#: At least the encoded size of one window without its runs (fire time, flag, fire id, tags).
_WINDOW_BYTES = 40
#: At least the encoded size of one run without its task name (ids, flags, tags).
_RUN_BYTES = 36

_TICK = dt.timedelta(microseconds=1)


@dataclass(frozen=True)
class Range:
    """What a backfill asks for: the windows in [start, end) (aware UTC), through
    ``overlap_policy`` (a stored policy name; None: the schedule's own), written or not."""

    start: dt.datetime
    end: dt.datetime
    overlap_policy: str | None
    dry_run: bool


def check_range(start: dt.datetime, end: dt.datetime, now: dt.datetime) -> None:
    """A backfill's range must be forward and in the past.

    Raises:
        InvalidArgument: naming ``end_time`` when it is not after ``start_time``, or when it
            is after ``now`` (the scheduler fires the windows still to come).
    """
    if end <= start:
        raise InvalidArgument(
            f"must be after start_time ({start.isoformat()}), got {end.isoformat()}",
            field="end_time",
        )
    if end > now:
        raise InvalidArgument(
            f"is after now ({now.isoformat()}); a backfill covers past windows only, the "
            "scheduler fires the ones to come",
            field="end_time",
        )


def windows(schedule: ScheduleRecord, start: dt.datetime, end: dt.datetime) -> list[dt.datetime]:
    """The schedule's fire times in [``start``, ``end``) (aware UTC), oldest first.

    Raises:
        FailedPrecondition: an interval schedule (its windows follow each run's finish).
        InvalidArgument: naming ``end_time`` when the range holds more than
            :data:`MAX_WINDOWS` windows; naming ``start_time`` when it is too early for
            fire times to be computed (the year 1, where a datetime has no room left).
    """
    if not schedule.cron_expression:
        raise FailedPrecondition(
            f"schedule {schedule.name!r} is an interval schedule (every "
            f"{schedule.interval_seconds} s after its previous run finished): it has no fixed "
            "windows to backfill; only a cron schedule can be backfilled",
            field="id",
        )
    try:
        return _windows(schedule, start, end)
    except OverflowError:  # near the year 1: the range ends before now, so never the end
        raise InvalidArgument(
            f"{start.isoformat()} is too early: fire times are computed from the year 2 on",
            field="start_time",
        ) from None


def _windows(schedule: ScheduleRecord, start: dt.datetime, end: dt.datetime) -> list[dt.datetime]:
    out: list[dt.datetime] = []
    nxt = next_cron_fire(schedule, start - _TICK)
    while nxt is not None and nxt < end:
        if len(out) == MAX_WINDOWS:
            raise InvalidArgument(
                f"the range holds more than {MAX_WINDOWS:,} windows of {schedule.name!r} "
                f"(the first after {MAX_WINDOWS:,} is {nxt.isoformat()}); backfill a "
                "shorter range",
                field="end_time",
                reason=Reason.TOO_MANY_ITEMS,
            )
        out.append(nxt)
        nxt = next_cron_fire(schedule, nxt)
    return out


def reply_bytes_bound(task_names: Sequence[str], count: int) -> int:
    """At least the encoded size of a backfill's reply of ``count`` windows, each with a
    run of every task named (the largest ids, every flag set)."""
    per_window = _WINDOW_BYTES + sum(_RUN_BYTES + len(name.encode()) for name in task_names)
    return count * per_window


def check_reply_size(schedule: ScheduleRecord, count: int) -> None:
    """Refuse a backfill whose reply could pass :data:`MAX_REPLY_BYTES` (``count``
    windows, each with a run per task of the schedule) before anything is written: the
    client could not read it and would take enqueued windows for a failed call.

    Raises:
        InvalidArgument: naming ``end_time``.
    """
    size = reply_bytes_bound(schedule.task_names, count)
    if size > MAX_REPLY_BYTES:
        raise InvalidArgument(
            f"the reply for {count:,} windows of {len(schedule.task_names)} tasks could reach "
            f"{size:,} bytes, over the {MAX_REPLY_BYTES:,} a client accepts; backfill a "
            "shorter range",
            field="end_time",
            reason=Reason.TOO_MANY_ITEMS,
        )


def plan(schedule: ScheduleRecord, asked: Range) -> list[dt.datetime]:
    """The windows of ``asked`` for ``schedule`` as it is in the backfill's transaction,
    within the limits (see :func:`windows`, :func:`check_reply_size`)."""
    found = windows(schedule, asked.start, asked.end)
    check_reply_size(schedule, len(found))
    return found


def counts(found: Sequence[Window]) -> dict[str, int]:
    """The windows of a written backfill by what came of them: ``enqueued`` (a task got a
    job), ``skipped`` (every task was skipped), ``already_fired``."""
    out = {"enqueued": 0, "skipped": 0, "already_fired": 0}
    for w in found:
        if w.already_fired:
            out["already_fired"] += 1
        elif any(r.skip_reason is None for r in w.runs):
            out["enqueued"] += 1
        else:
            out["skipped"] += 1
    return out


async def backfill_schedule(
    app: App, schedule_id: int, asked: Range, remember: Remember | None
) -> list[Window]:
    """Backfill ``schedule_id`` over ``asked`` (see the module's rules); the windows oldest
    first. A written backfill wakes the workers and is counted (metric
    ``tickwork_backfill_windows``, by outcome).

    Raises:
        NotFound: naming ``id``.
        FailedPrecondition, InvalidArgument: see :func:`plan`, :func:`check_range` and
            :func:`check_policy`; nothing is written.
        StorageError, DBAPIError: a batch failed; the batches before it stay written.
    """
    now = remember.now if remember is not None else app.clock()
    check_range(asked.start, asked.end, now)

    def plan_windows(schedule: ScheduleRecord) -> list[dt.datetime]:
        return plan(schedule, asked)

    if asked.dry_run:
        found = await app.store.backfill(
            schedule_id, plan_windows, now, overlap_policy=asked.overlap_policy, dry_run=True
        )
    else:
        found = await _write_in_batches(app, schedule_id, asked, plan_windows, now, remember)
    if not asked.dry_run:
        runs = [r for w in found for r in w.runs]
        for run in runs:
            if run.job_id:
                app.hub.job_changed(run.job_id)
        if any(r.skip_reason is None for r in runs):
            app.queue_changed()
        for outcome, count in counts(found).items():
            if count:
                app.metrics.backfill_windows.labels(outcome).inc(count)
    return found


def batches(
    times: Sequence[dt.datetime], start: dt.datetime, end: dt.datetime, size: int
) -> list[Span]:
    """Spans that together cover [``start``, ``end``), each holding ``size`` of ``times``
    (ascending, all in the range; the last span fewer), the first from ``start``; one
    span when ``times`` is empty."""
    starts = [start, *times[size::size]]
    return [(lo, starts[i + 1] if i + 1 < len(starts) else end) for i, lo in enumerate(starts)]


async def _write_in_batches(
    app: App,
    schedule_id: int,
    asked: Range,
    plan_windows: PlanWindows,
    now: dt.datetime,
    remember: Remember | None,
) -> list[Window]:
    """Plan the windows in a read (the transactions then do not walk the range while they
    hold the writer), and write them :data:`BATCH_WINDOWS` at a time, the request's
    answer (``remember``) with the last batch. Each batch re-reads the schedule; one changed
    since the plan has its windows planned again (see :meth:`Store.backfill`)."""
    planned = await app.store.plan_backfill(schedule_id, plan_windows)
    spans = batches(planned[1], asked.start, asked.end, BATCH_WINDOWS)
    found: list[Window] = []
    for i, span in enumerate(spans):
        last = i == len(spans) - 1
        written = await app.store.backfill(
            schedule_id,
            plan_windows,
            now,
            overlap_policy=asked.overlap_policy,
            planned=planned,
            span=span,
            remember=_whole_answer(remember, list(found)) if last else None,
        )
        found.extend(written)
    return found


def _whole_answer(remember: Remember | None, earlier: list[Window]) -> Remember | None:
    """``remember`` for the last batch: the answer stored is that of every batch."""
    if remember is None:
        return None
    answer = remember.answer
    return dataclasses.replace(remember, answer=lambda last: answer([*earlier, *last]))
