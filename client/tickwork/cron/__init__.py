"""Cron expressions: parse, validate, describe, and resolve fire times in an IANA time zone
across DST.

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

from tickwork.cron._parse import CronError, validate_timezone
from tickwork.cron._resolve import DST_NOTE_TEXT, CronSchedule, DstNote, FirePreview

__all__ = [
    "DST_NOTE_TEXT",
    "CronError",
    "CronSchedule",
    "DstNote",
    "FirePreview",
    "validate_timezone",
]
