"""DST and other UTC offset shifts, read like a calendar (docs/guide/cron.md, "Time zones and DST").

Rule (Debian cron): *fixed-time* = neither the minute nor the hour field starts with ``*``.
Skipped wall time: fixed-time fires once at the first instant after the gap, wildcard has no
fire there. Repeated wall time: fixed-time fires once, in the first pass; wildcard fires in both.

Real transitions used below (tz database 2026; "wall" is the local clock reading):

    zone                 UTC instant        wall clock before -> after              shift
    Europe/Berlin        2026-03-29 01:00Z  02:00 +01:00 -> 03:00 +02:00            gap 1 h
    Europe/Berlin        2026-10-25 01:00Z  03:00 +02:00 -> 02:00 +01:00            repeat 1 h
    America/New_York     2026-03-08 07:00Z  02:00 -05:00 -> 03:00 -04:00            gap 1 h
    America/New_York     2026-11-01 06:00Z  02:00 -04:00 -> 01:00 -05:00            repeat 1 h
    Australia/Lord_Howe  2025-10-04 15:30Z  10-05 02:00 +10:30 -> 02:30 +11:00      gap 30 min
    Australia/Lord_Howe  2026-04-04 15:00Z  04-05 02:00 +11:00 -> 01:30 +10:30      repeat 30 min
    Antarctica/Troll     2025-03-30 01:00Z  01:00 +00:00 -> 03:00 +02:00            gap 2 h
    Antarctica/Troll     2025-10-26 01:00Z  03:00 +02:00 -> 01:00 +00:00            repeat 2 h
    America/Santiago     2024-09-08 04:00Z  00:00 -04:00 -> 01:00 -03:00            gap at midnight
    America/Santiago     2025-04-06 03:00Z  04-06 00:00 -03:00 -> 04-05 23:00 -04:00  repeat 1 h
    America/Sao_Paulo    2018-11-04 03:00Z  00:00 -03:00 -> 01:00 -02:00            gap at midnight
    America/Sao_Paulo    2019-02-17 02:00Z  02-17 00:00 -02:00 -> 02-16 23:00 -03:00  repeat 1 h
    Pacific/Apia         2011-12-30 10:00Z  12-30 00:00 -10:00 -> 12-31 00:00 +14:00  gap 1 day
    Asia/Kolkata         (none)             +05:30 all year                         -
"""

from __future__ import annotations

import datetime as dt
import itertools
import zoneinfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwork.cron import CronSchedule, DstNote

UTC = dt.UTC
MICROSECOND = dt.timedelta(microseconds=1)


def fires(expression: str, zone: str, start: str, count: int) -> list[str]:
    """The next ``count`` fire times after ``start`` (ISO 8601 with offset), as ISO strings."""
    schedule = CronSchedule(expression, zone)
    after = dt.datetime.fromisoformat(start)
    return [p.fire_time.isoformat() for p in schedule.next_fire_times(after, count)]


def notes(expression: str, zone: str, start: str, count: int) -> list[DstNote]:
    schedule = CronSchedule(expression, zone)
    after = dt.datetime.fromisoformat(start)
    return [p.dst_note for p in schedule.next_fire_times(after, count)]


# -- Europe/Berlin ------------------------------------------------------------------------------


def test_berlin_spring_fixed_time_in_gap_fires_at_gap_end() -> None:
    assert fires("30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00+01:00", 3) == [
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
        "2026-03-31T02:30:00+02:00",
    ]
    assert notes("30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00+01:00", 2) == [
        DstNote.MOVED_FROM_GAP,
        DstNote.NONE,
    ]


def test_berlin_spring_several_fixed_times_in_one_gap_fire_once() -> None:
    assert fires("0,30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00+01:00", 3) == [
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
    ]
    # 02:00 moves to 03:00, which is itself a match: still one fire.
    assert fires("0 2,3 * * *", "Europe/Berlin", "2026-03-28T12:00:00+01:00", 2) == [
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:00:00+02:00",
    ]


def test_berlin_spring_wildcard_has_no_fire_in_gap() -> None:
    assert fires("5 * * * *", "Europe/Berlin", "2026-03-29T01:00:00+01:00", 2) == [
        "2026-03-29T01:05:00+01:00",
        "2026-03-29T03:05:00+02:00",
    ]
    assert fires("*/30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00+01:00", 2) == [
        "2026-03-30T02:00:00+02:00",  # minute starts with '*': wildcard, the 29th has no 02:xx
        "2026-03-30T02:30:00+02:00",
    ]


