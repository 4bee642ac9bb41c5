"""When a schedule fires next, and what to do with a due fire (catch-up after downtime,
the bounds, the jittered start).

Pure functions over a :class:`ScheduleRecord` and an instant; no I/O, no clock (a RANDOM
jitter takes the caller's random source). The cron rules themselves (dialect, DST) live in
:mod:`tickwork.cron`.

The catch-up rules, for a due schedule whose *following* window has come too (downtime),
with W its ``catch_up_window_seconds`` and a window's age ``now`` minus its fire time:

- a window at most min(W, :data:`MISFIRE_GRACE_S`) old is tick lateness: it fires as its
  own fire under every policy;
- SKIP: the latest window still fires when it is at most W old; every other one is missed;
- RUN_ONCE: the latest window fires whatever its age (one run for the downtime); every
  other one is missed;
- RUN_ALL: every window at most W old fires, oldest first, each its own fire, at most
  ``max_catch_up_runs`` of them (the newest kept, the older ones missed); windows older than
  W are missed;
- a missed window is recorded MISSED (at most :data:`MAX_RECORDED_MISSES` one by one); the
  next run is then the first fire time after ``now``.
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass
from functools import lru_cache

from scheduler_svc.records import ScheduleRecord
from tickwork.cron import CronSchedule
from tickwork.jitter import delay_s

UTC = dt.UTC
_TICK = dt.timedelta(microseconds=1)

#: Seconds a window may be past when its tick processes it and still be tick lateness,
#: never a missed window, under every catch-up policy (see :func:`plan_fire`); a schedule's
#: catch_up_window_seconds below it lowers it.
MISFIRE_GRACE_S = 5.0

#: A schedule's catch_up_window_seconds when none is given, seconds.
DEFAULT_CATCH_UP_WINDOW_S = 5.0

#: RUN_ALL's cap on the windows fired after one downtime when max_catch_up_runs is 0, and
#: the largest cap a schedule may set.
DEFAULT_MAX_CATCH_UP_RUNS = 100
MAX_CATCH_UP_RUNS = 10_000

#: At most this many missed fire times are recorded one by one for one catch-up.
MAX_RECORDED_MISSES = 1000

#: At most this many task runs (windows times the schedule's tasks, at least one window)
#: are fired by one plan; the next run is then the next window to fire, so the tick's
#: next pass continues. A RUN_ALL catch-up of 10,000 windows of one task is one pass (the
#: scheduler cuts it into EnqueueFires calls of bounded replies); each pass walks the
#: windows left, so fewer passes is what keeps a long catch-up cheap.
RUNS_PER_PLAN = 10_000


@lru_cache(maxsize=4096)
def cron_schedule(expression: str, timezone: str) -> CronSchedule:
    """The parsed schedule for (expression, zone); cached, since parsing is the costly part.

    Raises CronError for an invalid expression or zone.
    """
    return CronSchedule(expression, timezone)


def next_cron_fire(schedule: ScheduleRecord, after: dt.datetime) -> dt.datetime | None:
    """The first cron fire time strictly after ``after``, in UTC, before the schedule's
    end_at; None if there is none."""
    nxt = _next_cron_fire(schedule.cron_expression, schedule.timezone, after.astimezone(UTC))
    return bounded(schedule, nxt)


def bounded(schedule: ScheduleRecord, when: dt.datetime | None) -> dt.datetime | None:
    """``when``, or None when it is at or after the schedule's end_at (no fire there)."""
    if when is None or (schedule.end_at is not None and when >= schedule.end_at):
        return None
    return when


@lru_cache(maxsize=8192)
def _next_cron_fire(expression: str, timezone: str, after: dt.datetime) -> dt.datetime | None:
    """The expression's first fire time strictly after ``after``, cached by (expression,
    zone, instant): the answer depends on nothing else, and schedules sharing an expression
    fire together (10,000 schedules on ``* * * * *`` ask the same question 10,000 times a
    minute)."""
    nxt = cron_schedule(expression, timezone).next_fire_time(after)
    return None if nxt is None else nxt.astimezone(UTC)


def first_fire_after(schedule: ScheduleRecord, now: dt.datetime) -> dt.datetime | None:
    """A schedule's next run computed from scratch at ``now`` (create, update, self-heal).

    Cron: the first fire time strictly after now and at or after start_at. Interval:
    now + interval, or start_at when that is later. None when the schedule is disabled or
    never fires again (its expression ends, or end_at comes first).
    """
    if not schedule.enabled:
        return None
    start = schedule.start_at
    if schedule.cron_expression:
        after = now if start is None or start <= now else start - _TICK
        return next_cron_fire(schedule, after)
    nxt = now + dt.timedelta(seconds=schedule.interval_seconds)
    if start is not None and nxt < start:
        nxt = start
    return bounded(schedule, nxt)


def catch_up_window(schedule: ScheduleRecord) -> dt.timedelta:
    """How old a missed window may be and still fire after downtime."""
    return dt.timedelta(seconds=schedule.catch_up_window_seconds)


def max_catch_up_runs(schedule: ScheduleRecord) -> int:
    """RUN_ALL's cap: the schedule's max_catch_up_runs, 0 meaning the default."""
    return schedule.max_catch_up_runs or DEFAULT_MAX_CATCH_UP_RUNS


