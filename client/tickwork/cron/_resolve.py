"""Resolve fire times of a parsed cron expression in an IANA time zone, across DST (the DST
rule: see :mod:`tickwork.cron`).

Pure and synchronous: no I/O besides the tz database reads of :mod:`zoneinfo`, no clock
reads, no state between calls besides memo caches. Times are resolved on the wall clock, then
mapped to instants with zoneinfo's ``fold=0`` / ``fold=1`` readings (PEP 495); gap ends are
found by bisecting ``utcoffset`` to the second.
"""

from __future__ import annotations

import enum
import math
from bisect import bisect_left
from dataclasses import dataclass
from datetime import UTC, date, datetime

from tickwork.cron._describe import describe
from tickwork.cron._parse import MAX_DAYS, CronError, parse_expression, validate_timezone

__all__ = ["DST_NOTE_TEXT", "CronSchedule", "DstNote", "FirePreview"]

#: Last year searched; a schedule whose next fire would be later returns None.
_MAX_YEAR = 9999


class DstNote(enum.Enum):
    """How a daylight-saving (or other UTC offset) shift shaped one fire time."""

    NONE = "none"
    """The wall time exists exactly once, or the expression is wildcard (fires in both passes
    of a repeated interval)."""
    MOVED_FROM_GAP = "moved_from_gap"
    """The wall time was skipped by a forward shift; the fixed-time fire moved to the first
    instant after the gap."""
    FIRST_PASS_ONLY = "first_pass_only"
    """The wall time repeats after a backward shift; a fixed-time expression fires in the first
    pass only."""


DST_NOTE_TEXT = {
    DstNote.NONE: "",
    DstNote.MOVED_FROM_GAP: (
        "moved: the wall time does not exist on this day (DST gap); "
        "fires at the first instant after the gap"
    ),
    DstNote.FIRST_PASS_ONLY: (
        "single: the wall time occurs twice on this day (DST fall back); "
        "fires in the first pass only"
    ),
}
"""Each note in words, as DescribeCron and ``tickwork cron`` show it ("" for none)."""


@dataclass(frozen=True)
class FirePreview:
    """One upcoming fire time, for previews (DescribeCron).

    Attributes:
        fire_time: Aware datetime in the schedule's zone, with the fold that gives the right
            UTC offset.
        dst_note: How a DST shift affected this fire, if at all.
    """

    fire_time: datetime
    dst_note: DstNote