def test_berlin_fall_fixed_first_pass_wildcard_both() -> None:
    assert fires("30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00+02:00", 2) == [
        "2026-10-25T02:30:00+02:00",
        "2026-10-26T02:30:00+01:00",
    ]
    assert fires("*/30 * * * *", "Europe/Berlin", "2026-10-25T01:45:00+02:00", 5) == [
        "2026-10-25T02:00:00+02:00",
        "2026-10-25T02:30:00+02:00",
        "2026-10-25T02:00:00+01:00",
        "2026-10-25T02:30:00+01:00",
        "2026-10-25T03:00:00+01:00",
    ]


# -- America/New_York ---------------------------------------------------------------------------


def test_new_york_spring_fixed_time_in_gap() -> None:
    assert fires("30 2 * * *", "America/New_York", "2026-03-07T12:00:00-05:00", 2) == [
        "2026-03-08T03:00:00-04:00",
        "2026-03-09T02:30:00-04:00",
    ]


def test_new_york_fall_fixed_time_fires_in_first_pass_only() -> None:
    assert fires("30 1 * * *", "America/New_York", "2026-10-31T12:00:00-04:00", 2) == [
        "2026-11-01T01:30:00-04:00",
        "2026-11-02T01:30:00-05:00",
    ]
    assert notes("30 1 * * *", "America/New_York", "2026-10-31T12:00:00-04:00", 2) == [
        DstNote.FIRST_PASS_ONLY,
        DstNote.NONE,
    ]


def test_new_york_fall_wildcard_fires_in_both_passes() -> None:
    assert fires("0 * * * *", "America/New_York", "2026-11-01T00:30:00-04:00", 3) == [
        "2026-11-01T01:00:00-04:00",
        "2026-11-01T01:00:00-05:00",
        "2026-11-01T02:00:00-05:00",
    ]
    assert notes("0 * * * *", "America/New_York", "2026-11-01T00:30:00-04:00", 2) == [
        DstNote.NONE,
        DstNote.NONE,
    ]


def test_new_york_fall_started_inside_the_repeated_hour() -> None:
    # From the second pass, a fixed time already fired in the first pass: next day.
    assert fires("30 1 * * *", "America/New_York", "2026-11-01T01:15:00-05:00", 1) == [
        "2026-11-02T01:30:00-05:00"
    ]
    # From late in the first pass, a wildcard continues with the second pass.
    assert fires("*/20 * * * *", "America/New_York", "2026-11-01T01:50:00-04:00", 4) == [
        "2026-11-01T01:00:00-05:00",
        "2026-11-01T01:20:00-05:00",
        "2026-11-01T01:40:00-05:00",
        "2026-11-01T02:00:00-05:00",
    ]
    assert fires("*/20 * * * *", "America/New_York", "2026-11-01T01:10:00-05:00", 1) == [
        "2026-11-01T01:20:00-05:00"
    ]
    # The same instants given in UTC.
    assert fires("*/20 * * * *", "America/New_York", "2026-11-01T06:10:00+00:00", 1) == [
        "2026-11-01T01:20:00-05:00"
    ]
    assert fires("*/20 * * * *", "America/New_York", "2026-11-01T05:50:00+00:00", 1) == [
        "2026-11-01T01:00:00-05:00"
    ]


def test_fold_of_the_start_decides_the_pass() -> None:
    schedule = CronSchedule("*/20 * * * *", "America/New_York")
    zone = zoneinfo.ZoneInfo("America/New_York")
    first = dt.datetime(2026, 11, 1, 1, 10, tzinfo=zone, fold=0)
    second = dt.datetime(2026, 11, 1, 1, 10, tzinfo=zone, fold=1)
    assert str(schedule.next_fire_time(first)) == "2026-11-01 01:20:00-04:00"
    assert str(schedule.next_fire_time(second)) == "2026-11-01 01:20:00-05:00"
    # A non-existent wall time is read as Python reads it (fold=0: the offset before the gap).
    imaginary = dt.datetime(2026, 3, 8, 2, 30, tzinfo=zone)
    assert str(schedule.next_fire_time(imaginary)) == "2026-03-08 03:40:00-04:00"


# -- Australia/Lord_Howe: 30-minute shifts ------------------------------------------------------


