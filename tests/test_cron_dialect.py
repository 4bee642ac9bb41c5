"""The cron dialect (docs/guide/cron.md, "The dialect"): every syntax line and every rejection.

Fire times are compared as ISO strings in UTC unless a zone matters. Rejections assert the
field named by CronError and the reason in its message.
"""

from __future__ import annotations

import datetime as dt
import pickle
import time
import zoneinfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tickwork.cron import CronError, CronSchedule, FirePreview, validate_timezone

START = "2024-01-01T00:00:00+00:00"  # a Monday


def fires(expression: str, start: str = START, count: int = 3, zone: str = "UTC") -> list[str]:
    schedule = CronSchedule(expression, zone)
    after = dt.datetime.fromisoformat(start)
    return [p.fire_time.isoformat() for p in schedule.next_fire_times(after, count)]


def same(a: str, b: str, start: str = START, count: int = 12) -> None:
    assert fires(a, start, count) == fires(b, start, count)


# -- fields ------------------------------------------------------------------------------------


def test_five_fields() -> None:
    schedule = CronSchedule("30 4 * * *")
    assert not schedule.has_seconds
    assert schedule.expression == "30 4 * * *" and schedule.timezone == "UTC"
    assert fires("30 4 * * *", count=2) == [
        "2024-01-01T04:30:00+00:00",
        "2024-01-02T04:30:00+00:00",
    ]


def test_six_fields_are_seconds_first() -> None:
    schedule = CronSchedule("15 30 4 * * *")
    assert schedule.has_seconds
    assert fires("15 30 4 * * *", count=2) == [
        "2024-01-01T04:30:15+00:00",
        "2024-01-02T04:30:15+00:00",
    ]
    assert fires("*/20 * * * * *", "2024-01-01T00:00:05+00:00", 3) == [
        "2024-01-01T00:00:20+00:00",
        "2024-01-01T00:00:40+00:00",
        "2024-01-01T00:01:00+00:00",
    ]


def test_names_case_insensitive() -> None:
    same("0 0 1 JAN *", "0 0 1 1 *")
    same("0 0 * * MON", "0 0 * * 1")
    same("0 0 * feb,Mar * ", "0 0 * 2,3 *", count=60)
    same("0 0 * * mon-fri", "0 0 * * 1-5")
    same("0 0 * * SUN", "0 0 * * 0")
    assert fires("0 0 * * sat", count=1) == ["2024-01-06T00:00:00+00:00"]


def test_ranges_lists_steps() -> None:
    assert fires("0 9-11 * * *", count=4) == [
        "2024-01-01T09:00:00+00:00",
        "2024-01-01T10:00:00+00:00",
        "2024-01-01T11:00:00+00:00",
        "2024-01-02T09:00:00+00:00",
    ]
    assert fires("5,35 1 * * *", count=3) == [
        "2024-01-01T01:05:00+00:00",
        "2024-01-01T01:35:00+00:00",
        "2024-01-02T01:05:00+00:00",
    ]
    same("*/15 * * * *", "0,15,30,45 * * * *")
    same("10-40/15 * * * *", "10,25,40 * * * *")
    same("50/5 * * * *", "50,55 * * * *")  # a/n: from a to the field maximum
    same("0 0 */10 * *", "0 0 1,11,21,31 * *", count=30)  # steps count from the minimum
    same("0 0 1 */5 *", "0 0 1 1,6,11 *")
    same("*/45 * * * *", "0,45 * * * *")
    same("1-3,*/20 * * * *", "0,1,2,3,20,40 * * * *")


def test_day_of_week_zero_and_seven_are_sunday() -> None:
    same("0 0 * * 7", "0 0 * * 0")
    same("0 0 * * 0,7", "0 0 * * 0")
    same("0 0 * * 1-7", "0 0 * * *")
    same("0 0 * * 6-7", "0 0 * * 0,6")
    same("0 0 * * SAT-SUN", "0 0 * * 0,6")  # a range ending at Sunday ends at 7
    same("0 0 * * 5-0", "0 0 * * 0,5,6")
    same("0 0 * * */7", "0 0 * * 0")  # */7 over 0-7 is {0, 7}


