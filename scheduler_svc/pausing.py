"""Pauses of schedules and disables of tasks, with a note: the columns each one writes, and
when a resumed schedule runs next.

Pure functions over records and instants; no I/O, no clock. A pause (PauseSchedule, or
``enabled`` set false) keeps why (``pause_note``), until when (``paused_until``: it resumes
by itself then), who (the caller's token label) and since when; a resume clears them all.
The paused windows are not fired on resume unless the schedule's ``catch_up_on_resume`` is
set: then the next run is computed from when it was paused, and the windows since then go
through its catch-up policy as after downtime. A task's disable works the same way.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from scheduler_svc import validation
from scheduler_svc.errors import InvalidArgument
from scheduler_svc.firing import first_fire_after
from scheduler_svc.records import ScheduleRecord

#: The longest note of a pause or a disable, in characters.
MAX_NOTE_CHARS = 4000

#: Who disables a task after consecutive failures (Task.disabled_by).
SERVICE = "tickwork"

#: A schedule's pause fields as a resume leaves them.
RESUMED: dict[str, Any] = {
    "enabled": True,
    "pause_note": "",
    "paused_until": None,
    "paused_by": "",
    "paused_at": None,
}

#: A task's disable fields as an enable leaves them (with its failure count cleared).
ENABLED: dict[str, Any] = {
    "enabled": True,
    "disable_note": "",
    "disabled_until": None,
    "disabled_by": "",
    "disabled_at": None,
    "consecutive_failure_count": 0,
    "disabled_reason": "",
}


def note(text: str, field: str = "note") -> str:
    """A pause's or a disable's note: at most :data:`MAX_NOTE_CHARS` characters, no NUL.

    Raises:
        InvalidArgument: naming ``field``.
    """
    if len(text) > MAX_NOTE_CHARS:
        raise InvalidArgument(f"is {len(text)} characters; at most {MAX_NOTE_CHARS}", field=field)
    return validation.free_text(text, field)


def until(when: dt.datetime, now: dt.datetime, field: str) -> dt.datetime:
    """When a pause or a disable ends by itself (aware UTC): after ``now``, at most ten
    years (:data:`validation.MAX_SECONDS`) ahead.

    Raises:
        InvalidArgument: naming ``field``.
    """
    if when <= now:
        raise InvalidArgument(f"must be in the future (now is {now.isoformat()})", field=field)
    if when - now > dt.timedelta(seconds=validation.MAX_SECONDS):
        raise InvalidArgument(
            f"is more than ten years ({validation.MAX_SECONDS} seconds) ahead", field=field
        )
    return when


def pause_columns(
    by: str, now: dt.datetime, text: str = "", resume_at: dt.datetime | None = None
) -> dict[str, Any]:
    """The columns of a schedule paused by ``by`` at ``now``: its next run cleared."""
    return {
        "enabled": False,
        "next_run_at": None,
        "pause_note": text,
        "paused_until": resume_at,
        "paused_by": by,
        "paused_at": now,
    }


def resume_columns(
    current: ScheduleRecord, now: dt.datetime, *, automatic: bool = False
) -> dict[str, Any]:
    """The columns of ``current`` resumed at ``now``: enabled, the pause fields cleared, and
    its next run.

    The next run is the first fire after ``now`` (a manual resume) or, when ``automatic``
    (the pause's ``paused_until`` came), from ``paused_until`` (a cron schedule: just
    before, so a window at that instant fires), so a late tick treats the windows since then
    as downtime. With
    ``catch_up_on_resume`` it is computed from when the schedule was paused instead: the
    windows since then are due and go through the catch-up policy.
    """
    resumed = dataclasses.replace(current, enabled=True)
    since = now
    if current.catch_up_on_resume and current.paused_at is not None:
        since = current.paused_at
    elif automatic and current.paused_until is not None:
        since = current.paused_until
        if current.cron_expression:  # a cron window at that very instant fires
            since -= dt.timedelta(microseconds=1)
    return {**RESUMED, "next_run_at": first_fire_after(resumed, since)}


def disable_columns(
    by: str, now: dt.datetime, text: str = "", enable_at: dt.datetime | None = None
) -> dict[str, Any]:
    """The columns of a task disabled by ``by`` at ``now``."""
    return {
        "enabled": False,
        "disable_note": text,
        "disabled_until": enable_at,
        "disabled_by": by,
        "disabled_at": now,
    }
