"""Differential tests: tickwork's resolver against cronsim (an independent implementation).

Hypothesis generates 5-field expressions and start instants near real UTC offset changes in
America/New_York, Europe/Berlin, Australia/Lord_Howe, America/Sao_Paulo (midnight changes
until 2019), Asia/Kolkata and UTC. For every example:

1. our next six fire times equal a brute-force oracle that enumerates *naive* wall-clock
   matches with cronsim (no zone), resolves each through zoneinfo's fold=0/fold=1 readings and
   applies the DST rule of docs/guide/cron.md literally (fixed-time: first instant after a
   gap, first pass of an overlap; wildcard: nothing in a gap, both passes);
2. our fire times equal cronsim's zone-aware iteration, or the disagreement falls in one of the
   documented differences below (each also pinned by an explicit test at the end of the file,
   so a change in cronsim shows up):

   D1  ``a-a/n`` (a one-value range with a step): cronsim before 2.9 expands it like ``a/n``
       (a to the field maximum), we give ``{a}``, as cronsim 2.9 does. The generated
       expression is rewritten to ``a`` for cronsim.
   D2  Shifts that are not whole hours (Lord_Howe's 30 minutes): for wildcard expressions
       cronsim advances hours by adding 3600 s of UTC, lands on minute :30 after the shift and
       skips the first half hour (or a whole fire). We fire at every existing matching minute.
   D3  A day that starts inside a gap (Sao Paulo's midnight spring-forward): for wildcard
       expressions cronsim returns the non-existent local midnight (``00:00-03:00``, the instant
       of ``01:00-02:00``) even when hour 1 does not match, and then misses matches in the first
       hour after the gap. We fire only at existing matching wall times.
   D4  Fixed-time expressions started in the second pass of a repeated interval: cronsim drops
       the fold and returns the first-pass fire of a later wall time, an instant *before* the
       start. We return the first fire strictly after the start.
   D5  Expressions that can never fire: cronsim accepts most (it only checks day > 29 against
       month lengths) and stops iterating after 50 years; we reject them with CronError.
   D6  6-field expressions: cronsim applies its Debian DST handling to 5-field expressions
       only; a 6-field fixed time in a gap is skipped and one in a repeated interval fires
       twice. We apply the rule to 6-field expressions too; generated 6-field expressions are
       compared with the oracle only, and cronsim's answer is pinned below.

Also pinned below, croniter 7 differences: a 6th field is seconds *last* by default; ``*/n`` in a
day field does not trigger Vixie's AND rule (without ``implement_cron_bug``); a fixed time fires
in both passes of a repeated interval; ``LW`` and ``5L`` are rejected.

The hypothesis profile is derandomized (the same 4,000 examples on every run, ~11 s) with no
example database.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib.metadata
import random
import re
import zoneinfo

import pytest
from croniter import croniter
from cronsim import CronSim, CronSimError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tickwork.cron import CronError, CronSchedule

UTC = dt.UTC
HOUR = dt.timedelta(hours=1)
COUNT = 6
ZONES = (  # most intricate first: hypothesis favours early elements
    "Australia/Lord_Howe",
    "America/Sao_Paulo",
    "America/New_York",
    "Europe/Berlin",
    "Asia/Kolkata",
    "UTC",
)
DIFFERENTIAL = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=1000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def _transitions(name: str) -> list[int]:
    """POSIX seconds of offset changes in 2000-2040 (daily samples, bisected)."""
    zone = zoneinfo.ZoneInfo(name)
    fromts = dt.datetime.fromtimestamp
    t = int(dt.datetime(2000, 1, 1, tzinfo=UTC).timestamp())
    end = int(dt.datetime(2041, 1, 1, tzinfo=UTC).timestamp())
    found = []
    offset = fromts(t, zone).utcoffset()
    while t < end:
        new = fromts(t + 86400, zone).utcoffset()
        if new != offset:
            lo, hi = t, t + 86400
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if fromts(mid, zone).utcoffset() == offset else (lo, mid)
            found.append(hi)
            offset = new
        t += 86400
    return found


TRANSITIONS = {name: _transitions(name) for name in ZONES}
#: The same, in a fixed shuffled order: hypothesis favours early elements of sampled_from.
SHUFFLED = {
    name: random.Random(name).sample(found, len(found)) for name, found in TRANSITIONS.items()
}
ANCHORS_2000_2040 = [
    int(dt.datetime(y, m, 1, tzinfo=UTC).timestamp()) for y in (2001, 2026, 2039) for m in (1, 6)
]


# -- expression strategies --------------------------------------------------------------------


def _plain_field(lo: int, hi: int, names: tuple[str, ...] = ()) -> st.SearchStrategy[str]:
    value = st.integers(lo, hi)
    token = value.map(str) | (st.sampled_from(names) if names else value.map(str))
    step = st.integers(1, hi)
    ranges = st.tuples(value, value).map(lambda ab: (min(ab), max(ab)))
    item = st.one_of(
        token,
        ranges.map(lambda ab: f"{ab[0]}-{ab[1]}"),
        st.tuples(ranges, step).map(lambda r: f"{r[0][0]}-{r[0][1]}/{r[1]}"),
        st.tuples(value, step).map(lambda r: f"{r[0]}/{r[1]}"),
    )
    return st.one_of(
        item,
        st.lists(item, min_size=2, max_size=3).map(",".join),
        step.map(lambda n: f"*/{n}"),
        st.just("*"),
    )


MINUTE = _plain_field(0, 59)
HOUR_FIELD = _plain_field(0, 23)
DOM = st.one_of(st.just("*"), st.just("*"), st.sampled_from(["L", "LW"]), _plain_field(1, 31))
MONTH = st.one_of(st.just("*"), st.just("*"), _plain_field(1, 12, ("JAN", "MAR", "JUN", "NOV")))
DOW = st.one_of(
    st.just("*"),
    st.just("*"),
    _plain_field(0, 7, ("SUN", "MON", "FRI", "SAT")),
    st.tuples(st.integers(0, 7), st.integers(1, 5)).map(lambda dn: f"{dn[0]}#{dn[1]}"),
    st.integers(0, 7).map(lambda d: f"{d}L"),
)
EXPRESSIONS = st.tuples(MINUTE, HOUR_FIELD, DOM, MONTH, DOW).map(" ".join)


@st.composite
def starts(draw: st.DrawFn) -> tuple[str, dt.datetime]:
    """A zone and an aware start instant in it, mostly within 36 h of an offset change."""
    name = draw(st.sampled_from(ZONES))
    zone = zoneinfo.ZoneInfo(name)
    anchor = draw(st.sampled_from(SHUFFLED[name] or ANCHORS_2000_2040))
    delta = draw(
        st.one_of(
            st.integers(-36 * 3600, 36 * 3600),
            st.integers(-4 * 3600, 4 * 3600),
            st.integers(0, 3599),  # inside the repeated interval after a backward shift
            st.sampled_from([-3601, -3600, -1800, -61, -1, 0, 1, 59, 1800, 3599, 3600, 5400]),
        )
    )
    micro = draw(st.sampled_from([0, 0, 0, 1, 500000, 999999]))
    instant = dt.datetime.fromtimestamp(anchor + delta, UTC) + dt.timedelta(microseconds=micro)
    return name, instant.astimezone(zone)  # fold set right (aware arithmetic would reset it)


# -- the oracle -------------------------------------------------------------------------------


def for_cronsim(expression: str) -> str:
    """Rewrite ``a-a/n`` to ``a`` (difference D1) so cronsim reads the same sets as we do."""
    return re.sub(r"(?<![0-9])([0-9]+)-\1/[0-9]+", r"\1", expression)


def is_fixed(expression: str) -> bool:
    minute, hour = expression.split()[-5:-3]  # seconds first in 6 fields
    return not minute.startswith("*") and not hour.startswith("*")


def _gap_end(zone: zoneinfo.ZoneInfo, wall: dt.datetime) -> dt.datetime:
    """First instant after the gap containing the non-existent ``wall``, by minute steps
    (these zones shift on whole minutes)."""
    probe = wall.replace(second=0, microsecond=0)
    while True:
        probe += dt.timedelta(minutes=1)
        aware = probe.replace(tzinfo=zone)
        if aware.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == probe:
            return aware.astimezone(UTC).astimezone(zone)


def oracle(expression: str, name: str, start: dt.datetime, count: int) -> list[str]:
    """The first ``count`` fire times strictly after ``start``, by the docs' DST rule, literally."""
    zone = zoneinfo.ZoneInfo(name)
    fixed = is_fixed(expression)
    wall_start = start.astimezone(zone).replace(tzinfo=None) - 3 * HOUR
    naive = CronSim(for_cronsim(expression), wall_start)
    fires: dict[float, dt.datetime] = {}  # by POSIX time: same-zone datetimes ignore fold in ==
    horizon: dt.datetime | None = None
    for wall in naive:
        if horizon is not None and wall > horizon:
            break
        instants = []
        for fold in (0, 1):
            aware = wall.replace(tzinfo=zone, fold=fold)
            back = aware.astimezone(UTC).astimezone(zone)
            if back.replace(tzinfo=None) == wall:
                instants.append(back)
        if not instants:
            found = [_gap_end(zone, wall)] if fixed else []
        elif fixed:
            found = [min(instants, key=lambda d: d.timestamp())]
        else:
            found = instants
        fires.update((f.timestamp(), f) for f in found if f.timestamp() > start.timestamp())
        if horizon is None and len(fires) >= count:
            kth = fires[sorted(fires)[count - 1]]
            horizon = kth.replace(tzinfo=None) + 3 * HOUR
    return [fires[key].isoformat() for key in sorted(fires)[:count]]


