"""Cron expressions: parse, validate, and resolve fire times in an IANA time zone across DST.

Pure and synchronous: no I/O of its own (only the tz database reads that :mod:`zoneinfo`
does), no clock reads, no state between calls besides memo caches. Every datetime that goes in
must be aware; every fire time that comes out is aware, in the schedule's zone, with the right
``fold`` (so ``isoformat()`` shows the right offset). Store fire times as
``fire_time.astimezone(datetime.UTC)``.

Dialect
    Five fields ``minute hour day_of_month month day_of_week``, or six with **seconds first**
    ``second minute hour day_of_month month day_of_week``. Per field: ``*``, values, ranges
    ``a-b``, lists ``a,b``, steps ``*/n``, ``a-b/n`` and ``a/n`` (``a`` to the field maximum);
    names ``JAN``-``DEC`` and ``SUN``-``SAT`` (case-insensitive); day_of_week 0-7 where 0 and
    7 are Sunday (a day_of_week range ending in ``SUN``/``0``, e.g. ``SAT-SUN``, ends at 7).
    Macros ``@yearly`` ``@annually`` ``@monthly`` ``@weekly`` ``@daily`` ``@midnight``
    ``@hourly``. Quartz-style extras, each only as the whole field: day_of_month ``L`` (last
    day), ``LW`` (last weekday, Mon-Fri), ``nW`` (weekday nearest day n, within the month; no
    match in a month without day n), ``?`` (same as ``*``); day_of_week ``d#n`` (n-th weekday
    d of the month, n 1-5), ``dL`` (last weekday d of the month), ``?`` (same as ``*``).

Day rule (Vixie cron: crontab(5), and the DOM_STAR/DOW_STAR flags that ``entry.c`` sets
when a field starts with ``*`` and ``cron.c`` tests)
    If both day_of_month and day_of_week are restricted, a day matches when **either**
    matches. If either field starts with ``*`` (including ``*/n``) or is ``?``, **both** must
    match.

DST rule (Debian cron: cron(8), "Daylight Saving Time and other time changes"; offsets from
the IANA tz database through :mod:`zoneinfo`)
    An expression is *fixed-time* when neither its minute nor its hour field starts with
    ``*`` (the seconds field of a 6-field expression does not count); otherwise *wildcard*.

    * Wall times skipped by a forward shift: a fixed-time expression fires **once**, at the
      first instant after the gap (however many of its wall times the gap swallowed); a
      wildcard expression has no fires in the gap.
    * Wall times repeated by a backward shift: a fixed-time expression fires **once**, in the
      first pass; a wildcard expression fires in both passes.

    This holds for shifts of any size (Australia/Lord_Howe's 30 minutes, Antarctica/Troll's
    two hours, Pacific/Apia's skipped day in 2011) and for 6-field expressions. Debian cron
    itself only applies the backward rule to shifts under three hours; here it always applies.

Times are resolved on the wall clock, then mapped to instants with zoneinfo's ``fold=0`` /
``fold=1`` readings (PEP 495); gap ends are found by bisecting ``utcoffset`` to the second.
Cost per call is a few microseconds outside transitions, tens of microseconds at one.
"""

from __future__ import annotations

import enum
import math
import re
from bisect import bisect_left
from dataclasses import dataclass
from datetime import UTC, date, datetime
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cron_descriptor import DescriptionTypeEnum, ExpressionDescriptor, Options

__all__ = [
    "CronError",
    "CronSchedule",
    "DstNote",
    "FirePreview",
    "validate_timezone",
]

#: Longest accepted expression, characters; keeps parsing bounded.
_MAX_EXPRESSION_LENGTH = 512

#: Last year searched; a schedule whose next fire would be later returns None.
_MAX_YEAR = 9999

_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

