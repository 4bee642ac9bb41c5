"""How the console writes times, durations, states and stored text (Jinja filters).

Stored text (names, descriptions, errors, job output) goes through :func:`text`: control
characters such as ANSI escapes become visible ``\\x1b`` escapes, and Jinja's autoescape
then makes ``<script>`` plain text.
"""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from google.protobuf.timestamp_pb2 import Timestamp

from tickwork._text import escape_controls
from tickwork.v1.common_pb2 import Trigger
from tickwork.v1.job_pb2 import JobStatus
from tickwork.v1.schedule_pb2 import FireOutcome
from tickwork.v1.system_pb2 import QueueLane

UTC = dt.UTC


def when(value: Timestamp | None) -> dt.datetime | None:
    """An aware UTC datetime, or None for an unset Timestamp."""
    if value is None or (value.seconds == 0 and value.nanos == 0):
        return None
    return value.ToDatetime(tzinfo=UTC)


def zone(name: str) -> dt.tzinfo:
    """The IANA zone ``name``; UTC when unknown."""
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return UTC


def clock(value: Timestamp | dt.datetime | None, zone_name: str = "UTC") -> str:
    """``2026-03-29 03:00:00 CEST``, in ``zone_name``; "—" when unset."""
    moment = value if isinstance(value, dt.datetime) else when(value)
    if moment is None:
        return "—"
    local = moment.astimezone(zone(zone_name))
    return local.strftime("%Y-%m-%d %H:%M:%S ") + (local.tzname() or zone_name)


def iso(value: Timestamp | dt.datetime | None) -> str:
    """ISO 8601 UTC (for ``<time datetime>``); "" when unset."""
    moment = value if isinstance(value, dt.datetime) else when(value)
    return "" if moment is None else moment.astimezone(UTC).isoformat()


def seconds(value: float | None) -> str:
    """A duration: ``0.4 s``, ``42 s``, ``3 min 5 s``, ``2 h 10 min``; "—" for None."""
    if value is None:
        return "—"
    if value < 10:
        return f"{value:.1f} s"
    total = round(value)
    if total < 60:
        return f"{total} s"
    if total < 3600:
        return f"{total // 60} min {total % 60} s"
    return f"{total // 3600} h {total % 3600 // 60} min"


def elapsed(start: Timestamp | None, end: Timestamp | dt.datetime | None) -> float | None:
    """Seconds from ``start`` to ``end`` (a Timestamp or datetime); None if either is unset."""
    begin = when(start)
    finish = end if isinstance(end, dt.datetime) else when(end)
    if begin is None or finish is None:
        return None
    return max(0.0, (finish - begin).total_seconds())


def trigger(value: int) -> str:
    """``manual``, ``api`` or ``scheduler`` for a Trigger value."""
    return str(Trigger.Name(value)).removeprefix("TRIGGER_").lower()


def age(value: Timestamp | None, now: Timestamp | dt.datetime) -> str:
    """How long ago ``value`` was, as :func:`seconds` writes it; "—" when unset."""
    return seconds(elapsed(value, now))


def queue_lane(value: int) -> str:
    """``manual``, ``scheduler`` or ``backfill`` for a QueueLane value."""
    return str(QueueLane.Name(value)).removeprefix("QUEUE_LANE_").lower()


def job_status(value: int) -> str:
    """``QUEUED``, ``RUNNING``, ... for a JobStatus value."""
    return JobStatus.Name(value).removeprefix("JOB_STATUS_")


def fire_outcome(value: int) -> str:
    """``ENQUEUED``, ``SKIPPED``, ``MISSED``, ``BUFFERED`` or ``REPLACED`` for a FireOutcome
    value."""
    return FireOutcome.Name(value).removeprefix("FIRE_OUTCOME_")


def enum_name(value: int, enum: Any, prefix: str) -> str:
    """The name of an enum value without its prefix, e.g. ``ALREADY_RUNNING``."""
    return str(enum.Name(value)).removeprefix(prefix)


def text(value: object) -> str:
    """Stored text with control and format characters made visible (see the module)."""
    return escape_controls(str(value))


def last_line(value: str) -> str:
    """The last non-empty line of ``value`` (a job's live output line)."""
    for line in reversed(value.splitlines()):
        if line.strip():
            return line
    return ""


FILTERS = {
    "clock": clock,
    "iso": iso,
    "seconds": seconds,
    "age": age,
    "trigger": trigger,
    "queue_lane": queue_lane,
    "job_status": job_status,
    "fire_outcome": fire_outcome,
    "text": text,
    "last_line": last_line,
}
