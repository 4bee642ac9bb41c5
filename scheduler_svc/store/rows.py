"""Rows as records and records as rows: the conversions every part of the store shares,
and the text rules of what a job stores (output tail, error)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import fields
from typing import Any, NamedTuple

import sqlalchemy as sa

from scheduler_svc.records import FireRecord, JobRecord, ScheduleRecord, TaskRecord, TaskRunResult
from scheduler_svc.values import FireOutcome, JobStatus, Lane, Trigger
from tickwork.limits import OUTPUT_TAIL_CHARS as OUTPUT_TAIL_CHARS

ERROR_CHARS = 8192
"""The longest job error kept, in characters: its first and last 4096, the middle cut."""
ABORTED_BY_OPERATOR = "aborted by operator"
"""The error of a job a person stopped (AbortTasks), unless its worker gave another."""

TASK_FIELDS = [f.name for f in fields(TaskRecord)]
JOB_FIELDS = [f.name for f in fields(JobRecord)]
SCHEDULE_COLUMNS = [
    f.name for f in fields(ScheduleRecord) if f.name not in ("task_ids", "task_names")
]

Row = sa.Row[Any] | Mapping[str, Any]


def _mapping(row: Row) -> Mapping[Any, Any]:
    return row._mapping if isinstance(row, sa.Row) else row


def task(row: Row) -> TaskRecord:
    """A row of ``tasks`` (or a mapping with its column names) as a record."""
    m = _mapping(row)
    return TaskRecord(**{k: m[k] for k in TASK_FIELDS})


def job(row: Row) -> JobRecord:
    """A row of ``jobs`` (or a mapping with its column names) as a record."""
    m = _mapping(row)
    return JobRecord(**{k: m[k] for k in JOB_FIELDS})


def prefixed_task(row: Mapping[str, Any], prefix: str = "task__") -> TaskRecord:
    """The task in the columns ``<prefix><name>`` of a statement's row."""
    return task({name: row[f"{prefix}{name}"] for name in TASK_FIELDS})


def prefixed_job(row: Mapping[str, Any], prefix: str) -> JobRecord:
    """The job in the columns ``<prefix><name>`` of a statement's row."""
    return job({name: row[f"{prefix}{name}"] for name in JOB_FIELDS})


def fire(row: sa.Row[Any]) -> FireRecord:
    """A row of ``fires`` as a record, its ``runs`` JSON decoded."""
    m = row._mapping
    return FireRecord(
        id=m["id"],
        schedule_id=m["schedule_id"],
        fire_time=m["fire_time"],
        outcome=FireOutcome(m["outcome"]),
        runs=tuple(TaskRunResult.from_json(r) for r in m["runs"]),
        recorded_at=m["recorded_at"],
        start_at=m["start_at"],
        trigger=m["trigger"],
    )


def schedule(row: Row, links: list[tuple[int, str]]) -> ScheduleRecord:
    """A row of ``schedules`` with its (task id, task name) links in position order."""
    m = _mapping(row)
    return ScheduleRecord(
        **{k: m[k] for k in SCHEDULE_COLUMNS},
        task_ids=tuple(p[0] for p in links),
        task_names=tuple(p[1] for p in links),
    )


class FiringTask(NamedTuple):
    """What recording a fire reads of a task: not its params, whose decoding costs a tenth
    of the time to record 10,000 fires."""

    id: int
    name: str
    enabled: bool
    task_priority: int


class FinishingTask(NamedTuple):
    """What recording a job's outcome reads of its task (not its params or description)."""

    id: int
    name: str
    task_priority: int
    enabled: bool
    consecutive_failure_count: int
    max_attempts: int
    backoff_base_seconds: float
    backoff_cap_seconds: float
    failing_since: dt.datetime | None
    overdue_since: dt.datetime | None


def finished(row: Row) -> tuple[JobRecord, FinishingTask | None]:
    """The job and its task (None when the task is gone) from a row of a statement that
    returns the job's columns and its task's as ``task__<name>``
    (:data:`scheduler_svc.store.hot.FINISHED_JOB_COLUMNS`)."""
    m = _mapping(row)
    if m["task__id"] is None:
        return job(m), None
    return job(m), FinishingTask(*(m[f"task__{name}"] for name in FinishingTask._fields))


def job_row(
    task: TaskRecord | FiringTask | FinishingTask,
    *,
    trigger: Trigger | str,
    lane: Lane | int,
    now: dt.datetime,
    attempt: int = 1,
    not_before: dt.datetime | None = None,
    schedule_id: int | None = None,
    fire_time: dt.datetime | None = None,
    retry_of_job_id: int | None = None,
    overlap: str = "",
) -> dict[str, Any]:
    """The row of a new QUEUED job of ``task``; its keys are
    :data:`scheduler_svc.store.hot.JOB_COLUMNS`, in that order."""
    return {
        "task_id": task.id,
        "task_name": task.name,
        "status": JobStatus.QUEUED,
        "trigger": trigger,
        "lane": lane,
        "task_priority": task.task_priority,
        "attempt": attempt,
        "enqueued_at": now,
        "not_before": not_before,
        "schedule_id": schedule_id,
        "fire_time": fire_time,
        "retry_of_job_id": retry_of_job_id,
        "error": "",
        "output_tail": "",
        "abort_requested": False,
        "late_outcome": "",
        "overlap": overlap,
    }


def storable(text: str) -> str:
    """``text`` as both databases can store it: a NUL character, which PostgreSQL's text
    type rejects (a job's output may hold any byte), becomes U+FFFD, the replacement
    character."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def tail(text: str) -> str:
    """A job's output tail as stored: the last :data:`OUTPUT_TAIL_CHARS`, storable."""
    return storable(text[-OUTPUT_TAIL_CHARS:])


def job_error(text: str) -> str:
    """A job's error as stored: storable, and when longer than :data:`ERROR_CHARS`, its
    first and last halves around a note of how many characters were cut (an exception's
    message comes first, a traceback's last line last)."""
    if len(text) > ERROR_CHARS:
        half = ERROR_CHARS // 2
        cut = len(text) - 2 * half
        text = f"{text[:half]}\n[... {cut} characters cut ...]\n{text[-half:]}"
    return storable(text)