def start_of(schedule: ScheduleRecord, fire_time: dt.datetime, rng: random.Random) -> dt.datetime:
    """When the fire of ``fire_time`` may start: the fire time plus the schedule's jitter
    (STABLE: the delay of its name; RANDOM: a new draw from ``rng``)."""
    delay = delay_s(schedule.name, schedule.jitter_seconds, schedule.jitter_mode, rng)
    return fire_time + dt.timedelta(seconds=delay)


@dataclass(frozen=True)
class FirePlan:
    """What the scheduler does with a due schedule.

    ``fire_times`` are enqueued, each its own fire, oldest first; ``missed_fire_times``
    (all older than the first of them) are recorded as missed. The schedule's next run
    becomes ``next_run_at``.
    """

    fire_times: tuple[dt.datetime, ...]
    missed_fire_times: tuple[dt.datetime, ...]
    next_run_at: dt.datetime | None

    @property
    def last_window(self) -> dt.datetime:
        """The latest window the plan processes (the schedule's last run time)."""
        return max(self.fire_times + self.missed_fire_times)


def plan_fire(schedule: ScheduleRecord, now: dt.datetime) -> FirePlan:
    """Decide a due schedule's fire (``schedule.next_run_at`` <= ``now``, before end_at).

    Cron: while ``now`` has not reached the *following* fire time, the due fire is on time
    (however late within its own window) and is enqueued; the next run is the following
    fire time. Once later windows have come too, the catch-up rules of this module decide.
    Interval: due + interval + the tick tolerance still ahead means on time; otherwise the
    due run is the one window: SKIP and RUN_ALL fire it when at most the catch-up window
    old, RUN_ONCE fires it anyway, else it is missed; the next run is ``now`` + interval.
    """
    due = schedule.next_run_at
    assert due is not None and due <= now
    window = catch_up_window(schedule)
    tolerance = min(window, dt.timedelta(seconds=MISFIRE_GRACE_S))
    if schedule.cron_expression:
        following = next_cron_fire(schedule, due)
        if following is None or now < following:
            return FirePlan((due,), (), following)
        return _catch_up(schedule, due, now, window, tolerance)
    interval = dt.timedelta(seconds=schedule.interval_seconds)
    next_run = bounded(schedule, now + interval)
    if now < due + interval + tolerance:
        return FirePlan((due,), (), next_run)
    if schedule.catch_up_policy == "RUN_ONCE" or now - due <= window:
        return FirePlan((due,), (), next_run)
    return FirePlan((), (due,), next_run)


def _catch_up(
    schedule: ScheduleRecord,
    due: dt.datetime,
    now: dt.datetime,
    window: dt.timedelta,
    tolerance: dt.timedelta,
) -> FirePlan:
    """:func:`plan_fire` after downtime: the windows to fire (a suffix of those in
    [``due``, ``now``], found from ``now``, not by walking a long downtime), the older
    windows missed."""
    policy = schedule.catch_up_policy
    if policy == "RUN_ALL":
        keep = _windows(schedule, max(due, now - window), now, max_catch_up_runs(schedule))
    else:
        keep = _windows(schedule, max(due, now - tolerance), now, MAX_CATCH_UP_RUNS)
        if not keep:
            latest = _latest_fire(schedule, due - _TICK, now)
            if policy == "RUN_ONCE" or now - latest <= window:
                keep = [latest]
    after_now = next_cron_fire(schedule, now)
    if not keep:
        missed = _windows_from(schedule, due, now, MAX_RECORDED_MISSES)
        if _more(schedule, missed, now):  # past the recorded ones: the latest, as the fire
            missed.append(_latest_fire(schedule, missed[-1], now))
        return FirePlan((), tuple(missed), after_now)
    fire = keep[: max(1, RUNS_PER_PLAN // max(1, len(schedule.task_ids)))]
    missed = [t for t in _windows_from(schedule, due, keep[0], MAX_RECORDED_MISSES) if t < keep[0]]
    next_run = keep[len(fire)] if len(keep) > len(fire) else after_now
    return FirePlan(tuple(fire), tuple(missed), next_run)


def _more(schedule: ScheduleRecord, walked: list[dt.datetime], now: dt.datetime) -> bool:
    """True when a window follows the last of ``walked`` at or before ``now``."""
    nxt = next_cron_fire(schedule, walked[-1])
    return nxt is not None and nxt <= now


def _windows_from(
    schedule: ScheduleRecord, start: dt.datetime, now: dt.datetime, limit: int
) -> list[dt.datetime]:
    """The first ``limit`` fire times in [``start``, ``now``], oldest first."""
    out: list[dt.datetime] = []
    nxt = next_cron_fire(schedule, start - _TICK)
    while nxt is not None and nxt <= now and len(out) < limit:
        out.append(nxt)
        nxt = next_cron_fire(schedule, nxt)
    return out


def _windows(
    schedule: ScheduleRecord, lo: dt.datetime, now: dt.datetime, cap: int
) -> list[dt.datetime]:
    """The last ``cap`` fire times in [``lo``, ``now``], oldest first: looks back from
    ``now`` over spans growing fourfold from a second until one holds ``cap`` windows or
    reaches ``lo``, so a long range is never walked whole."""
    if lo > now:
        return []
    span = dt.timedelta(seconds=1)
    while True:
        start = max(lo, now - span)
        found = _windows_from(schedule, start, now, 2**62)
        if start == lo or len(found) >= cap:
            return found[-cap:]
        span *= 4


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