def ours(schedule: CronSchedule, start: dt.datetime, count: int) -> list[dt.datetime]:
    return [p.fire_time for p in schedule.next_fire_times(start, count)]


def cronsim_times(expression: str, start: dt.datetime, count: int) -> list[dt.datetime]:
    iterator = CronSim(for_cronsim(expression), start)
    result = []
    try:
        for _ in range(count):
            result.append(next(iterator))
    except StopIteration:
        pass
    return result


def is_imaginary(value: dt.datetime) -> bool:
    return value.astimezone(UTC).astimezone(value.tzinfo).replace(tzinfo=None) != value.replace(
        tzinfo=None
    )


def explained(
    expression: str,
    name: str,
    start: dt.datetime,
    mine: list[dt.datetime],
    theirs: list[dt.datetime],
) -> str | None:
    """Which documented difference explains cronsim's answer, or None."""
    zone = zoneinfo.ZoneInfo(name)
    lo = start.timestamp() - 86400
    hi = max(x.timestamp() for x in [*mine, *theirs, start]) + 86400
    shifts = []
    for at in TRANSITIONS[name]:
        if lo <= at <= hi:
            before = dt.datetime.fromtimestamp(at - 1, zone).utcoffset()
            after = dt.datetime.fromtimestamp(at, zone)
            assert before is not None and after.utcoffset() is not None
            shifts.append((after, after.utcoffset() - before))  # type: ignore[operator]
    if is_fixed(expression):
        if start.fold == 1 and any(t.timestamp() <= start.timestamp() for t in theirs):
            return "D4"
        return None
    if any(shift % HOUR for _, shift in shifts):
        return "D2"
    midnight_gaps = [
        at for at, shift in shifts if shift > dt.timedelta(0) and (at - shift).time() == dt.time(0)
    ]
    if midnight_gaps:
        return "D3"
    return None


