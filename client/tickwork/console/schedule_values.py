"""The schedule form's values: a schedule's fields as the form shows them, a posted form
read back, and the SDK keywords (``create_schedule`` / ``update_schedule``) they make.

The form sends every field on each save: an empty catch-up window is the server's default
(5 s), an empty start or end time no bound, an empty jitter or start deadline 0. A value the
console cannot read (not a number, not a time, a label line without ``=``) is refused here
with a message naming the field; a value it can read goes to the server, which refuses a
bad one (a jitter over a day, an end before the start) with a message naming the field.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp
from starlette.datastructures import FormData

from tickwork._requests import signed_range
from tickwork.console import format as fmt
from tickwork.errors import InvalidArgument
from tickwork.v1.schedule_pb2 import CatchUpPolicy, JitterMode, OverlapPolicy, Schedule

#: The form's text fields and their value for a new schedule.
_TEXT_DEFAULTS = {
    "name": "",
    "description": "",
    "cron": "",
    "interval_seconds": "",
    "timezone": "UTC",
    "catch_up_policy": "SKIP",
    "overlap_policy": "SKIP",
    "max_buffered": "0",
    "catch_up_window_seconds": "",
    "max_catch_up_runs": "0",
    "jitter_seconds": "0",
    "jitter_mode": "RANDOM",
    "start_time": "",
    "end_time": "",
    "labels": "",
    "start_deadline_seconds": "0",
}


def number_text(value: float) -> str:
    """A number of seconds as the form shows it: ``30``, ``2.5``."""
    return f"{value:g}"


def time_text(value: Timestamp) -> str:
    """A Timestamp as the form's UTC time field shows it, ``2026-12-24T08:00:00``; "" unset."""
    moment = fmt.when(value)
    return "" if moment is None else moment.strftime("%Y-%m-%dT%H:%M:%S")


def labels_text(labels: Mapping[str, str]) -> str:
    """Labels as ``key=value`` lines, sorted by key."""
    return "\n".join(f"{k}={v}" for k, v in sorted(labels.items()))


def values_of(schedule: Schedule | None) -> dict[str, Any]:
    """The form's values for ``schedule`` (None: a new schedule's defaults)."""
    if schedule is None:
        return {**_TEXT_DEFAULTS, "enabled": True, "catch_up_on_resume": False, "tasks": set()}
    return {
        "name": schedule.name,
        "description": schedule.description,
        "cron": schedule.cron_expression,
        "interval_seconds": str(schedule.interval_seconds or ""),
        "timezone": schedule.timezone or "UTC",
        "catch_up_policy": fmt.enum_name(
            schedule.catch_up_policy or CatchUpPolicy.CATCH_UP_POLICY_SKIP,
            CatchUpPolicy,
            "CATCH_UP_POLICY_",
        ),
        "overlap_policy": fmt.enum_name(
            schedule.overlap_policy or OverlapPolicy.OVERLAP_POLICY_SKIP,
            OverlapPolicy,
            "OVERLAP_POLICY_",
        ),
        "max_buffered": str(schedule.max_buffered),
        "catch_up_window_seconds": (
            number_text(schedule.catch_up_window_seconds)
            if schedule.HasField("catch_up_window_seconds")
            else ""
        ),
        "max_catch_up_runs": str(schedule.max_catch_up_runs),
        "jitter_seconds": number_text(schedule.jitter_seconds),
        "jitter_mode": jitter_mode(schedule),
        "start_time": time_text(schedule.start_time),
        "end_time": time_text(schedule.end_time),
        "labels": labels_text(schedule.labels),
        "start_deadline_seconds": number_text(schedule.start_deadline_seconds),
        "enabled": schedule.enabled,
        "catch_up_on_resume": schedule.catch_up_on_resume,
        "tasks": set(schedule.task_ids),
    }


def jitter_mode(schedule: Schedule) -> str:
    """``RANDOM`` or ``STABLE`` (unspecified is RANDOM)."""
    return fmt.enum_name(
        schedule.jitter_mode or JitterMode.JITTER_MODE_RANDOM, JitterMode, "JITTER_MODE_"
    )