class CronSchedule:
    """A validated cron expression in an IANA time zone, resolving fire times across DST.

    Parses and validates once in the constructor; the object is immutable afterwards (its
    caches aside) and safe to share between threads. See :mod:`tickwork.cron` for the
    dialect, Vixie's day rule and Debian's DST rule.

    Attributes:
        expression: The expression as given.
        timezone: The IANA zone name as given.
        has_seconds: True for a 6-field (seconds-first) expression.
        is_fixed_time: True when neither the minute nor the hour field starts with ``*``
            (Debian cron's rule); such expressions fire once when a DST shift skips or repeats
            their wall time.
    """

    __slots__ = (
        "_day_cache",
        "_days",
        "_fields",
        "_hours",
        "_minutes",
        "_months",
        "_seconds",
        "_zone",
        "expression",
        "has_seconds",
        "is_fixed_time",
        "timezone",
    )

    def __init__(self, expression: str, timezone: str = "UTC") -> None:
        """Parse and validate.

        Args:
            expression: 5-field or seconds-first 6-field cron expression, or a macro.
            timezone: IANA zone name in which wall times are resolved; default ``"UTC"``.

        Raises:
            CronError: naming the field at fault: wrong field count, out-of-range value,
                zero or oversized step, unknown name or macro, malformed range or extra,
                an expression that can never fire (``field == "day_of_month"``), or an unknown
                zone (``field == "timezone"``).
        """
        if not isinstance(expression, str):
            raise CronError("expression", "must be a string")
        self.expression = expression
        self.timezone = timezone
        self._zone = validate_timezone(timezone)
        fields = parse_expression(expression)
        self._fields = fields
        self._seconds = fields.seconds
        self._minutes = fields.minutes
        self._hours = fields.hours
        self._months = fields.months
        self._days = fields.days
        self._day_cache: dict[tuple[int, int], tuple[int, ...]] = {}
        self.has_seconds = fields.has_seconds
        self.is_fixed_time = fields.is_fixed_time

    def __repr__(self) -> str:
        return f"CronSchedule({self.expression!r}, {self.timezone!r})"

    # -- wall-clock calendar ------------------------------------------------------------------

    def _month_days(self, ndays: int, first_weekday: int) -> tuple[int, ...]:
        key = (ndays, first_weekday)
        days = self._day_cache.get(key)
        if days is None:
            days = self._days.days(ndays, first_weekday)
            self._day_cache[key] = days
        return days

    def _wall_next(
        self, year: int, month: int, day: int, hour: int, minute: int, second: int
    ) -> datetime | None:
        """The first matching naive wall time at or after the given fields.

        The fields may overflow by one (``second == 60``, ``day == 32``, ...); carrying is
        done here. None when the answer would be after year 9999.
        """
        months, hours, minutes, seconds = self._months, self._hours, self._minutes, self._seconds
        while year <= _MAX_YEAR:
            i = bisect_left(months, month)
            if i == len(months):
                year, month, day, hour, minute, second = year + 1, months[0], 1, 0, 0, 0
                continue
            if months[i] != month:
                month, day, hour, minute, second = months[i], 1, 0, 0, 0
            if month == 2:
                leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
                ndays = 29 if leap else 28
            else:
                ndays = MAX_DAYS[month]
            first_weekday = (date(year, month, 1).weekday() + 1) % 7
            days = self._month_days(ndays, first_weekday)
            i = bisect_left(days, day)
            if i == len(days):
                month, day, hour, minute, second = month + 1, 1, 0, 0, 0
                if month == 13:
                    year, month = year + 1, 1
                continue
            if days[i] != day:
                day, hour, minute, second = days[i], 0, 0, 0
            i = bisect_left(hours, hour)
            if i == len(hours):
                day, hour, minute, second = day + 1, 0, 0, 0
                continue
            if hours[i] != hour:
                hour, minute, second = hours[i], 0, 0
            i = bisect_left(minutes, minute)
            if i == len(minutes):
                hour, minute, second = hour + 1, 0, 0
                continue
            if minutes[i] != minute:
                minute, second = minutes[i], 0
            i = bisect_left(seconds, second)
            if i == len(seconds):
                minute, second = minute + 1, 0
                continue
            return datetime(year, month, day, hour, minute, seconds[i])
        return None

    def _wall_after(self, wall: datetime) -> datetime | None:
        """The first matching naive wall time strictly after ``wall``."""
        return self._wall_next(
            wall.year, wall.month, wall.day, wall.hour, wall.minute, wall.second + 1
        )

    def _wall_from(self, wall: datetime) -> datetime | None:
        """The first matching naive wall time at or after ``wall`` (rounded up to a second)."""
        second = wall.second + (1 if wall.microsecond else 0)
        return self._wall_next(wall.year, wall.month, wall.day, wall.hour, wall.minute, second)

    # -- resolution in the zone ---------------------------------------------------------------

    def _transition(self, before: datetime, after: datetime) -> datetime:
        """The instant (naive UTC) of the one offset change in ``(before, after]``.

        ``before`` and ``after`` are naive UTC instants with different UTC offsets in the
        zone; tz data changes offsets on whole seconds, so this bisects on seconds.
        """
        zone = self._zone
        lo = math.floor(before.replace(tzinfo=UTC).timestamp())
        hi = math.ceil(after.replace(tzinfo=UTC).timestamp())
        target = datetime.fromtimestamp(hi, zone).utcoffset()
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if datetime.fromtimestamp(mid, zone).utcoffset() == target:
                hi = mid
            else:
                lo = mid
        return datetime.fromtimestamp(hi, UTC).replace(tzinfo=None)

    def _scan(self, wall: datetime | None) -> tuple[datetime, DstNote] | None:
        """The first fire produced by the matching wall time ``wall`` or a later one.

        Valid only when no earlier matching wall time can fire after the query instant (the
        caller's job). Wall times are monotonic in their first-pass instants, so the first
        wall time that fires at all gives the answer.
        """
        zone = self._zone
        while wall is not None:
            local = wall.replace(tzinfo=zone)
            offset = local.utcoffset()
            offset_fold = local.replace(fold=1).utcoffset()
            assert offset is not None and offset_fold is not None
            if offset == offset_fold:
                return local, DstNote.NONE
            if offset > offset_fold:  # repeated: the first pass comes first
                note = DstNote.FIRST_PASS_ONLY if self.is_fixed_time else DstNote.NONE
                return local, note
            # Skipped: fold=0 reads it with the offset before the gap, fold=1 with the one after.
            shift = self._transition(wall - offset_fold, wall - offset)
            if self.is_fixed_time:
                return shift.replace(tzinfo=UTC).astimezone(zone), DstNote.MOVED_FROM_GAP
            wall = self._wall_from(shift + offset_fold)  # first wall time after the gap
        return None

    def _next(self, after: datetime) -> tuple[datetime, DstNote] | None:
        """The next fire after ``after`` and its DST note; None when there is none whose
        UTC instant a datetime can hold (a local time late on 9999-12-31 west of UTC is
        in the year 10000 in UTC)."""
        result = self._next_local(after)
        if result is not None:
            try:
                result[0].astimezone(UTC)
            except OverflowError:
                return None
        return result

    def _next_local(self, after: datetime) -> tuple[datetime, DstNote] | None:
        if not isinstance(after, datetime):
            raise TypeError(f"after must be a datetime, not {type(after).__name__}")
        if after.tzinfo is None or after.utcoffset() is None:
            raise ValueError("after must be an aware datetime")
        zone = self._zone
        try:
            # Via UTC, so an imaginary or mis-folded datetime in our own zone is normalised.
            local = after.astimezone(UTC).astimezone(zone)
            wall = local.replace(tzinfo=None)
            first_offset = local.replace(fold=0).utcoffset()
            second_offset = local.replace(fold=1).utcoffset()
            assert first_offset is not None and second_offset is not None
            if first_offset <= second_offset:  # `after` is not in a repeated interval
                return self._scan(self._wall_after(wall))
            # `after` is in a repeated interval [start, end) of wall time.
            shift = self._transition(wall - first_offset, wall - second_offset)
            start, end = shift + second_offset, shift + first_offset
            if local.fold == 1:  # second pass
                if self.is_fixed_time:
                    return self._scan(self._wall_from(end))
                nxt = self._wall_after(wall)
                if nxt is not None and nxt < end:
                    return nxt.replace(tzinfo=zone, fold=1), DstNote.NONE
                return self._scan(nxt)
            nxt = self._wall_after(wall)  # first pass
            if self.is_fixed_time or (nxt is not None and nxt < end):
                return self._scan(nxt)
            again = self._wall_from(start)  # the second pass comes before `nxt`
            if again is not None and again < end:
                return again.replace(tzinfo=zone, fold=1), DstNote.NONE
            return self._scan(nxt)
        except OverflowError:
            return None

    def next_fire_time(self, after: datetime) -> datetime | None:
        """The first fire instant strictly after ``after``.

        Args:
            after: Aware datetime, any zone.

        Returns:
            Aware datetime in the schedule's zone with the fold that gives its UTC offset
            (convert with ``.astimezone(datetime.UTC)`` to store or to compare with datetimes
            of the same zone: Python compares same-zone datetimes by wall time, ignoring fold).
            None when the schedule never fires after ``after`` (or not before year 10000).

        Raises:
            ValueError: ``after`` is naive.
        """
        result = self._next(after)
        return None if result is None else result[0]

    def next_fire_times(self, after: datetime, count: int) -> list[FirePreview]:
        """The next ``count`` fire times strictly after ``after``, in order, with DST notes.

        Args:
            after: Aware datetime, any zone.
            count: How many, >= 0. Cost is linear in ``count``; callers exposing this should
                cap it.

        Returns:
            Up to ``count`` previews (fewer only when the schedule stops firing).

        Raises:
            ValueError: ``after`` is naive or ``count`` is negative.
        """
        if count < 0:
            raise ValueError("count must be >= 0")
        previews: list[FirePreview] = []
        cursor = after
        while len(previews) < count:
            result = self._next(cursor)
            if result is None:
                break
            previews.append(FirePreview(result[0], result[1]))
            cursor = result[0]
        return previews

    def describe(self) -> str:
        """A human-readable English description, e.g. ``"At 02:00 AM"``.

        Built from cron-descriptor's segments, with the day wording fixed to Vixie's rule
        ("or" when both day fields are restricted, "only on" when one starts with ``*``).
        Macros are described as their expansion; 6-field expressions as seconds-first.

        Returns:
            The description; never raises for a schedule that validated.
        """
        return describe(self._fields, self.expression)