def check(expression: str, name: str, start: dt.datetime) -> str | None:
    """Compare with the oracle and cronsim; return the documented difference met, if any."""
    try:
        schedule = CronSchedule(expression, name)
    except CronError as err:
        # D5: only "can never fire" is ours alone; cronsim must not find a fire either.
        assert err.field == "day_of_month" and "can never fire" in str(err), str(err)
        with contextlib.suppress(CronSimError):  # rejecting it too is agreement
            assert cronsim_times(expression, start, 1) == []
        return "D5"
    mine = ours(schedule, start, COUNT)
    assert [m.isoformat() for m in mine] == oracle(expression, name, start, COUNT)
    theirs = cronsim_times(expression, start, COUNT)
    if [m.timestamp() for m in mine] == [t.timestamp() for t in theirs]:
        for m, t in zip(mine, theirs, strict=True):
            # Same instants; a different spelling is only cronsim's non-existent midnight (D3).
            assert m.isoformat() == t.isoformat() or is_imaginary(t)
        return None
    reason = explained(expression, name, start, mine, theirs)
    assert reason is not None, (
        f"undocumented difference for {expression!r} in {name} from {start.isoformat()}:\n"
        f"  ours    {[m.isoformat() for m in mine]}\n"
        f"  cronsim {[t.isoformat() for t in theirs]}"
    )
    return reason