def values_posted(form: FormData) -> dict[str, Any]:
    """The posted form's values (text fields stripped, except the description and labels);
    an empty or absent field has a new schedule's value."""
    values: dict[str, Any] = {}
    for key, default in _TEXT_DEFAULTS.items():
        raw = form.get(key)
        text = raw if isinstance(raw, str) else ""
        values[key] = (text if key in ("description", "labels") else text.strip()) or default
    values["enabled"] = form.get("enabled") == "on"
    values["catch_up_on_resume"] = form.get("catch_up_on_resume") == "on"
    posted = [v.strip() for v in form.getlist("tasks") if isinstance(v, str)]
    readable = [v for v in posted if v.isascii() and v.isdigit() and len(v) < 19]
    values["tasks"] = {int(v) for v in readable}
    # Kept for keywords() to refuse by name (the form's checkboxes only post task ids).
    values["unreadable_tasks"] = [v for v in posted if v not in readable]
    return values


def parse_seconds(raw: str, field: str, default: float | None) -> float | None:
    """A number of seconds typed in a form field; ``default`` when empty.

    Raises:
        InvalidArgument: not a finite number (naming ``field``).
    """
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise InvalidArgument(f"{field}: give a number of seconds, got {raw!r:.40}")
    return value


def parse_count(raw: str, field: str, bits: int = 32) -> int:
    """A whole number typed in a form field, for an API field of signed ``bits`` bits
    (int32, int64); 0 when empty. The API checks the range the field allows.

    Raises:
        InvalidArgument: not a whole number, or beyond what the field's type holds (naming
            ``field``).
    """
    if not raw:
        return 0
    digits = raw.removeprefix("-")
    if not (digits.isascii() and digits.isdigit()):
        raise InvalidArgument(f"{field}: give a whole number, got {raw!r:.40}")
    low, high = signed_range(bits)
    if len(digits) > 20 or not low <= int(raw) <= high:
        raise InvalidArgument(f"{field}: must be between {low} and {high}, got {raw:.40}")
    return int(raw)


def parse_time(raw: str, field: str) -> dt.datetime | None:
    """A time typed in a form field, ISO 8601 (``2026-12-24T08:00``); read in UTC unless it
    carries an offset. None when empty.

    Raises:
        InvalidArgument: not such a time (naming ``field``).
    """
    if not raw:
        return None
    try:
        moment = dt.datetime.fromisoformat(raw)
    except ValueError:
        raise InvalidArgument(
            f"{field}: give a time like 2026-12-24T08:00 (UTC), got {raw!r:.40}"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)


def parse_labels(raw: str) -> dict[str, str]:
    """``key=value`` lines (blank lines ignored) as labels; the server checks keys and values.

    Raises:
        InvalidArgument: a line without ``=``, or a key given twice (naming ``labels``).
    """
    labels: dict[str, str] = {}
    for number, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InvalidArgument(f"labels: line {number}: give key=value, got {line!r:.60}")
        if key in labels:
            raise InvalidArgument(f"labels: line {number}: {key!r:.60} is given twice")
        labels[key] = value.strip()
    return labels


def keywords(values: dict[str, Any]) -> dict[str, Any]:
    """The SDK keywords of every field of the form except ``name`` and ``tasks`` (whose
    unreadable entries, kept by :func:`values_posted`, are refused here).

    Raises:
        InvalidArgument: a value the console cannot read (naming the field).
    """
    if values.get("unreadable_tasks"):
        raise InvalidArgument(f"tasks: give task ids, got {values['unreadable_tasks'][0]!r:.40}")
    timing: dict[str, Any]
    if values["cron"]:
        timing = {"cron": values["cron"]}
    else:
        timing = {
            "interval_seconds": parse_count(values["interval_seconds"], "interval_seconds", 64)
        }
    return {
        **timing,
        "description": values["description"],
        "timezone": values["timezone"],
        "catch_up_policy": values["catch_up_policy"],
        "enabled": values["enabled"],
        "overlap_policy": values["overlap_policy"],
        "max_buffered": parse_count(values["max_buffered"], "max_buffered"),
        "catch_up_window_seconds": parse_seconds(
            values["catch_up_window_seconds"], "catch_up_window_seconds", None
        ),
        "max_catch_up_runs": parse_count(values["max_catch_up_runs"], "max_catch_up_runs"),
        "jitter_seconds": parse_seconds(values["jitter_seconds"], "jitter_seconds", 0.0),
        "jitter_mode": values["jitter_mode"] or "RANDOM",
        "start_time": parse_time(values["start_time"], "start_time"),
        "end_time": parse_time(values["end_time"], "end_time"),
        "labels": parse_labels(values["labels"]),
        "catch_up_on_resume": values["catch_up_on_resume"],
        "start_deadline_seconds": parse_seconds(
            values["start_deadline_seconds"], "start_deadline_seconds", 0.0
        ),
    }