def test_lord_howe_spring_30_minute_gap() -> None:
    assert fires("15 2 * * *", "Australia/Lord_Howe", "2025-10-04T12:00:00+10:30", 2) == [
        "2025-10-05T02:30:00+11:00",
        "2025-10-06T02:15:00+11:00",
    ]
    assert fires("*/15 * * * *", "Australia/Lord_Howe", "2025-10-05T01:50:00+10:30", 2) == [
        "2025-10-05T02:30:00+11:00",
        "2025-10-05T02:45:00+11:00",
    ]
    assert fires("0 * * * *", "Australia/Lord_Howe", "2025-10-05T01:43:00+10:30", 2) == [
        "2025-10-05T03:00:00+11:00",
        "2025-10-05T04:00:00+11:00",
    ]


def test_lord_howe_fall_30_minute_repeat() -> None:
    assert fires("45 1 * * *", "Australia/Lord_Howe", "2026-04-05T01:00:00+11:00", 2) == [
        "2026-04-05T01:45:00+11:00",
        "2026-04-06T01:45:00+10:30",
    ]
    assert fires("*/15 * * * *", "Australia/Lord_Howe", "2026-04-05T01:20:00+11:00", 5) == [
        "2026-04-05T01:30:00+11:00",
        "2026-04-05T01:45:00+11:00",
        "2026-04-05T01:30:00+10:30",
        "2026-04-05T01:45:00+10:30",
        "2026-04-05T02:00:00+10:30",
    ]


# -- Antarctica/Troll: 2-hour shifts ------------------------------------------------------------


def test_troll_spring_2_hour_gap() -> None:
    assert fires("30 1 * * *", "Antarctica/Troll", "2025-03-29T12:00:00+00:00", 2) == [
        "2025-03-30T03:00:00+02:00",
        "2025-03-31T01:30:00+02:00",
    ]
    assert fires("0 1,2 * * *", "Antarctica/Troll", "2025-03-29T12:00:00+00:00", 3) == [
        "2025-03-30T03:00:00+02:00",
        "2025-03-31T01:00:00+02:00",
        "2025-03-31T02:00:00+02:00",
    ]
    assert fires("0 * * * *", "Antarctica/Troll", "2025-03-29T23:30:00+00:00", 2) == [
        "2025-03-30T00:00:00+00:00",
        "2025-03-30T03:00:00+02:00",
    ]


def test_troll_fall_2_hour_repeat() -> None:
    for expression, first in (("30 1 * * *", "01:30"), ("30 2 * * *", "02:30")):
        assert fires(expression, "Antarctica/Troll", "2025-10-25T12:00:00+02:00", 2) == [
            f"2025-10-26T{first}:00+02:00",
            f"2025-10-27T{first}:00+00:00",
        ]
    assert fires("0 * * * *", "Antarctica/Troll", "2025-10-26T00:30:00+02:00", 5) == [
        "2025-10-26T01:00:00+02:00",
        "2025-10-26T02:00:00+02:00",
        "2025-10-26T01:00:00+00:00",
        "2025-10-26T02:00:00+00:00",
        "2025-10-26T03:00:00+00:00",
    ]


# -- Midnight shifts: America/Santiago, America/Sao_Paulo, Pacific/Apia -------------------------


def test_santiago_skips_midnight() -> None:
    for expression in ("0 0 * * *", "30 0 * * *"):
        assert fires(expression, "America/Santiago", "2024-09-07T12:00:00-04:00", 1) == [
            "2024-09-08T01:00:00-03:00"
        ]
    assert fires("15 * * * *", "America/Santiago", "2024-09-07T23:30:00-04:00", 1) == [
        "2024-09-08T01:15:00-03:00"
    ]


def test_santiago_repeats_the_last_hour_of_the_day() -> None:
    assert fires("30 23 * * *", "America/Santiago", "2025-04-05T12:00:00-03:00", 2) == [
        "2025-04-05T23:30:00-03:00",
        "2025-04-06T23:30:00-04:00",
    ]
    assert fires("0 0 * * *", "America/Santiago", "2025-04-05T12:00:00-03:00", 1) == [
        "2025-04-06T00:00:00-04:00"  # 00:00 of the 6th happens once, after the repeat
    ]
    assert fires("30 * * * *", "America/Santiago", "2025-04-05T23:00:00-03:00", 3) == [
        "2025-04-05T23:30:00-03:00",
        "2025-04-05T23:30:00-04:00",
        "2025-04-06T00:30:00-04:00",
    ]


