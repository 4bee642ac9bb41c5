"""Parse and validate a cron expression into its fields (the dialect: see :mod:`tickwork.cron`).

Pure: no I/O besides the tz database reads of :mod:`zoneinfo`, no clock. Every error is a
:class:`CronError` whose message names the field at fault.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

__all__ = ["CronError", "CronFields", "DaySpec", "parse_expression", "validate_timezone"]

#: Longest accepted expression, characters; keeps parsing bounded.
MAX_EXPRESSION_LENGTH = 512

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
DAY_NAMES = {
    name: number for number, name in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))
}
"""Day names and their day_of_week numbers, Sunday 0."""
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
MAX_DAYS = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
"""The most days each month (1-12) can have."""
DIGITS = re.compile(r"[0-9]+", re.ASCII)
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


_MAX_ZONE_CHARS = 64
"""Longer than any IANA zone name (the longest are about 30 characters): refused without
being looked up or echoed whole."""


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
    if isinstance(name, str) and len(name) > _MAX_ZONE_CHARS:
        raise CronError(
            "timezone",
            f"{name[:_MAX_ZONE_CHARS]!r}... ({len(name)} characters) is not an IANA time zone name",
        )
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
_DOW = _Spec("day_of_week", 0, 7, DAY_NAMES, "a number or a day name (SUN-SAT)")


def _value(token: str, spec: _Spec) -> int:
    """One number or name of a field, range-checked."""
    if DIGITS.fullmatch(token):
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
            if not DIGITS.fullmatch(step_text):
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
class DaySpec:
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


def _join_names(names: list[str], conjunction: str) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {conjunction} {names[-1]}"


@dataclass(frozen=True)
class CronFields:
    """A validated expression, field by field.

    Attributes:
        seconds, minutes, hours, months: The values each field allows, ascending (a
            5-field expression has ``seconds == (0,)``).
        days: The two day fields and how they combine.
        has_seconds: True for a 6-field (seconds-first) expression.
        is_fixed_time: True when neither the minute nor the hour field starts with ``*``.
        texts: The six fields as written, macros expanded, seconds first (``"0"`` for a
            5-field expression), the day fields upper-cased.
    """

    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    months: tuple[int, ...]
    days: DaySpec
    has_seconds: bool
    is_fixed_time: bool
    texts: tuple[str, str, str, str, str, str]


def parse_expression(expression: str) -> CronFields:
    """Parse and validate ``expression`` (5 fields, 6 with seconds first, or a macro).

    Raises:
        CronError: naming the field at fault: wrong field count, out-of-range value, zero or
            oversized step, unknown name or macro, malformed range or extra, or an
            expression that can never fire (``field == "day_of_month"``).
    """
    if not isinstance(expression, str):
        raise CronError("expression", "must be a string")
    text = expression.strip()
    if not text:
        raise CronError("expression", "is empty")
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise CronError("expression", f"is longer than {MAX_EXPRESSION_LENGTH} characters")
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
    has_seconds = len(fields) == 6
    if not has_seconds:
        fields.insert(0, "0")
    second, minute, hour, dom, month, dow = fields
    for spec, value in zip(
        (_SECOND, _MINUTE, _HOUR, _MONTH), (second, minute, hour, month), strict=True
    ):
        if "?" in value:
            raise CronError(spec.name, "'?' is only allowed in day_of_month and day_of_week")
    seconds = tuple(sorted(_parse_list(second, _SECOND)))
    minutes = tuple(sorted(_parse_list(minute, _MINUTE)))
    hours = tuple(sorted(_parse_list(hour, _HOUR)))
    dom_days, dom_last, dom_last_weekday, dom_nearest = _parse_dom(dom)
    months = tuple(sorted(_parse_list(month, _MONTH)))
    dow_days, dow_nth, dow_last = _parse_dow(dow)
    dom, dow = dom.upper(), dow.upper()
    star = dom.startswith("*") or dom == "?" or dow.startswith("*") or dow == "?"
    days = DaySpec(
        dom_days, dom_last, dom_last_weekday, dom_nearest, dow_days, dow_nth, dow_last, star
    )
    _check_can_fire(months, days, dom, dow)
    return CronFields(
        seconds=seconds,
        minutes=minutes,
        hours=hours,
        months=months,
        days=days,
        has_seconds=has_seconds,
        is_fixed_time=not minute.startswith("*") and not hour.startswith("*"),
        texts=(second, minute, hour, dom, month, dow),
    )


def _check_can_fire(months: tuple[int, ...], spec: DaySpec, dom: str, dow: str) -> None:
    """Raise unless some month of the Gregorian cycle has a matching day.

    Which days match depends only on the month's length and the weekday of its 1st; every
    (month, weekday of the 1st) pair occurs, with February in leap and common years.
    """
    for month in months:
        lengths = (28, 29) if month == 2 else (MAX_DAYS[month],)
        for ndays in lengths:
            for first_weekday in range(7):
                if spec.days(ndays, first_weekday):
                    return
    named = (
        "any month" if len(months) == 12 else _join_names([_MONTH_TITLES[m] for m in months], "or")
    )
    plain = sorted(spec.dom | ({spec.dom_nearest} if spec.dom_nearest else set()))
    if spec.both_must_match and spec.dow == frozenset(range(7)) and plain:
        days = _join_names([str(d) for d in plain], "and")
        verb = "does" if len(plain) == 1 else "do"
        noun = "day" if len(plain) == 1 else "days"
        raise CronError(
            "day_of_month", f"can never fire ({noun} {days} {verb} not exist in {named})"
        )
    raise CronError(
        "day_of_month",
        f"can never fire (no day in {named} matches both day_of_month {dom!r} and "
        f"day_of_week {dow!r}; both must match when either starts with '*')",
    )