@pytest.mark.parametrize(
    ("macro", "equivalent"),
    [
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
        ("@DAILY", "0 0 * * *"),
    ],
)
def test_macros(macro: str, equivalent: str) -> None:
    same(macro, equivalent, count=3)
    assert CronSchedule(macro).is_fixed_time == CronSchedule(equivalent).is_fixed_time
    assert CronSchedule(macro).describe() == CronSchedule(equivalent).describe()


# -- Quartz extras -----------------------------------------------------------------------------


def test_last_day_of_month() -> None:
    assert fires("0 0 L * *", count=3) == [
        "2024-01-31T00:00:00+00:00",
        "2024-02-29T00:00:00+00:00",
        "2024-03-31T00:00:00+00:00",
    ]


def test_last_weekday_of_month() -> None:
    assert fires("0 0 LW * *", "2024-03-01T00:00:00+00:00", 3) == [
        "2024-03-29T00:00:00+00:00",  # 31 March 2024 is a Sunday
        "2024-04-30T00:00:00+00:00",
        "2024-05-31T00:00:00+00:00",
    ]


def test_nearest_weekday() -> None:
    # 15 June 2024 is a Saturday -> Friday 14th; 15 Sept 2024 a Sunday -> Monday 16th.
    assert fires("0 0 15W * *", "2024-06-01T00:00:00+00:00", 4) == [
        "2024-06-14T00:00:00+00:00",
        "2024-07-15T00:00:00+00:00",
        "2024-08-15T00:00:00+00:00",
        "2024-09-16T00:00:00+00:00",
    ]
    # 1W never leaves the month: 1 June 2024 is a Saturday -> Monday 3rd.
    assert fires("0 0 1W 6 *", count=1) == ["2024-06-03T00:00:00+00:00"]
    # 30W in a month whose 30th is Sunday and last day -> Friday 28th (June 2024).
    assert fires("0 0 30W 6 *", count=1) == ["2024-06-28T00:00:00+00:00"]
    # Day 31 does not exist in June: 31W has no match there.
    assert fires("0 0 31W * *", "2024-06-01T00:00:00+00:00", 1) == ["2024-07-31T00:00:00+00:00"]


def test_nth_weekday_of_month() -> None:
    assert fires("0 0 * * MON#2", count=2) == [
        "2024-01-08T00:00:00+00:00",
        "2024-02-12T00:00:00+00:00",
    ]
    assert fires("0 0 * * 7#1", count=1) == ["2024-01-07T00:00:00+00:00"]
    assert fires("0 0 * * 4#5", count=2) == [  # months with five Thursdays only
        "2024-02-29T00:00:00+00:00",
        "2024-05-30T00:00:00+00:00",
    ]


def test_last_given_weekday_of_month() -> None:
    assert fires("0 0 * * 5L", count=2) == [
        "2024-01-26T00:00:00+00:00",
        "2024-02-23T00:00:00+00:00",
    ]
    same("0 0 * * FRIL", "0 0 * * 5L")


def test_question_mark_is_a_star() -> None:
    same("0 0 ? * MON", "0 0 * * MON")
    same("0 0 1 * ?", "0 0 1 * *")
    same("0 0 ? * ?", "0 0 * * *")


# -- Vixie's day rule --------------------------------------------------------------------------


def test_both_days_restricted_is_or() -> None:
    # 1st and 15th of the month plus every Friday (crontab(5) example).
    assert fires("30 4 1,15 * 5", "2024-03-01T00:00:00+00:00", 4) == [
        "2024-03-01T04:30:00+00:00",
        "2024-03-08T04:30:00+00:00",
        "2024-03-15T04:30:00+00:00",
        "2024-03-22T04:30:00+00:00",
    ]
    assert fires("0 0 L * 5", "2024-01-20T00:00:00+00:00", 3) == [  # OR with L too
        "2024-01-26T00:00:00+00:00",  # Friday
        "2024-01-31T00:00:00+00:00",  # last day
        "2024-02-02T00:00:00+00:00",  # Friday
    ]
    same("0 0 1-31 * 1", "0 0 * * *", count=40)  # a full-range dom is restricted, not '*'