def test_sao_paulo_2018_midnight_gap() -> None:
    for expression in ("0 0 * * *", "0 0 * * 0", "0 0 4 11 *"):
        assert fires(expression, "America/Sao_Paulo", "2018-11-03T12:00:00-03:00", 1) == [
            "2018-11-04T01:00:00-02:00"
        ]
    assert fires("0 * * * *", "America/Sao_Paulo", "2018-11-03T23:30:00-03:00", 2) == [
        "2018-11-04T01:00:00-02:00",
        "2018-11-04T02:00:00-02:00",
    ]


def test_sao_paulo_2019_repeat_before_midnight() -> None:
    assert fires("30 23 * * *", "America/Sao_Paulo", "2019-02-16T12:00:00-02:00", 2) == [
        "2019-02-16T23:30:00-02:00",
        "2019-02-17T23:30:00-03:00",
    ]
    assert fires("*/30 23 * * *", "America/Sao_Paulo", "2019-02-16T12:00:00-02:00", 4) == [
        "2019-02-16T23:00:00-02:00",
        "2019-02-16T23:30:00-02:00",
        "2019-02-16T23:00:00-03:00",
        "2019-02-16T23:30:00-03:00",
    ]


def test_apia_skips_a_whole_day() -> None:
    # Every fixed wall time of 30 December 2011 is in the gap: one fire at its end, and the
    # regular 09:00 of the 31st still fires.
    assert fires("0 9 * * *", "Pacific/Apia", "2011-12-29T12:00:00-10:00", 2) == [
        "2011-12-31T00:00:00+14:00",
        "2011-12-31T09:00:00+14:00",
    ]
    assert notes("0 9 * * *", "Pacific/Apia", "2011-12-29T12:00:00-10:00", 1) == [
        DstNote.MOVED_FROM_GAP
    ]
    assert fires("0 */6 * * *", "Pacific/Apia", "2011-12-29T20:00:00-10:00", 2) == [
        "2011-12-31T00:00:00+14:00",
        "2011-12-31T06:00:00+14:00",
    ]


def test_kolkata_has_no_shift() -> None:
    assert fires("30 2 * * *", "Asia/Kolkata", "2026-03-28T12:00:00+05:30", 2) == [
        "2026-03-29T02:30:00+05:30",
        "2026-03-30T02:30:00+05:30",
    ]


def test_zone_not_offset_of_start_is_applied() -> None:
    # The start's offset (EST) must not leak into fire times after the switch.
    assert fires("0 9 * * *", "America/Toronto", "2026-03-07T09:00:00-05:00", 2) == [
        "2026-03-08T09:00:00-04:00",
        "2026-03-09T09:00:00-04:00",
    ]


# -- 6-field (seconds first) -------------------------------------------------------------------


def test_six_field_spring() -> None:
    berlin = "Europe/Berlin"
    assert fires("0 30 2 * * *", berlin, "2026-03-28T12:00:00+01:00", 2) == [
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
    ]
    # Seconds do not count for fixed-time: 02:30:00/:20/:40 all fall in the gap, one fire.
    assert fires("*/20 30 2 * * *", berlin, "2026-03-28T12:00:00+01:00", 4) == [
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
        "2026-03-30T02:30:20+02:00",
        "2026-03-30T02:30:40+02:00",
    ]
    assert fires("30 * * * * *", berlin, "2026-03-29T01:59:00+01:00", 2) == [
        "2026-03-29T01:59:30+01:00",
        "2026-03-29T03:00:30+02:00",
    ]
    assert fires("0 15 2 * * *", "Australia/Lord_Howe", "2025-10-04T12:00:00+10:30", 1) == [
        "2025-10-05T02:30:00+11:00"
    ]
    assert fires("0 0 2 * * *", "Antarctica/Troll", "2025-03-29T12:00:00+00:00", 1) == [
        "2025-03-30T03:00:00+02:00"
    ]


def test_six_field_fall() -> None:
    new_york = "America/New_York"
    assert fires("0 30 1 * * *", new_york, "2026-10-31T12:00:00-04:00", 2) == [
        "2026-11-01T01:30:00-04:00",
        "2026-11-02T01:30:00-05:00",
    ]
    assert fires("15 0 * * * *", new_york, "2026-11-01T00:30:00-04:00", 3) == [
        "2026-11-01T01:00:15-04:00",
        "2026-11-01T01:00:15-05:00",
        "2026-11-01T02:00:15-05:00",
    ]
    assert fires("*/30 * * * * *", new_york, "2026-11-01T01:59:45-04:00", 2) == [
        "2026-11-01T01:00:00-05:00",
        "2026-11-01T01:00:30-05:00",
    ]


# -- properties ---------------------------------------------------------------------------------

