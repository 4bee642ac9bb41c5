"""The overview: workers, queue depth, running jobs, failing and disabled tasks, the last
24 hours' missed and skipped fires, and the fires due in the next hour."""

from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from tickwork.console import format as fmt
from tickwork.console.sessions import Session
from tickwork.console.web import console_of, page, render
from tickwork.v1.job_pb2 import JobStatus
from tickwork.v1.schedule_pb2 import Fire, FireOutcome, Schedule

#: Schedules whose fire history the overview reads (the first, by name).
FIRE_HISTORY_SCHEDULES = 200
#: Most fires of one schedule shown as due in the next hour.
DUE_PER_SCHEDULE = 12
#: Most rows of each fire table.
MAX_ROWS = 100
#: API calls the overview makes at once.
CONCURRENT_CALLS = 16
#: Running jobs whose output line is live (each is a stream the browser keeps open).
LIVE_LINES = 3


@dataclass(frozen=True)
class FireRow:
    """A fire of the last 24 hours that enqueued nothing."""

    schedule: Schedule
    fire: Fire


@dataclass(frozen=True)
class DueRow:
    """A fire time in the next hour."""

    schedule: Schedule
    fire_time: dt.datetime
    local_time: str
    dst_note: str


async def _recent_quiet_fires(
    session: Session, schedules: list[Schedule], since: dt.datetime, calls: asyncio.Semaphore
) -> list[FireRow]:
    async def one(schedule: Schedule) -> list[FireRow]:
        async with calls:
            fires = await session.client.list_fires(schedule.id, limit=200)
        return [
            FireRow(schedule, f)
            for f in fires
            if f.outcome in (FireOutcome.FIRE_OUTCOME_SKIPPED, FireOutcome.FIRE_OUTCOME_MISSED)
            and (fmt.when(f.fire_time) or since) >= since
        ]

    chunks = await asyncio.gather(*(one(s) for s in schedules[:FIRE_HISTORY_SCHEDULES]))
    rows = [row for chunk in chunks for row in chunk]
    rows.sort(key=lambda r: r.fire.fire_time.ToNanoseconds(), reverse=True)
    return rows[:MAX_ROWS]


async def _due_soon(
    session: Session, schedules: list[Schedule], now: dt.datetime, calls: asyncio.Semaphore
) -> list[DueRow]:
    horizon = now + dt.timedelta(hours=1)

    async def one(schedule: Schedule) -> list[DueRow]:
        first = fmt.when(schedule.next_run_time)
        if first is None or first > horizon:
            return []
        end = fmt.when(schedule.end_time)  # no fire at or after it; None: no end
        if not schedule.cron_expression:
            return [DueRow(schedule, first, fmt.clock(first, schedule.timezone), "")]
        async with calls:
            preview = await session.client.describe_cron(
                schedule.cron_expression,
                schedule.timezone or "UTC",
                after=first - dt.timedelta(microseconds=1),
                count=DUE_PER_SCHEDULE,
            )
        return [
            DueRow(schedule, at, p.local_time, p.dst_note)
            for p in preview.fire_times
            if (at := p.fire_time.ToDatetime(tzinfo=dt.UTC)) <= horizon
            and (end is None or at < end)
        ]

    chunks = await asyncio.gather(*(one(s) for s in schedules if s.enabled))
    rows = [row for chunk in chunks for row in chunk]
    rows.sort(key=lambda r: (r.fire_time, r.schedule.name))
    return rows[:MAX_ROWS]


@page
async def overview(request: Request, session: Session) -> Response:
    """GET /: the overview."""
    api = console_of(request).api
    now = dt.datetime.now(dt.UTC)
    status, running, tasks, schedules = await asyncio.gather(
        api.status(session.token),
        api.jobs_page(session.token, statuses=[JobStatus.JOB_STATUS_RUNNING], page_size=100),
        session.client.list_tasks(),
        session.client.list_schedules(),
    )
    calls = asyncio.Semaphore(CONCURRENT_CALLS)
    quiet, due = await asyncio.gather(
        _recent_quiet_fires(session, schedules, now - dt.timedelta(hours=24), calls),
        _due_soon(session, schedules, now, calls),
    )
    return render(
        request,
        "overview.html",
        session,
        status=status,
        read_time=fmt.when(status.read_time) or now,
        running=running.jobs,
        failing=[t for t in tasks if t.enabled and t.consecutive_failure_count > 0],
        disabled=[t for t in tasks if not t.enabled],
        quiet_fires=quiet,
        due=due,
        live_lines=LIVE_LINES,
    )