def test_a_field_starting_with_star_makes_it_and() -> None:
    # */2 starts with '*': odd days of the month that are also Mondays.
    assert fires("0 0 */2 * 1", count=3) == [
        "2024-01-15T00:00:00+00:00",
        "2024-01-29T00:00:00+00:00",
        "2024-02-05T00:00:00+00:00",
    ]
    # Day-of-week */2 = {0, 2, 4, 6}, and-ed with the 1st.
    assert fires("0 0 1 * */2", count=3) == [
        "2024-02-01T00:00:00+00:00",  # a Thursday
        "2024-06-01T00:00:00+00:00",  # a Saturday
        "2024-08-01T00:00:00+00:00",  # a Thursday
    ]
    same("0 0 * * 1", "0 0 ? * 1")
    same("0 0 13 * *", "0 0 13 * ?")


# -- fixed-time classification (Debian cron) ---------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "fixed"),
    [
        ("0 2 * * *", True),
        ("30 1 * * 0", True),
        ("0,30 1-3 * * *", True),
        ("0 0-23 * * *", True),  # the literal rule: the field does not start with '*'
        ("0 * * * *", False),
        ("* 2 * * *", False),
        ("*/5 2 * * *", False),
        ("0 */2 * * *", False),
        ("@daily", True),
        ("@hourly", False),
        ("*/10 30 2 * * *", True),  # the seconds field does not count
        ("0 * 2 * * *", False),
        ("0 30 * * * *", False),
    ],
)
def test_is_fixed_time(expression: str, fixed: bool) -> None:
    assert CronSchedule(expression).is_fixed_time is fixed


# -- descriptions ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "description"),
    [
        ("0 2 * * *", "At 02:00 AM"),
        ("0 30 2 * * *", "At 02:30 AM"),
        ("*/30 * * * * *", "Every 30 seconds"),
        ("@hourly", "Every hour"),
        ("@weekly", "At 12:00 AM, only on Sunday"),
        ("0 0 1 * 1", "At 12:00 AM, on day 1 of the month, or on Monday"),
        ("0 0 1 * 1-5", "At 12:00 AM, on day 1 of the month, or Monday through Friday"),
        ("0 0 */2 * 1", "At 12:00 AM, every 2 days, only on Monday"),
        ("0 0 ? * MON", "At 12:00 AM, only on Monday"),
        ("0 0 * * 0,7", "At 12:00 AM, only on Sunday"),
        ("0 0 LW * *", "At 12:00 AM, on the last weekday of the month"),
        ("0 0 15W * *", "At 12:00 AM, on the weekday nearest day 15 of the month"),
        ("0 0 * * 5L", "At 12:00 AM, on the last Friday of the month"),
        ("0 0 * 6 4#3", "At 12:00 AM, on the third Thursday of the month, only in June"),
        ("05 04 07 * *", "At 04:05 AM, on day 7 of the month"),
        # a day field that allows every day says nothing; under the OR rule, nor the other
        ("0 0 * * 0-7", "At 12:00 AM"),
        ("0 0 * * 1-7", "At 12:00 AM"),
        ("0 0 */2 * 0-7", "At 12:00 AM, every 2 days"),
        ("0 0 1 * 0-7", "At 12:00 AM"),
        ("0 0 L * 0-6", "At 12:00 AM"),
        ("0 0 1-31 * 1", "At 12:00 AM"),
        ("0 0 1-31 * */2", "At 12:00 AM, every 2 days of the week"),  # as 0 0 * * */2
    ],
)
def test_describe(expression: str, description: str) -> None:
    assert CronSchedule(expression).describe() == description


# -- previews ----------------------------------------------------------------------------------


def test_next_fire_times_preview() -> None:
    schedule = CronSchedule("0 2 * * *", "Europe/Berlin")
    after = dt.datetime(2026, 3, 28, tzinfo=dt.UTC)
    previews = schedule.next_fire_times(after, 3)
    assert all(isinstance(p, FirePreview) for p in previews)
    assert [str(p.fire_time.tzinfo) for p in previews] == ["Europe/Berlin"] * 3
    assert schedule.next_fire_times(after, 0) == []
    with pytest.raises(ValueError, match="count"):
        schedule.next_fire_times(after, -1)


def test_after_must_be_aware() -> None:
    with pytest.raises(ValueError, match="aware"):
        CronSchedule("* * * * *").next_fire_time(dt.datetime(2024, 1, 1))
    with pytest.raises(ValueError, match="aware"):
        CronSchedule("* * * * *").next_fire_times(dt.datetime(2024, 1, 1), 1)