PROPERTY_ZONES = (
    "Australia/Lord_Howe",
    "Antarctica/Troll",
    "America/Santiago",
    "America/Sao_Paulo",
    "Pacific/Apia",
    "America/New_York",
    "Europe/Berlin",
    "Asia/Tehran",
)
PROPERTY_EXPRESSIONS = (
    "30 2 * * *",
    "0,30 1,2 * * *",
    "0 0 * * *",
    "45 23 * * *",
    "0 * * * *",
    "*/15 * * * *",
    "* 1 * * *",
    "*/7 */2 * * 0,6",
    "0 30 2 * * *",
    "*/20 * 1-3 * * *",
)


def _transitions(name: str) -> list[int]:
    zone = zoneinfo.ZoneInfo(name)
    fromts = dt.datetime.fromtimestamp
    t, end = int(dt.datetime(2000, 1, 1, tzinfo=UTC).timestamp()), 2240611200  # 2041-01-01
    found, offset = [], fromts(t, zone).utcoffset()
    while t < end:
        if (new := fromts(t + 86400, zone).utcoffset()) != offset:
            lo, hi = t, t + 86400
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if fromts(mid, zone).utcoffset() == offset else (lo, mid)
            found.append(hi)
            offset = new
        t += 86400
    return found


TRANSITIONS = {name: _transitions(name) for name in PROPERTY_ZONES}
APIA_SKIPS_A_DAY = int(dt.datetime(2011, 12, 30, 10, tzinfo=UTC).timestamp())


@st.composite
def near_transition(draw: st.DrawFn) -> tuple[str, dt.datetime]:
    name = draw(st.sampled_from(PROPERTY_ZONES))
    anchor = draw(st.sampled_from(TRANSITIONS[name]))
    seconds = draw(st.integers(-30 * 3600, 30 * 3600))
    micro = draw(st.integers(0, 999_999))
    instant = dt.datetime.fromtimestamp(anchor + seconds, UTC) + dt.timedelta(microseconds=micro)
    return name, instant.astimezone(zoneinfo.ZoneInfo(name))


@settings(derandomize=True, database=None, deadline=None, max_examples=600)
@given(st.sampled_from(PROPERTY_EXPRESSIONS), near_transition(), st.floats(0, 1))
def test_round_trip(expression: str, zone_start: tuple[str, dt.datetime], fraction: float) -> None:
    """Chaining next_fire_time and restarting just before each fire give the same fires.

    For consecutive fires f0 < f1 < ...: f(i+1) = next(f(i)) = next(f(i+1) - 1 us) = next(y) for
    any y in [f(i), f(i+1)); fires strictly increase; each prints the offset zoneinfo gives its
    instant (fold right).
    """
    name, start = zone_start
    zone = zoneinfo.ZoneInfo(name)
    schedule = CronSchedule(expression, name)
    chain = [start] + [p.fire_time for p in schedule.next_fire_times(start, 4)]
    assert len(chain) == 5
    # Arithmetic and comparisons in UTC: Python ignores fold between datetimes of one zone.
    for earlier, fire in itertools.pairwise(chain):
        lo, hi = earlier.astimezone(UTC), fire.astimezone(UTC)
        assert hi > lo
        assert fire.isoformat() == hi.astimezone(zone).isoformat()
        assert str(schedule.next_fire_time(hi - MICROSECOND)) == str(fire)
        assert str(schedule.next_fire_time(earlier)) == str(fire)
        between = lo + (hi - lo) * fraction
        if between < hi:
            assert str(schedule.next_fire_time(between)) == str(fire)


@pytest.mark.parametrize("name", PROPERTY_ZONES)
def test_fixed_daily_fires_once_per_transition_day(name: str) -> None:
    """A fixed daily time fires on each of four consecutive days around every transition of
    2000-2040 (none missed, none doubled), except where a gap swallows a whole day."""
    zone = zoneinfo.ZoneInfo(name)
    for expression in ("30 2 * * *", "0 0 * * *", "45 1 * * *", "30 23 * * *"):
        schedule = CronSchedule(expression, name)
        for anchor in TRANSITIONS[name]:
            start = dt.datetime.fromtimestamp(anchor - 2 * 86400, zone)
            days = [p.fire_time.date() for p in schedule.next_fire_times(start, 4)]
            if anchor == APIA_SKIPS_A_DAY:
                continue  # see test_apia_skips_a_whole_day
            assert all((b - a).days == 1 for a, b in itertools.pairwise(days)), (expression, days)