_MONTH_NAMES = {
    name: number
    for number, name in enumerate(
        ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"),
        start=1,
    )
}
_DAY_NAMES = {
    name: number for number, name in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))
}
_MONTH_TITLES = (
    "",
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_MAX_DAYS = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_DIGITS = re.compile(r"[0-9]+", re.ASCII)
_NEAREST_WEEKDAY = re.compile(r"([0-9]+)W", re.ASCII)
_NTH_WEEKDAY = re.compile(r"([0-9]+|[A-Z]{3})#([0-9]+)", re.ASCII)
_LAST_WEEKDAY_OF = re.compile(r"([0-9]+|[A-Z]{3})L", re.ASCII)


class CronError(ValueError):
    """An invalid cron expression or time zone.

    Attributes:
        field: Where the fault is: ``"expression"`` (the whole expression, e.g. wrong field
            count or unknown macro), ``"second"``,
            ``"minute"``, ``"hour"``, ``"day_of_month"`` (also for an expression that can
            never fire: no day the month and day fields allow exists), ``"month"``,
            ``"day_of_week"``, or ``"timezone"``.

    ``str(err)`` is ``"<field>: <reason>"``, e.g. ``"day_of_month: 32 is out of range 1-31"``
    or ``"day_of_month: can never fire (day 30 does not exist in February)"``.
    """

    field: str

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self._reason = reason

    @property
    def reason(self) -> str:
        """The message without the field prefix."""
        return self._reason

    def __reduce__(self) -> tuple[type[CronError], tuple[str, str]]:
        return (type(self), (self.field, self._reason))


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


def validate_timezone(name: str) -> ZoneInfo:
    """The IANA time zone called ``name``.

    Args:
        name: An IANA tz database key such as ``"Europe/Berlin"`` or ``"UTC"``; case-sensitive.

    Returns:
        The (cached) :class:`zoneinfo.ZoneInfo`.

    Raises:
        CronError: ``field == "timezone"`` when the name is empty, malformed or not in the tz
            database.
    """
    if not isinstance(name, str) or not name or name != name.strip() or name == "localtime":
        raise CronError("timezone", f"{name!r} is not an IANA time zone name")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise CronError("timezone", f"unknown time zone {name!r}") from exc


@dataclass(frozen=True)
class _Spec:
    name: str
    lo: int
    hi: int
    names: dict[str, int] | None = None
    what: str = "a number"


_SECOND = _Spec("second", 0, 59)
_MINUTE = _Spec("minute", 0, 59)
_HOUR = _Spec("hour", 0, 23)
_DOM = _Spec("day_of_month", 1, 31)
_MONTH = _Spec("month", 1, 12, _MONTH_NAMES, "a number or a month name (JAN-DEC)")
_DOW = _Spec("day_of_week", 0, 7, _DAY_NAMES, "a number or a day name (SUN-SAT)")


def _value(token: str, spec: _Spec) -> int:
    """One number or name of a field, range-checked."""
    if _DIGITS.fullmatch(token):
        number = int(token)
    elif spec.names is not None and token.upper() in spec.names:
        return spec.names[token.upper()]
    elif not token:
        raise CronError(spec.name, "empty value")
    else:
        raise CronError(spec.name, f"{token!r} is not {spec.what}")
    if not spec.lo <= number <= spec.hi:
        raise CronError(spec.name, f"{number} is out of range {spec.lo}-{spec.hi}")
    return number


def _parse_list(text: str, spec: _Spec) -> frozenset[int]:
    """The values of a plain field: ``*``, values, ranges, lists and steps."""
    values: set[int] = set()
    for item in text.split(","):
        base, slash, step_text = item.partition("/")
        step = 1
        if slash:
            if not _DIGITS.fullmatch(step_text):
                raise CronError(spec.name, f"step {step_text!r} is not a number")
            step = int(step_text)
            if not 1 <= step <= spec.hi:
                raise CronError(spec.name, f"step {step} is out of range 1-{spec.hi}")
        if base == "*":
            start, end = spec.lo, spec.hi
        elif "-" in base:
            first, _, last = base.partition("-")
            if not first or not last or "-" in last:
                raise CronError(spec.name, f"{item!r} is not a valid range")
            start, end = _value(first, spec), _value(last, spec)
            if spec is _DOW and end == 0 and start > 0:
                end = 7  # SAT-SUN, 5-0: Sunday as the end of a week range is 7
            if start > end:
                raise CronError(spec.name, f"range {base} is reversed (start is after end)")
        else:
            start = _value(base, spec)
            end = spec.hi if slash else start
        values.update(range(start, end + 1, step))
    return frozenset(values)


@dataclass(frozen=True)
class _DaySpec:
    """The two day fields, with Vixie's star rule."""

    dom: frozenset[int]
    dom_last: bool
    dom_last_weekday: bool
    dom_nearest: int  # nW day, 0 when unused
    dow: frozenset[int]  # 0-6, Sunday 0
    dow_nth: tuple[int, int] | None  # (weekday, n)
    dow_last: int  # weekday whose last occurrence matches, -1 when unused
    both_must_match: bool

    def days(self, ndays: int, first_weekday: int) -> tuple[int, ...]:
        """Matching days of a month with ``ndays`` days whose 1st is ``first_weekday``."""
        nearest = -1
        if self.dom_nearest and self.dom_nearest <= ndays:
            nearest = self.dom_nearest
            weekday = (first_weekday + nearest - 1) % 7
            if weekday == 6:  # Saturday: Friday before, or Monday after the 1st
                nearest = nearest - 1 if nearest > 1 else nearest + 2
            elif weekday == 0:  # Sunday: Monday after, or Friday before the last day
                nearest = nearest + 1 if nearest < ndays else nearest - 2
        last_weekday = -1
        if self.dom_last_weekday:
            weekday = (first_weekday + ndays - 1) % 7
            last_weekday = ndays - (2 if weekday == 0 else 1 if weekday == 6 else 0)
        matches: list[int] = []
        for day in range(1, ndays + 1):
            weekday = (first_weekday + day - 1) % 7
            dom_ok = (
                day in self.dom
                or (self.dom_last and day == ndays)
                or day in (nearest, last_weekday)
            )
            dow_ok = (
                weekday in self.dow
                or (
                    self.dow_nth is not None
                    and weekday == self.dow_nth[0]
                    and (day - 1) // 7 + 1 == self.dow_nth[1]
                )
                or (weekday == self.dow_last and day + 7 > ndays)
            )
            if (dom_ok and dow_ok) if self.both_must_match else (dom_ok or dow_ok):
                matches.append(day)
        return tuple(matches)


def _parse_dom(text: str) -> tuple[frozenset[int], bool, bool, int]:
    """(days, last, last weekday, nearest-weekday day) of a day_of_month field."""
    upper = text.upper()
    if upper == "?":
        return frozenset(range(1, 32)), False, False, 0
    if upper == "L":
        return frozenset(), True, False, 0
    if upper == "LW":
        return frozenset(), False, True, 0
    nearest = _NEAREST_WEEKDAY.fullmatch(upper)
    if nearest:
        return frozenset(), False, False, _value(nearest.group(1), _DOM)
    for item in upper.split(","):
        if item in ("?", "L", "LW") or _NEAREST_WEEKDAY.fullmatch(item):
            raise CronError("day_of_month", f"{item!r} must be the whole field, not a list item")
    return _parse_list(text, _DOM), False, False, 0


def _parse_dow(text: str) -> tuple[frozenset[int], tuple[int, int] | None, int]:
    """(weekdays 0-6, (weekday, n) for d#n, weekday for dL) of a day_of_week field."""
    upper = text.upper()
    if upper == "?":
        return frozenset(range(7)), None, -1
    nth = _NTH_WEEKDAY.fullmatch(upper)
    if nth:
        n = int(nth.group(2))
        if not 1 <= n <= 5:
            raise CronError("day_of_week", f"#{nth.group(2)} is out of range 1-5")
        return frozenset(), (_value(nth.group(1), _DOW) % 7, n), -1
    last = _LAST_WEEKDAY_OF.fullmatch(upper)
    if last:
        return frozenset(), None, _value(last.group(1), _DOW) % 7
    for item in upper.split(","):
        if item == "?" or _NTH_WEEKDAY.fullmatch(item) or _LAST_WEEKDAY_OF.fullmatch(item):
            raise CronError("day_of_week", f"{item!r} must be the whole field, not a list item")
    return frozenset(v % 7 for v in _parse_list(text, _DOW)), None, -1


def _for_descriptor(field: str) -> str:
    """A field as cron-descriptor reads it best: numbers without leading zeros."""
    return _DIGITS.sub(lambda m: str(int(m.group())), field)


def _descriptor_weekdays(dow: str) -> str:
    """A day_of_week list of single days as numbers 0-6, deduplicated (``SUN,7`` -> ``0``)."""
    items = dow.split(",")
    if len(items) < 2 or not all(_DIGITS.fullmatch(i) or i in _DAY_NAMES for i in items):
        return dow
    days = [str(_DAY_NAMES[i] if i in _DAY_NAMES else int(i) % 7) for i in items]
    return ",".join(dict.fromkeys(days))


def _join_names(names: list[str], conjunction: str) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {conjunction} {names[-1]}"


class CronSchedule:
    """A validated cron expression in an IANA time zone, resolving fire times across DST.

    Parses and validates once in the constructor; the object is immutable afterwards (its
    caches aside) and safe to share between threads. See the module docstring for the
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
        "_descriptor_fields",
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
        text = expression.strip()
        if not text:
            raise CronError("expression", "is empty")
        if len(text) > _MAX_EXPRESSION_LENGTH:
            raise CronError("expression", f"is longer than {_MAX_EXPRESSION_LENGTH} characters")
        if text.startswith("@"):
            macro = _MACROS.get(text.lower())
            if macro is None:
                raise CronError("expression", f"unknown or unsupported macro {text!r}")
            text = macro
        fields = text.split()
        if len(fields) not in (5, 6):
            raise CronError(
                "expression",
                f"expected 5 fields (minute hour day_of_month month day_of_week) or 6 with "
                f"seconds first, got {len(fields)}",
            )
        self.has_seconds = len(fields) == 6
        if not self.has_seconds:
            fields.insert(0, "0")
        second, minute, hour, dom, month, dow = fields
        for spec, value in zip(
            (_SECOND, _MINUTE, _HOUR, _MONTH), (second, minute, hour, month), strict=True
        ):
            if "?" in value:
                raise CronError(spec.name, "'?' is only allowed in day_of_month and day_of_week")
        self._seconds = tuple(sorted(_parse_list(second, _SECOND)))
        self._minutes = tuple(sorted(_parse_list(minute, _MINUTE)))
        self._hours = tuple(sorted(_parse_list(hour, _HOUR)))
        dom_days, dom_last, dom_last_weekday, dom_nearest = _parse_dom(dom)
        self._months = tuple(sorted(_parse_list(month, _MONTH)))
        dow_days, dow_nth, dow_last = _parse_dow(dow)
        dom, dow = dom.upper(), dow.upper()
        star = dom.startswith("*") or dom == "?" or dow.startswith("*") or dow == "?"
        self._days = _DaySpec(
            dom_days, dom_last, dom_last_weekday, dom_nearest, dow_days, dow_nth, dow_last, star
        )
        self._day_cache: dict[tuple[int, int], tuple[int, ...]] = {}
        self.is_fixed_time = not minute.startswith("*") and not hour.startswith("*")
        # A day field that allows every day says nothing: described as "*" (``0-7`` is not
        # "Sunday through Sunday"). Under the OR rule it makes every day match, so the
        # other day field says nothing either (``L * 0-6`` fires daily).
        every_weekday = dow_days == frozenset(range(7))
        every_monthday = dom_days == frozenset(range(1, 32))
        dom_says_nothing = dom in ("?", "*") or every_monthday or (every_weekday and not star)
        dow_says_nothing = dow in ("?", "*") or every_weekday or (every_monthday and not star)
        dom_text = "*" if dom_says_nothing else dom
        dow_text = "*" if dow_says_nothing else _descriptor_weekdays(dow)
        self._descriptor_fields = tuple(
            _for_descriptor(field)
            for field in (second, minute, hour, dom_text, month.upper(), dow_text)
        )
        self._check_can_fire(dom, dow)

    def __repr__(self) -> str:
        return f"CronSchedule({self.expression!r}, {self.timezone!r})"

    # -- validation ---------------------------------------------------------------------------

    def _check_can_fire(self, dom: str, dow: str) -> None:
        """Raise unless some month of the Gregorian cycle has a matching day.

        Which days match depends only on the month's length and the weekday of its 1st; every
        (month, weekday of the 1st) pair occurs, with February in leap and common years.
        """
        for month in self._months:
            lengths = (28, 29) if month == 2 else (_MAX_DAYS[month],)
            for ndays in lengths:
                for first_weekday in range(7):
                    if self._month_days(ndays, first_weekday):
                        return
        months = (
            "any month"
            if len(self._months) == 12
            else _join_names([_MONTH_TITLES[m] for m in self._months], "or")
        )
        spec = self._days
        plain = sorted(spec.dom | ({spec.dom_nearest} if spec.dom_nearest else set()))
        if spec.both_must_match and spec.dow == frozenset(range(7)) and plain:
            days = _join_names([str(d) for d in plain], "and")
            verb = "does" if len(plain) == 1 else "do"
            noun = "day" if len(plain) == 1 else "days"
            raise CronError(
                "day_of_month", f"can never fire ({noun} {days} {verb} not exist in {months})"
            )
        raise CronError(
            "day_of_month",
            f"can never fire (no day in {months} matches both day_of_month {dom!r} and "
            f"day_of_week {dow!r}; both must match when either starts with '*')",
        )

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
                ndays = _MAX_DAYS[month]
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
        return _describe(
            tuple(self._descriptor_fields),
            self.has_seconds,
            self._days.both_must_match,
            self.expression.strip(),
        )


@lru_cache(maxsize=1024)
def _describe(
    descriptor_fields: tuple[str, ...], has_seconds: bool, both_must_match: bool, expression: str
) -> str:
    """:meth:`CronSchedule.describe`, cached: cron-descriptor reloads its locale for every
    description, which cost more than the rest of creating a schedule."""
    second, minute, hour, dom, month, dow = descriptor_fields
    parts = [second if has_seconds else "0", minute, hour, dom, month, dow, "*"]
    try:
        descriptor = ExpressionDescriptor(" ".join(parts), Options())
        time = str(descriptor.get_description(DescriptionTypeEnum.TIMEOFDAY))
        dom_text = str(descriptor.get_description(DescriptionTypeEnum.DAYOFMONTH))
        month_text = str(descriptor.get_description(DescriptionTypeEnum.MONTH))
        dow_text = str(descriptor.get_description(DescriptionTypeEnum.DAYOFWEEK))
        if dow_text and both_must_match and dom != "*":
            dow_text = dow_text.replace(", or on ", ", only on ", 1)
        elif dow_text and not both_must_match:
            if dow_text.startswith(", only on "):
                dow_text = ", or on " + dow_text[len(", only on ") :]
            elif not dow_text.startswith(", or "):
                dow_text = ", or" + dow_text[1:]
        text = f"{time}{dom_text}{dow_text}{month_text}"
        text = str(descriptor.transform_verbosity(text, use_verbose_format=False))
    except Exception:  # a cron-descriptor gap must not break a schedule that validated
        return f"Cron expression {expression!r}"
    return text[:1].upper() + text[1:]