def test_strictly_after_and_microseconds() -> None:
    assert fires("* * * * *", "2024-01-01T00:00:00+00:00", 1) == ["2024-01-01T00:01:00+00:00"]
    assert fires("* * * * *", "2024-01-01T00:00:59.999999+00:00", 1) == [
        "2024-01-01T00:01:00+00:00"
    ]
    assert fires("* * * * * *", "2024-01-01T00:00:00.5+00:00", 1) == ["2024-01-01T00:00:01+00:00"]


def test_none_after_year_9999() -> None:
    schedule = CronSchedule("0 0 29 2 *")
    assert schedule.next_fire_time(dt.datetime(9996, 3, 1, tzinfo=dt.UTC)) is None
    assert str(schedule.next_fire_time(dt.datetime(9995, 3, 1, tzinfo=dt.UTC))) == (
        "9996-02-29 00:00:00+00:00"
    )


def test_none_once_the_utc_instant_is_past_year_9999() -> None:
    """West of UTC, a local time late on 9999-12-31 is in the year 10000 in UTC, which no
    datetime (nor a protobuf Timestamp) holds: such a fire time is not given."""
    hourly = CronSchedule("0 * * * *", "Pacific/Pago_Pago")  # UTC-11
    after = dt.datetime(9999, 12, 31, 11, 30, tzinfo=dt.UTC)  # 00:30 local
    assert [
        p.fire_time.astimezone(dt.UTC).isoformat() for p in hourly.next_fire_times(after, 30)
    ] == [f"9999-12-31T{hour:02d}:00:00+00:00" for hour in range(12, 24)]
    assert hourly.next_fire_time(dt.datetime(9999, 12, 31, 23, 0, tzinfo=dt.UTC)) is None


def test_leap_day_is_valid_and_fast() -> None:
    began = time.perf_counter()
    assert fires("0 0 29 2 *", "2100-01-01T00:00:00+00:00", 1) == ["2104-02-29T00:00:00+00:00"]
    # OR: 29 February or any Monday -- of February, the only month allowed.
    assert fires("0 0 29 2 1", "2024-03-01T00:00:00+00:00", 1) == ["2025-02-03T00:00:00+00:00"]
    # Sunday 29 February, both fields must match: 2032, then 2060 (every 28 years here).
    assert fires("0 0 29 2 */7", "2024-03-01T00:00:00+00:00", 2) == [
        "2032-02-29T00:00:00+00:00",
        "2060-02-29T00:00:00+00:00",
    ]
    assert time.perf_counter() - began < 0.5


def test_zone_is_validated_and_used() -> None:
    assert validate_timezone("Europe/Berlin") == zoneinfo.ZoneInfo("Europe/Berlin")
    assert fires("0 9 * * *", zone="Asia/Kolkata", count=1) == ["2024-01-01T09:00:00+05:30"]


def test_error_is_a_value_error_and_pickles() -> None:
    with pytest.raises(ValueError, match="out of range") as raised:
        CronSchedule("0 0 32 * *")
    err = raised.value
    assert isinstance(err, CronError)
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.field, str(copy)) == (err.field, str(err))


