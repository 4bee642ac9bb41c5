"""What a schedule's page says about its timing in words: catch-up, jitter, bounds, start
deadline, and its next fire times with the start each one's jitter gives."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from tickwork import jitter
from tickwork.console import format as fmt
from tickwork.console.schedule_values import jitter_mode, number_text
from tickwork.v1.schedule_pb2 import CatchUpPolicy, DescribeCronResponse, Schedule

#: The server's catch-up window when a schedule sets none, seconds.
DEFAULT_CATCH_UP_WINDOW_S = 5.0
#: RUN_ALL's cap when ``max_catch_up_runs`` is 0.
DEFAULT_MAX_CATCH_UP_RUNS = 100


def catch_up(schedule: Schedule) -> str:
    """``run all (windows up to 3600 s old, at most 100 runs)``; adds ``paused windows
    caught up on resume`` when ``catch_up_on_resume`` is set."""
    name = fmt.enum_name(
        schedule.catch_up_policy or CatchUpPolicy.CATCH_UP_POLICY_SKIP,
        CatchUpPolicy,
        "CATCH_UP_POLICY_",
    )
    window = (
        schedule.catch_up_window_seconds
        if schedule.HasField("catch_up_window_seconds")
        else DEFAULT_CATCH_UP_WINDOW_S
    )
    parts = [f"windows up to {number_text(window)} s old"]
    if name == "RUN_ALL":
        parts.append(f"at most {schedule.max_catch_up_runs or DEFAULT_MAX_CATCH_UP_RUNS} runs")
    words = f"{name.lower().replace('_', ' ')} ({', '.join(parts)})"
    if schedule.catch_up_on_resume:
        words += "; paused windows caught up on resume"
    return words


def jitter_words(schedule: Schedule) -> str:
    """``37.25 s after each fire time (stable)``, ``up to 30 s after each fire time
    (random)``, or ``none``."""
    return (
        jitter.jitter_text(schedule.name, schedule.jitter_seconds, jitter_mode(schedule)) or "none"
    )


def bounds(schedule: Schedule) -> str:
    """``from 2026-12-24 08:00:00 UTC until 2027-01-06 00:00:00 UTC`` (either part alone),
    or ``none``, in the schedule's zone."""
    zone = schedule.timezone or "UTC"
    parts = []
    if schedule.HasField("start_time"):
        parts.append(f"from {fmt.clock(schedule.start_time, zone)}")
    if schedule.HasField("end_time"):
        parts.append(f"until {fmt.clock(schedule.end_time, zone)} (exclusive)")
    return " ".join(parts) or "none"


def start_deadline(schedule: Schedule) -> str:
    """When the start_deadline notification goes out, or ``none``."""
    if schedule.start_deadline_seconds <= 0:
        return "none"
    return (
        f"notify when a fire's job has not started {number_text(schedule.start_deadline_seconds)}"
        " s after its fire time"
    )


@dataclass(frozen=True)
class PreviewRow:
    """One next fire time: UTC, local ISO 8601, DST note, and its start in words ("" when
    the schedule has no jitter)."""

    fire_time: dt.datetime
    local_time: str
    dst_note: str
    start: str


def preview_after(schedule: Schedule, now: dt.datetime) -> dt.datetime:
    """Where the preview of next fire times starts (exclusive): ``now``, or just before the
    schedule's start time when that is later."""
    start = fmt.when(schedule.start_time)
    if start is not None and start > now:
        return start - dt.timedelta(microseconds=1)
    return now


def preview_rows(schedule: Schedule, preview: DescribeCronResponse) -> list[PreviewRow]:
    """The next fire times before the schedule's end time, with their starts: STABLE jitter
    gives one start per fire time, RANDOM a range from the fire time to the fire time plus
    the jitter (exclusive)."""
    zone = schedule.timezone or "UTC"
    spread = schedule.jitter_seconds
    stable = jitter_mode(schedule) == "STABLE"
    end = fmt.when(schedule.end_time)
    rows = []
    for f in preview.fire_times:
        fire = f.fire_time.ToDatetime(tzinfo=dt.UTC)
        if end is not None and fire >= end:
            break
        start = ""
        if spread > 0 and stable:
            delay = jitter.stable_delay_s(schedule.name, spread)
            start = f"{fmt.clock(fire + dt.timedelta(seconds=delay), zone)} (+{delay:g} s)"
        elif spread > 0:
            latest = fire + dt.timedelta(seconds=spread)
            start = f"{fmt.clock(fire, zone)} to {fmt.clock(latest, zone)}"
        rows.append(PreviewRow(fire, f.local_time, f.dst_note, start))
    return rows
