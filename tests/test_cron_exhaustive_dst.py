"""Every UTC offset change of every IANA zone between 2000 and 2040, checked against the DST rule.

For each zone in ``zoneinfo.available_timezones()`` the transitions in [2000, 2041) are found
by sampling ``utcoffset`` every three days and bisecting to the second (no zone changes offset
twice within three days in that period: the shortest gap, in Brazil and Palestine, is about
seven days, which the test checks of what it finds). Then, per transition:

* **Daily fixed-time schedules** (``M H * * *``) at the affected wall times fire exactly once on
  the transition day: a wall time skipped by a forward shift fires at the first instant after
  the gap; a wall time repeated by a backward shift fires in the first pass only. Checked as
  "from the previous day's fire, the next fire is the expected one, and the fire after that is
  the next day's" -- zero misses, zero double fires.
* **The hourly wildcard** ``0 * * * *`` fires at every top of the hour that exists on the wall
  clock within a few hours of the transition, in both passes of a repeated interval, and at no
  other instant.

Coverage: the hourly check and the daily check of the first and last affected minute run for
every zone and every transition. The daily check of *every* affected minute runs once per
distinct kind of transition: the resolver sees nothing of a zone but its UTC offsets and the
calendar, so a transition is known to it by the offsets before and after, the wall time at
which it happens, and whether that day is the first or the last of its month (a fire pushed
across midnight may cross into another month). The minute-by-minute sweep runs on the first
transition of each kind (zones alphabetical, then time), which keeps the test to seconds.
"""

from __future__ import annotations

import datetime as dt
import itertools
import zoneinfo
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tickwork.cron import CronSchedule

UTC = dt.UTC
DAY = dt.timedelta(days=1)
MINUTE = dt.timedelta(minutes=1)
WINDOW_START = int(dt.datetime(2000, 1, 1, tzinfo=UTC).timestamp())
WINDOW_END = int(dt.datetime(2041, 1, 1, tzinfo=UTC).timestamp())
#: The sampling step of the transition search, seconds: less than the shortest gap between
#: two offset changes of one zone in the window (about seven days).
STRIDE_S = 3 * 86400


@dataclass(frozen=True)
class Transition:
    at: int  # POSIX seconds of the first instant with the new offset
    before: dt.timedelta
    after: dt.timedelta


def find_transitions(zone: zoneinfo.ZoneInfo) -> list[Transition]:
    """Offset changes in the window: samples every :data:`STRIDE_S`, then bisection to the
    second."""
    fromts = dt.datetime.fromtimestamp
    found: list[Transition] = []
    t = WINDOW_START
    offset = fromts(t, zone).utcoffset()
    while t < WINDOW_END:
        nxt = t + STRIDE_S
        new = fromts(nxt, zone).utcoffset()
        if new != offset:
            lo, hi = t, nxt
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if fromts(mid, zone).utcoffset() == offset:
                    lo = mid
                else:
                    hi = mid
            assert offset is not None and new is not None
            found.append(Transition(hi, offset, new))
            offset = new
        t = nxt
    return found


def naive_utc(seconds: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, UTC).replace(tzinfo=None)


def affected_minutes(tr: Transition) -> list[dt.datetime]:
    """Whole-minute wall times skipped (forward shift) or repeated (backward shift)."""
    start = naive_utc(tr.at) + min(tr.before, tr.after)
    end = naive_utc(tr.at) + max(tr.before, tr.after)
    wall = start.replace(second=0)
    if wall < start:
        wall += MINUTE
    minutes = []
    while wall < end:
        minutes.append(wall)
        wall += MINUTE
    return minutes


def iso_utc(value: dt.datetime | None) -> str:
    return "None" if value is None else value.astimezone(UTC).isoformat()