# -- rejections --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "field", "message"),
    [
        # field count
        ("", "expression", "expression: is empty"),
        ("   ", "expression", "expression: is empty"),
        ("* * * *", "expression", "expected 5 fields"),
        ("0 0 0 * * * *", "expression", "got 7"),
        ("@reboot", "expression", "unknown or unsupported macro '@reboot'"),
        ("@every 5m", "expression", "unknown or unsupported macro"),
        ("1," * 300 + "1 * * * *", "expression", "longer than 512 characters"),
        # out of range
        ("60 * * * * *", "second", "second: 60 is out of range 0-59"),
        ("60 * * * *", "minute", "minute: 60 is out of range 0-59"),
        ("0 24 * * *", "hour", "hour: 24 is out of range 0-23"),
        ("0 0 0 * *", "day_of_month", "day_of_month: 0 is out of range 1-31"),
        ("0 0 32 * *", "day_of_month", "day_of_month: 32 is out of range 1-31"),
        ("0 0 * 0 *", "month", "month: 0 is out of range 1-12"),
        ("0 0 * 13 *", "month", "month: 13 is out of range 1-12"),
        ("0 0 * * 8", "day_of_week", "day_of_week: 8 is out of range 0-7"),
        ("0 0 * * 1-8", "day_of_week", "day_of_week: 8 is out of range 0-7"),
        ("0 0 32W * *", "day_of_month", "day_of_month: 32 is out of range 1-31"),
        ("0 0 * * 1#6", "day_of_week", "day_of_week: #6 is out of range 1-5"),
        ("0 0 * * 1#0", "day_of_week", "day_of_week: #0 is out of range 1-5"),
        ("0 0 * * 9#1", "day_of_week", "day_of_week: 9 is out of range 0-7"),
        # steps
        ("*/0 * * * *", "minute", "minute: step 0 is out of range 1-59"),
        ("5-5/0 * * * *", "minute", "minute: step 0 is out of range 1-59"),
        ("*/00 0 * * *", "minute", "minute: step 0 is out of range 1-59"),
        ("0 */0 * * *", "hour", "hour: step 0 is out of range 1-23"),
        ("0 */24 * * *", "hour", "hour: step 24 is out of range 1-23"),
        ("*/0 * * * * *", "second", "second: step 0 is out of range 1-59"),
        ("0 0 */0 * *", "day_of_month", "step 0 is out of range 1-31"),
        ("0 0 * */13 *", "month", "step 13 is out of range 1-12"),
        ("0 0 * * */8", "day_of_week", "step 8 is out of range 1-7"),
        ("*/* * * * *", "minute", "minute: step '*' is not a number"),
        ("1/2/3 * * * *", "minute", "step '2/3' is not a number"),
        ("*/-1 * * * *", "minute", "step '-1' is not a number"),
        # names and garbage
        ("0 17 * * MON_FRI", "day_of_week", "'MON_FRI' is not a number or a day name (SUN-SAT)"),
        ("0 0 * * MONDAY", "day_of_week", "'MONDAY' is not a number or a day name"),
        ("0 0 * * JAN", "day_of_week", "'JAN' is not a number or a day name"),
        ("0 0 * MON *", "month", "'MON' is not a number or a month name (JAN-DEC)"),
        ("0 0 * JANUARY *", "month", "'JANUARY' is not a number or a month name"),
        ("0 0 JAN * *", "day_of_month", "'JAN' is not a number"),
        ("0 MON * * *", "hour", "'MON' is not a number"),
        ("0 0 * * facerolloverkeyboard", "day_of_week", "'facerolloverkeyboard' is not"),
        ("* * facerolloverkeyboard * *", "day_of_month", "'facerolloverkeyboard' is not a number"),
        ("H * * * *", "minute", "'H' is not a number"),
        ("1.5 * * * *", "minute", "'1.5' is not a number"),
        ("\uff11 * * * *", "minute", "is not a number"),  # full-width digit
        ("1,,2 * * * *", "minute", "minute: empty value"),
        ("1, * * * *", "minute", "minute: empty value"),
        # ranges
        ("-90 * * * *", "minute", "minute: '-90' is not a valid range"),
        ("5- * * * *", "minute", "'5-' is not a valid range"),
        ("1-2-3 * * * *", "minute", "'1-2-3' is not a valid range"),
        ("0 22-2 * * *", "hour", "hour: range 22-2 is reversed"),
        ("0 0 * NOV-FEB *", "month", "range NOV-FEB is reversed"),
        ("0 0 * * FRI-MON", "day_of_week", "range FRI-MON is reversed"),
        # specials out of place
        ("? * * * *", "minute", "'?' is only allowed in day_of_month and day_of_week"),
        ("0 0 * ? *", "month", "'?' is only allowed"),
        ("0 0 1,? * *", "day_of_month", "'?' must be the whole field"),
        ("0 0 1,L * *", "day_of_month", "'L' must be the whole field"),
        ("0 0 LW,15W * *", "day_of_month", "'LW' must be the whole field"),
        ("0 0 L-3 * *", "day_of_month", "'L' is not a number"),  # no Quartz L-n
        ("0 0 W * *", "day_of_month", "'W' is not a number"),
        ("0 0 * * MON#2,FRI", "day_of_week", "'MON#2' must be the whole field"),
        ("0 0 * * 1,5L", "day_of_week", "'5L' must be the whole field"),
        ("0 0 * * L", "day_of_week", "'L' is not a number or a day name"),
        ("0 L * * *", "hour", "'L' is not a number"),
        ("0 0 * L *", "month", "'L' is not a number or a month name"),
        # never fires
        ("0 0 30 2 *", "day_of_month",
         "day_of_month: can never fire (day 30 does not exist in February)"),
        ("0 0 31 4 *", "day_of_month", "can never fire (day 31 does not exist in April)"),
        (
            "0 0 31 2,4,6,9,11 *",
            "day_of_month",
            "can never fire (day 31 does not exist in February, April, June, September or "
            "November)",
        ),
        ("0 0 30,31 FEB *", "day_of_month",
         "can never fire (days 30 and 31 do not exist in February)"),
        ("0 0 31W 4 *", "day_of_month", "can never fire (day 31 does not exist in April)"),
        ("* * 31 2 ?", "day_of_month", "can never fire (day 31 does not exist in February)"),
        ("0 0 */30 2 5#5", "day_of_month", "can never fire (no day in February matches both"),
        ("0 0 LW * */6", "day_of_month", "can never fire (no day in any month matches both"),
        # time zone
        ("0 0 * * *", "timezone", None),
    ],
)  # fmt: skip
def test_rejections(expression: str, field: str, message: str | None) -> None:
    zone = "Mars/Olympus_Mons" if field == "timezone" else "UTC"
    began = time.perf_counter()
    with pytest.raises(CronError) as raised:
        CronSchedule(expression, zone)
    assert time.perf_counter() - began < 0.5  # bounded, no search
    assert raised.value.field == field
    assert str(raised.value).startswith(f"{field}: ")
    if message is not None:
        assert message in str(raised.value)


