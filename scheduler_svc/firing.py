"""When a schedule fires next, and what to do with a due fire (catch-up after downtime).

Pure functions over a :class:`ScheduleRecord` and an instant; no I/O, no clock. The cron
rules themselves (dialect, DST) live in :mod:`tickwork.cron`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from functools import lru_cache

from scheduler_svc.records import ScheduleRecord
from tickwork.cron import CronSchedule

UTC = dt.UTC

#: Seconds a window may be past when its tick processes it and still be tick jitter, never a
#: missed window (see :func:`plan_fire`).
MISFIRE_GRACE_S = 5.0

#: At most this many missed fire times are recorded one by one for one catch-up.
MAX_RECORDED_MISSES = 1000


@lru_cache(maxsize=4096)
def cron_schedule(expression: str, timezone: str) -> CronSchedule:
    """The parsed schedule for (expression, zone); cached, since parsing is the costly part.

    Raises CronError for an invalid expression or zone.
    """
    return CronSchedule(expression, timezone)


def next_cron_fire(schedule: ScheduleRecord, after: dt.datetime) -> dt.datetime | None:
    """The first cron fire time strictly after ``after``, in UTC; None if it never fires."""
    return _next_cron_fire(schedule.cron_expression, schedule.timezone, after.astimezone(UTC))


@lru_cache(maxsize=8192)
def _next_cron_fire(expression: str, timezone: str, after: dt.datetime) -> dt.datetime | None:
    """:func:`next_cron_fire`, cached by (expression, zone, instant): the answer depends on
    nothing else, and schedules sharing an expression fire together (10,000 schedules on
    ``* * * * *`` ask the same question 10,000 times a minute)."""
    nxt = cron_schedule(expression, timezone).next_fire_time(after)
    return None if nxt is None else nxt.astimezone(UTC)


def first_fire_after(schedule: ScheduleRecord, now: dt.datetime) -> dt.datetime | None:
    """A schedule's next run computed from scratch at ``now`` (create, update, self-heal).

    Cron: the first fire time strictly after now. Interval: now + interval. None when the
    schedule is disabled or can never fire again.
    """
    if not schedule.enabled:
        return None
    if schedule.cron_expression:
        return next_cron_fire(schedule, now)
    return now + dt.timedelta(seconds=schedule.interval_seconds)


@dataclass(frozen=True)
class FirePlan:
    """What the scheduler does with a due schedule.

    ``fire_time`` is recorded; it is enqueued when ``enqueue`` is true, recorded as missed
    otherwise. ``missed_fire_times`` are earlier windows recorded as missed. The schedule's
    next run becomes ``next_run_at``.
    """

    fire_time: dt.datetime
    enqueue: bool
    missed_fire_times: tuple[dt.datetime, ...]
    next_run_at: dt.datetime | None


def plan_fire(
    schedule: ScheduleRecord, now: dt.datetime, grace_s: float = MISFIRE_GRACE_S
) -> FirePlan:
    """Decide a due schedule's fire (``schedule.next_run_at`` <= ``now``).

    Cron: while ``now`` has not reached the *following* fire time, the due fire is on time
    (however late within its own window) and is enqueued; the next run is the following
    fire time. Once later windows have come too, each window more than ``grace_s`` old was
    missed (downtime) and is recorded as such, while a window at most ``grace_s`` old is
    tick jitter, never a missed window: the earliest of those fires normally (the next
    run is the one after it, so the loop fires the rest the same way). When every window
    that came is older than ``grace_s``, the catch-up policy decides about the latest one:
    RUN_ONCE enqueues it, SKIP (the default) records it missed too; the next run is then
    the first fire time after ``now``. Interval: due + interval + ``grace_s`` still ahead
    means on time; otherwise the same catch-up, the next run ``now`` + interval.
    """
    due = schedule.next_run_at
    assert due is not None and due <= now
    grace = dt.timedelta(seconds=grace_s)
    if schedule.cron_expression:
        following = next_cron_fire(schedule, due)
        if following is None or now < following:
            return FirePlan(due, True, (), following)
        windows = [due]  # every fire time that has come, oldest first (at most a cap)
        nxt: dt.datetime | None = following
        while nxt is not None and nxt <= now and len(windows) < MAX_RECORDED_MISSES:
            windows.append(nxt)
            nxt = next_cron_fire(schedule, nxt)
        if nxt is not None and nxt <= now:
            return _plan_long_catch_up(schedule, windows, now, grace)
        stale = [t for t in windows if now - t > grace]
        if len(stale) < len(windows):  # a window within the grace: it fires on time
            fresh = windows[len(stale)]
            after = windows[len(stale) + 1] if len(stale) + 1 < len(windows) else nxt
            return FirePlan(fresh, True, tuple(stale), after)
        missed = windows
        next_run = nxt if nxt is not None and nxt > now else next_cron_fire(schedule, now)
    else:
        interval = dt.timedelta(seconds=schedule.interval_seconds)
        if now < due + interval + grace:
            return FirePlan(due, True, (), now + interval)
        missed = [due]
        next_run = now + interval
    run_once = schedule.catch_up_policy == "RUN_ONCE"
    return FirePlan(missed[-1], run_once, tuple(missed[:-1]), next_run)


def _plan_long_catch_up(
    schedule: ScheduleRecord, recorded: list[dt.datetime], now: dt.datetime, grace: dt.timedelta
) -> FirePlan:
    """:func:`plan_fire` when more windows came than :data:`MAX_RECORDED_MISSES`: the first
    ``recorded`` ones are recorded missed; the windows near ``now`` are found from ``now``
    (not by walking every window of a long downtime), so a window within the grace still
    fires and RUN_ONCE enqueues the latest window, not the last one recorded."""
    just_before = now - grace - dt.timedelta(microseconds=1)
    fresh = next_cron_fire(schedule, max(recorded[-1], just_before))
    if fresh is not None and fresh <= now:  # at most ``grace`` old: it fires on time
        return FirePlan(fresh, True, tuple(recorded), next_cron_fire(schedule, fresh))
    latest = _latest_fire(schedule, recorded[-1], now)
    run_once = schedule.catch_up_policy == "RUN_ONCE"
    return FirePlan(latest, run_once, tuple(recorded), next_cron_fire(schedule, now))


def _latest_fire(schedule: ScheduleRecord, after: dt.datetime, now: dt.datetime) -> dt.datetime:
    """The last fire time in (``after``, ``now``], known to exist: looks back from ``now``
    over spans growing fourfold from a minute, then walks forward within the first span that
    holds one (a few windows, whatever the schedule's period)."""
    span = dt.timedelta(minutes=1)
    while True:
        start = max(now - span, after)
        found = next_cron_fire(schedule, start)
        if found is not None and found <= now:
            while (nxt := next_cron_fire(schedule, found)) is not None and nxt <= now:
                found = nxt
            return found
        assert start > after, "no fire time in the interval"
        span *= 4
