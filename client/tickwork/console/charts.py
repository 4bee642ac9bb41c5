"""The pictures, as numbers for the SVG templates: a schedule's last 24 hours of fires
coloured by outcome, and a task's job durations over time. No drawing code runs in the
browser; the templates turn these shapes into ``<rect>`` elements."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from tickwork.console import format as fmt
from tickwork.v1.job_pb2 import Job
from tickwork.v1.schedule_pb2 import Fire

#: The drawing area of both pictures, in SVG user units.
WIDTH, HEIGHT = 720.0, 120.0


@dataclass(frozen=True)
class Mark:
    """One rectangle: its box, CSS class (the outcome or status), tooltip and link."""

    x: float
    y: float
    width: float
    height: float
    css: str
    title: str
    href: str


@dataclass(frozen=True)
class Picture:
    """A picture's marks and its axis labels (x position, text)."""

    marks: list[Mark]
    labels: list[tuple[float, str]]
    caption: str
    width: float = WIDTH
    height: float = HEIGHT


def fire_strip(fires: Sequence[Fire], now: dt.datetime, zone_name: str) -> Picture:
    """The last 24 hours of ``fires`` as ticks on a time line ending at ``now``; hours
    labelled in ``zone_name``."""
    start = now - dt.timedelta(hours=24)
    span = 24 * 3600.0
    marks = []
    for fire in fires:
        at = fmt.when(fire.fire_time)
        if at is None or not start <= at <= now:
            continue
        outcome = fmt.fire_outcome(fire.outcome).lower()
        x = (at - start).total_seconds() / span * (WIDTH - 4)
        jobs = [r.job_id for r in fire.runs if r.job_id]
        marks.append(
            Mark(
                x=round(x, 1),
                y=10.0,
                width=4.0,
                height=HEIGHT - 40,
                css=f"fire-{outcome}",
                title=f"{fmt.clock(at, zone_name)}: {outcome}",
                href=f"/jobs/{jobs[0]}" if jobs else "",
            )
        )
    labels = []
    zone = fmt.zone(zone_name)
    first_hour = start.astimezone(zone).replace(minute=0, second=0, microsecond=0)
    for step in range(0, 25, 3):
        tick = (first_hour + dt.timedelta(hours=step)).astimezone(dt.UTC)
        if start <= tick <= now:
            x = (tick - start).total_seconds() / span * WIDTH
            labels.append((round(x, 1), tick.astimezone(zone).strftime("%H:%M")))
    caption = f"{len(marks)} fire{'s' if len(marks) != 1 else ''} in the last 24 hours"
    return Picture(marks, labels, caption)


def durations(jobs: Sequence[Job]) -> Picture:
    """Finished jobs' run times as bars, oldest left; the tallest bar is the longest run."""
    ended = [
        (j, d)
        for j in sorted(jobs, key=lambda j: j.id)
        if (d := fmt.elapsed(j.start_time, j.finish_time)) is not None
    ]
    if not ended:
        return Picture([], [], "no finished jobs yet")
    longest = max(d for _, d in ended) or 1.0
    slot = WIDTH / max(len(ended), 1)
    marks = []
    for i, (job, seconds) in enumerate(ended):
        height = max(2.0, seconds / longest * (HEIGHT - 30))
        status = fmt.job_status(job.status).lower()
        marks.append(
            Mark(
                x=round(i * slot + slot * 0.1, 1),
                y=round(HEIGHT - 20 - height, 1),
                width=round(max(1.0, slot * 0.8), 1),
                height=round(height, 1),
                css=f"job-{status}",
                title=f"job {job.id}: {status}, {fmt.seconds(seconds)}",
                href=f"/jobs/{job.id}",
            )
        )
    labels = [(0.0, f"job {ended[0][0].id}"), (WIDTH - 80, f"job {ended[-1][0].id}")]
    caption = f"{len(ended)} finished jobs; longest {fmt.seconds(longest)}"
    return Picture(marks, labels, caption)