@DIFFERENTIAL
@given(EXPRESSIONS, starts())
def test_random_expressions(expression: str, zone_start: tuple[str, dt.datetime]) -> None:
    check(expression, *zone_start)


#: Hours in which these zones shift (New York 01-03, Berlin 02-03, Lord_Howe 01:30-02:30,
#: Sao_Paulo 23-01), so fixed times land in gaps and repeated intervals.
DST_HOURS = st.sampled_from(["0", "1", "2", "3", "23", "1,2", "0,23", "1-3", "2/2", "*/2"])
DST_MINUTES = st.one_of(
    st.sampled_from(["0", "30", "45", "0,30", "15-45/15", "*/20", "*"]), st.integers(0, 59).map(str)
)
DST_EXPRESSIONS = st.tuples(
    DST_MINUTES, DST_HOURS, st.sampled_from(["*", "*", "L", "1-7"]), st.just("*"),
    st.sampled_from(["*", "*", "0", "6,0", "SUN#1"]),
).map(" ".join)  # fmt: skip


@settings(DIFFERENTIAL, max_examples=1000)
@given(DST_EXPRESSIONS, starts())
def test_expressions_at_shift_hours(expression: str, zone_start: tuple[str, dt.datetime]) -> None:
    check(expression, *zone_start)


SIX_FIELD_EXPRESSIONS = st.tuples(
    st.sampled_from(["0", "30", "*/20", "15,45", "*/7"]), DST_MINUTES, DST_HOURS,
    st.sampled_from(["*", "*", "L", "1-7"]), st.just("*"), st.sampled_from(["*", "*", "0", "6,0"]),
).map(" ".join)  # fmt: skip


@settings(DIFFERENTIAL, max_examples=500)
@given(SIX_FIELD_EXPRESSIONS, starts())
def test_six_field_expressions_against_oracle(
    expression: str, zone_start: tuple[str, dt.datetime]
) -> None:
    """6-field (seconds-first) expressions follow the same rule; cronsim's zone-aware answer
    differs by design (D6), so only the oracle (cronsim as a naive matcher) is compared."""
    name, start = zone_start
    mine = ours(CronSchedule(expression, name), start, COUNT)
    assert [m.isoformat() for m in mine] == oracle(expression, name, start, COUNT)


# -- the documented differences, pinned -------------------------------------------------------


def iso(values: list[dt.datetime]) -> list[str]:
    return [v.isoformat() for v in values]


def at(
    name: str,
    year: int,
    month: int,
    day: int,
    hour: int = 0,
    minute: int = 0,
    second: int = 0,
    *,
    fold: int = 0,
) -> dt.datetime:
    zone = zoneinfo.ZoneInfo(name)
    return dt.datetime(year, month, day, hour, minute, second, tzinfo=zone, fold=fold)


