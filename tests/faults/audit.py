"""The promises a fault must not break, checked afterwards from the database and from what
the jobs themselves recorded.

- **0 accepted jobs lost**: every job a test was given an id for is in the database, and it
  (or the last retry of its chain) ended: SUCCEEDED, FAILED, ABORTED or CANCELLED.
- **0 windows enqueued twice**: no (schedule, fire time) has two first attempts.
- **0 jobs stuck RUNNING**: no job is RUNNING once the test has let everything end.
- **0 overlaps of one task's jobs**: each job appends its own ``start``, a ``tick`` every
  0.2 s and ``end`` lines with the wall-clock time to a record file (:func:`recording_job`);
  a job's span runs from its start to its last line (a killed job writes no ``end``: its
  last tick is within 0.2 s of its death), and no two spans of one task intersect.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.databases import run_sql

TERMINAL = {"SUCCEEDED", "FAILED", "ABORTED", "CANCELLED"}
TICK_S = 0.2

_SCRIPT = (
    'rec=$0; n=$1; [ "$TICKWORK_ATTEMPT" = 1 ] || n=$2; '
    'say() { echo "$1 $TICKWORK_TASK $TICKWORK_JOB_ID $(date +%s.%N)" >> "$rec"; }; '
    "say start; i=0; "
    'while [ "$i" -lt "$n" ]; do sleep 0.2; say tick; i=$((i + 1)); done; '
    "say end"
)


def recording_job(
    record: Path, seconds: float, retry_seconds: float | None = None
) -> dict[str, Any]:
    """``shell`` params of a job that records itself in ``record`` (see the module
    docstring) while it runs about ``seconds`` (its first attempt) or ``retry_seconds``
    (a retry; default ``seconds``)."""
    ticks = max(0, round(seconds / TICK_S))
    retry_ticks = ticks if retry_seconds is None else max(0, round(retry_seconds / TICK_S))
    return {"argv": ["sh", "-c", _SCRIPT, str(record), str(ticks), str(retry_ticks)]}


@dataclass(frozen=True)
class Span:
    """One job's run as the job recorded it (epoch seconds)."""

    task: str
    job_id: int
    start: float
    last: float
    ended: bool


def spans(record: Path) -> list[Span]:
    """Every job's span in ``record``, by start time."""
    seen: dict[int, list[Any]] = {}
    if not record.exists():
        return []
    for line in record.read_text().splitlines():
        parts = line.split()
        if len(parts) != 4:
            continue
        event, task, job_id, when = parts[0], parts[1], int(parts[2]), float(parts[3])
        span = seen.setdefault(job_id, [task, when, when, False])
        span[2] = max(span[2], when)
        span[3] = span[3] or event == "end"
    found = [Span(t, job_id, s, last, e) for job_id, (t, s, last, e) in seen.items()]
    return sorted(found, key=lambda s: s.start)


def overlaps(found: Iterable[Span]) -> list[tuple[Span, Span]]:
    """The pairs of spans of one task that intersect."""
    by_task: dict[str, list[Span]] = {}
    for span in found:
        by_task.setdefault(span.task, []).append(span)
    out = []
    for task_spans in by_task.values():
        for a, b in itertools.combinations(sorted(task_spans, key=lambda s: s.start), 2):
            if b.start <= a.last:
                out.append((a, b))
    return out


@dataclass(frozen=True)
class Audit:
    """What broke a promise; every list empty when none did."""

    lost: list[int]
    enqueued_twice: list[tuple[Any, ...]]
    stuck_running: list[int]
    overlapping: list[tuple[Span, Span]]

    def assert_kept(self) -> None:
        """Fail naming every broken promise."""
        assert (self.lost, self.enqueued_twice, self.stuck_running, self.overlapping) == (
            [],
            [],
            [],
            [],
        ), self


def audit(database_url: str, record: Path, accepted: Iterable[int]) -> Audit:
    """Check the four promises for the jobs ``accepted`` (ids a run or fire answered)."""
    rows = run_sql(database_url, "SELECT id, status, retry_of_job_id FROM jobs")
    status = {int(r[0]): str(r[1]) for r in rows}
    retry_of = {int(r[2]): int(r[0]) for r in rows if r[2] is not None}
    lost = []
    for job_id in accepted:
        last = job_id
        while last in retry_of:
            last = retry_of[last]
        if status.get(last) not in TERMINAL:
            lost.append(job_id)
    twice = run_sql(
        database_url,
        "SELECT schedule_id, fire_time, COUNT(*) FROM jobs "
        "WHERE schedule_id IS NOT NULL AND retry_of_job_id IS NULL "
        "GROUP BY schedule_id, fire_time HAVING COUNT(*) > 1",
    )
    stuck = sorted(job_id for job_id, s in status.items() if s == "RUNNING")
    return Audit(lost, twice, stuck, overlaps(spans(record)))


def utc(value: object) -> dt.datetime:
    """A timestamp column as an aware UTC datetime (SQLite gives text or naive values)."""
    when = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value))
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)