@pytest.mark.parametrize(
    "name", ["Mars/Olympus_Mons", "", " UTC", "utc/", "../etc/passwd", "/etc/localtime", "Europe"]
)
def test_unknown_time_zones(name: str) -> None:
    with pytest.raises(CronError) as raised:
        validate_timezone(name)
    assert raised.value.field == "timezone"
    assert str(raised.value).startswith("timezone: ")
    with pytest.raises(CronError, match=r"^timezone: "):
        CronSchedule("0 0 * * *", name)


def test_a_huge_time_zone_name_is_refused_without_echoing_it_whole() -> None:
    with pytest.raises(CronError, match=r"\(3000 characters\) is not an IANA") as raised:
        validate_timezone("Europe/" + "x" * 2993)
    assert len(str(raised.value)) < 200


def test_leap_day_only_is_valid() -> None:
    assert CronSchedule("0 0 29 2 *").next_fire_time(dt.datetime(2024, 3, 1, tzinfo=dt.UTC))


# -- validation is bounded ---------------------------------------------------------------------

_TOKENS = st.sampled_from(
    [*"0123456789*/-,?LW#", "1", "5", "*", "MON", "JAN", "L", "LW", "5#5", "31", "60", "7", "@"]
)
_FIELD = st.one_of(
    st.sampled_from(["*", "*/5", "1-5", "0", "1,2", "L", "MON", "JAN", "?", "5#2", "15W", "LW"]),
    st.lists(_TOKENS, min_size=1, max_size=6).map("".join),
)


@settings(derandomize=True, database=None, deadline=None, max_examples=1500)
@given(st.lists(_FIELD, min_size=5, max_size=6).map(" ".join) | st.text(max_size=30))
def test_any_input_is_accepted_or_rejected_quickly(expression: str) -> None:
    """Fuzz: every string either validates, or raises CronError naming a field; never hangs,
    never leaks another exception; a valid schedule fires and describes itself."""
    began = time.perf_counter()
    try:
        schedule = CronSchedule(expression)
    except CronError as err:
        assert err.field in {"expression", "second", "minute", "hour", "day_of_month", "month",
                             "day_of_week"}  # fmt: skip
    else:
        assert schedule.next_fire_time(dt.datetime(2024, 1, 1, tzinfo=dt.UTC)) is not None
        assert not schedule.describe().startswith("Cron expression")
    assert time.perf_counter() - began < 1.0