def raw_cronsim(expression: str, start: dt.datetime, count: int = 3) -> list[str]:
    iterator = CronSim(expression, start)
    return [next(iterator).isoformat() for _ in range(count)]


def _cronsim_version() -> tuple[int, ...]:
    return tuple(int(part) for part in importlib.metadata.version("cronsim").split(".")[:2])


def test_d1_single_value_range_with_step() -> None:
    start = at("UTC", 2024, 1, 1)
    ours_d1 = [
        "2024-01-01T00:25:00+00:00",
        "2024-01-01T01:25:00+00:00",
        "2024-01-01T02:25:00+00:00",
    ]
    assert iso(ours(CronSchedule("25-25/25 * * * *"), start, 3)) == ours_d1
    if _cronsim_version() >= (2, 9):  # cronsim 2.9 reads {25}, as we do
        assert raw_cronsim("25-25/25 * * * *", start) == ours_d1
        return
    assert raw_cronsim("25-25/25 * * * *", start) == [
        "2024-01-01T00:25:00+00:00",
        "2024-01-01T00:50:00+00:00",  # cronsim < 2.9: 25-25/25 read as 25/25 = {25, 50}
        "2024-01-01T01:25:00+00:00",
    ]


def test_d2_half_hour_shift_wildcard() -> None:
    # Lord_Howe 2023-10-01 02:00 +10:30 -> 02:30 +11:00; 2023-10-01 is a Sunday (*/2 has 0).
    start = at("Australia/Lord_Howe", 2023, 10, 1, 1, 34, 58)
    expression = "* 5,20 * * */2"
    assert raw_cronsim(expression, start)[0] == "2023-10-01T05:30:00+11:00"  # 05:00-05:29 lost
    assert iso(ours(CronSchedule(expression, "Australia/Lord_Howe"), start, 2)) == [
        "2023-10-01T05:00:00+11:00",
        "2023-10-01T05:01:00+11:00",
    ]


def test_d3_day_starting_in_a_midnight_gap() -> None:
    # Sao_Paulo 2010-10-17 00:00 -03:00 -> 01:00 -02:00 (a Sunday); 2018-11-04 likewise.
    sao_paulo = "America/Sao_Paulo"
    start = at(sao_paulo, 2010, 10, 16, 5, 33, 38)
    assert raw_cronsim("*/7 1 * * 5,7", start, 1) == ["2010-10-22T01:00:00-02:00"]  # missed
    assert iso(ours(CronSchedule("*/7 1 * * 5,7", sao_paulo), start, 2)) == [
        "2010-10-17T01:00:00-02:00",
        "2010-10-17T01:07:00-02:00",
    ]
    start = at(sao_paulo, 2018, 11, 3, 21, 47, 12)
    expression = "*/50 */11 */3 * *"
    assert raw_cronsim(expression, start, 2) == [
        "2018-11-04T00:00:00-03:00",  # does not exist; the instant is 01:00-02:00, hour 1
        "2018-11-04T11:00:00-02:00",
    ]
    assert iso(ours(CronSchedule(expression, sao_paulo), start, 2)) == [
        "2018-11-04T11:00:00-02:00",
        "2018-11-04T11:50:00-02:00",
    ]


def test_d4_fixed_time_started_in_second_pass() -> None:
    # New York 2026-11-01 02:00 EDT -> 01:00 EST; the start is 01:15 EST (second pass).
    start = at("America/New_York", 2026, 11, 1, 1, 15, fold=1)
    assert raw_cronsim("30 1 * * *", start, 1) == ["2026-11-01T01:30:00-04:00"]  # before start
    assert iso(ours(CronSchedule("30 1 * * *", "America/New_York"), start, 1)) == [
        "2026-11-02T01:30:00-05:00"
    ]


def test_d5_never_firing_expression() -> None:
    iterator = CronSim("0 0 */30 2 5#5", at("UTC", 2024, 1, 1))
    with pytest.raises(StopIteration):
        next(iterator)
    with pytest.raises(CronError, match="can never fire") as err:
        CronSchedule("0 0 */30 2 5#5")
    assert err.value.field == "day_of_month"