class Checker:
    def __init__(self, name: str) -> None:
        self.name = name
        self.zone = zoneinfo.ZoneInfo(name)
        self.daily: dict[tuple[int, int], CronSchedule] = {}
        self.hourly = CronSchedule("0 * * * *", name)
        self.failures: list[str] = []
        self.checks = 0

    def existing(self, wall: dt.datetime) -> dt.datetime | None:
        """The wall time as an aware datetime if it exists exactly once, else None."""
        aware = wall.replace(tzinfo=self.zone)
        if aware.utcoffset() != aware.replace(fold=1).utcoffset():
            return None
        return aware

    def check_daily(self, tr: Transition, wall: dt.datetime) -> None:
        schedule = self.daily.get((wall.hour, wall.minute))
        if schedule is None:
            schedule = CronSchedule(f"{wall.minute} {wall.hour} * * *", self.name)
            self.daily[(wall.hour, wall.minute)] = schedule
        if tr.after > tr.before:  # gap: at the first instant after it
            expected = dt.datetime.fromtimestamp(tr.at, self.zone)
        else:  # overlap: first pass
            expected = wall.replace(tzinfo=self.zone, fold=0)
        previous = self.existing(wall - DAY)
        following = None
        for days in range(1, 4):
            following = self.existing(wall + days * DAY)
            if following is not None and following.astimezone(UTC) > expected.astimezone(UTC):
                break
        if previous is None or following is None:
            self.failures.append(f"{self.name} {wall}: neighbouring days not plain, cannot check")
            return
        self.checks += 1
        got = schedule.next_fire_time(previous)
        if got is None or got.isoformat() != expected.isoformat():
            self.failures.append(
                f"{self.name} daily {wall:%H:%M} on {wall:%Y-%m-%d}: from {previous.isoformat()} "
                f"expected {expected.isoformat()}, got {got.isoformat() if got else None}"
            )
            return
        again = schedule.next_fire_time(got)
        if again is None or again.isoformat() != following.isoformat():
            self.failures.append(
                f"{self.name} daily {wall:%H:%M} on {wall:%Y-%m-%d}: after {got.isoformat()} "
                f"expected {following.isoformat()}, got {again.isoformat() if again else None}"
            )

    def check_hourly(self, tr: Transition) -> None:
        shift = abs(int((tr.after - tr.before).total_seconds()))
        lo, hi = tr.at - 3 * 3600 - shift, tr.at + 3 * 3600 + shift
        expected: set[int] = set()
        for offset in {tr.before, tr.after}:
            seconds = int(offset.total_seconds())
            # instants whose wall clock under `offset` shows a top of the hour
            u = lo + (-(lo + seconds)) % 3600
            while u <= hi:
                if dt.datetime.fromtimestamp(u, self.zone).utcoffset() == offset:
                    expected.add(u)
                u += 3600
        want = [dt.datetime.fromtimestamp(u, self.zone).isoformat() for u in sorted(expected)]
        got: list[str] = []
        cursor: dt.datetime | None = dt.datetime.fromtimestamp(lo - 1, self.zone)
        while True:
            assert cursor is not None
            cursor = self.hourly.next_fire_time(cursor)
            if cursor is None or cursor.timestamp() > hi:
                break
            got.append(cursor.isoformat())
        self.checks += 1
        if got != want:
            self.failures.append(f"{self.name} hourly around {naive_utc(tr.at)}Z: {got} != {want}")


def kind(tr: Transition) -> tuple[dt.timedelta, dt.timedelta, dt.time, bool, bool]:
    """What the resolver can tell of a transition: its offsets, the wall time (under the
    offset before it) at which it happens, and whether that day starts or ends a month."""
    wall = naive_utc(tr.at) + tr.before
    last_day = (wall + DAY).month != wall.month
    return tr.before, tr.after, wall.time(), wall.day == 1, last_day


def zone_groups() -> Iterator[tuple[list[str], list[Transition]]]:
    """Zones grouped by identical offset history in the window, with that history."""
    groups: dict[tuple[Transition, ...], list[str]] = {}
    for name in sorted(zoneinfo.available_timezones()):
        transitions = tuple(find_transitions(zoneinfo.ZoneInfo(name)))
        gaps = [b.at - a.at for a, b in itertools.pairwise(transitions)]
        assert not gaps or min(gaps) > 2 * STRIDE_S, f"{name}: changes closer than the stride"
        if transitions:
            groups.setdefault(transitions, []).append(name)
    for transitions, names in groups.items():
        yield names, list(transitions)


@pytest.mark.timeout(180)
def test_every_zone_every_transition_2000_2040() -> None:
    failures: list[str] = []
    zones = transitions_total = checks = 0
    swept: set[tuple[dt.timedelta, dt.timedelta, dt.time, bool, bool]] = set()
    for names, transitions in zone_groups():
        for name in names:
            checker = Checker(name)
            zones += 1
            for tr in transitions:
                transitions_total += 1
                minutes = affected_minutes(tr)
                assert minutes, f"{name}: empty transition {tr}"
                if kind(tr) in swept:
                    minutes = [minutes[0], minutes[-1]] if len(minutes) > 1 else minutes
                swept.add(kind(tr))
                for wall in minutes:
                    checker.check_daily(tr, wall)
                checker.check_hourly(tr)
            failures.extend(checker.failures)
            checks += checker.checks
    # Sanity of the sweep itself: tzdata has hundreds of zones with thousands of changes.
    assert zones > 300 and transitions_total > 15000 and checks > 70000 and len(swept) > 250
    assert not failures, f"{len(failures)} failures, first ones:\n" + "\n".join(failures[:30])