def test_d6_six_field_dst() -> None:
    berlin = "Europe/Berlin"
    spring, fall = at(berlin, 2026, 3, 28, 12), at(berlin, 2026, 10, 24, 12)
    assert raw_cronsim("0 30 2 * * *", spring, 1) == ["2026-03-30T02:30:00+02:00"]  # skipped
    assert raw_cronsim("0 30 2 * * *", fall, 2) == [
        "2026-10-25T02:30:00+02:00",
        "2026-10-25T02:30:00+01:00",  # fired twice
    ]
    schedule = CronSchedule("0 30 2 * * *", berlin)
    assert iso(ours(schedule, spring, 2)) == [
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
    ]
    assert iso(ours(schedule, fall, 2)) == [
        "2026-10-25T02:30:00+02:00",
        "2026-10-26T02:30:00+01:00",
    ]


def raw_croniter(expression: str, start: dt.datetime, count: int = 3, **kw: bool) -> list[str]:
    iterator = croniter(expression, start, **kw)
    return [iterator.get_next(dt.datetime).isoformat() for _ in range(count)]


def test_croniter_differences() -> None:
    new_york = "America/New_York"
    start = at(new_york, 2026, 10, 31, 12)
    assert raw_croniter("30 1 * * *", start) == [
        "2026-11-01T01:30:00-04:00",
        "2026-11-01T01:30:00-05:00",  # croniter fires a fixed time in both passes
        "2026-11-02T01:30:00-05:00",
    ]
    assert iso(ours(CronSchedule("30 1 * * *", new_york), start, 2)) == [
        "2026-11-01T01:30:00-04:00",
        "2026-11-02T01:30:00-05:00",
    ]
    start = at("UTC", 2026, 7, 3, 12, 0, 10)
    assert raw_croniter("*/30 * * * * *", start, 2) == [  # seconds read from the 6th field
        "2026-07-03T12:00:11+00:00",
        "2026-07-03T12:00:12+00:00",
    ]
    assert iso(ours(CronSchedule("*/30 * * * * *"), start, 2)) == [
        "2026-07-03T12:00:30+00:00",
        "2026-07-03T12:01:00+00:00",
    ]
    start = at("UTC", 2024, 1, 1)
    assert raw_croniter("0 0 */2 * 1", start, 2) == [  # OR: every odd day plus Mondays
        "2024-01-03T00:00:00+00:00",
        "2024-01-05T00:00:00+00:00",
    ]
    assert iso(ours(CronSchedule("0 0 */2 * 1"), start, 2)) == [  # Vixie AND: odd Mondays
        "2024-01-15T00:00:00+00:00",
        "2024-01-29T00:00:00+00:00",
    ]
    for expression in ("0 0 LW * *", "0 0 * * 5L"):
        with pytest.raises(ValueError):
            croniter(expression, start)
        assert CronSchedule(expression).next_fire_time(start) is not None


def test_oracle_agrees_on_design_examples() -> None:
    """The oracle itself, on the docs' DST examples (so a broken oracle cannot pass silently)."""

    def expect(expression: str, name: str, start: dt.datetime, want: list[str]) -> None:
        assert oracle(expression, name, start, len(want)) == want

    expect("30 2 * * *", "Europe/Berlin", at("Europe/Berlin", 2026, 3, 28, 12), [
        "2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"])  # fmt: skip
    expect("5 * * * *", "Europe/Berlin", at("Europe/Berlin", 2026, 3, 29, 1), [
        "2026-03-29T01:05:00+01:00", "2026-03-29T03:05:00+02:00"])  # fmt: skip
    expect("30 1 * * *", "America/New_York", at("America/New_York", 2026, 10, 31, 12), [
        "2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"])  # fmt: skip
    expect("0 * * * *", "America/New_York", at("America/New_York", 2026, 11, 1, 0, 30), [
        "2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00-05:00"])  # fmt: skip
