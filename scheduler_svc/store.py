"""The data store: every read and write of tickwork's tables, on SQLite or PostgreSQL.

Each method's docstring is its contract: what it returns and in which order, what it
updates, and what it raises. Every method takes ``now`` (aware UTC) from its caller; the
store never reads the clock. Unique violations become :class:`AlreadyExists` naming the
field; other driver errors propagate as SQLAlchemy's ``DBAPIError`` (the servicers answer
them UNAVAILABLE without the SQL; the loops log them and retry).
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import random
import uuid
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import fields, replace
from typing import Any, Concatenate, NamedTuple, ParamSpec, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.dml import ReturningUpdate

from scheduler_svc import db
from scheduler_svc.bulk import Bulk
from scheduler_svc.db import (
    ACTIVE_STATES,
    LANE_MANUAL,
    LANE_SCHEDULER,
    QUEUED,
    RUNNING,
    Database,
    fires,
    jobs,
    leases,
    schedule_tasks,
    schedules,
    tasks,
)
from scheduler_svc.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from scheduler_svc.prepared import Prepared
from scheduler_svc.records import (
    EnqueueResult,
    FinishResult,
    FireRecord,
    FireRequest,
    FireResult,
    JobRecord,
    ScheduleRecord,
    TaskRecord,
    TaskRunResult,
)

log = logging.getLogger(__name__)

OUTPUT_TAIL_CHARS = 4096
"""The output kept on a job: its last 4096 characters."""
ERROR_CHARS = 8192
"""The longest job error kept, in characters: its first and last 4096, the middle cut."""
LEASE_LOST = "lease lost: the worker stopped heartbeating"
TASK_DISABLED = "task disabled"
"""The error of a scheduler job cancelled because its task was disabled."""

_TASK_FIELDS = [f.name for f in fields(TaskRecord)]
_JOB_FIELDS = [f.name for f in fields(JobRecord)]
_SCHEDULE_COLUMNS = [
    f.name for f in fields(ScheduleRecord) if f.name not in ("task_ids", "task_names")
]


def _task(row: sa.Row[Any] | Mapping[str, Any]) -> TaskRecord:
    m = row._mapping if isinstance(row, sa.Row) else row
    return TaskRecord(**{k: m[k] for k in _TASK_FIELDS})


def _job(row: sa.Row[Any] | Mapping[str, Any]) -> JobRecord:
    m = row._mapping if isinstance(row, sa.Row) else row
    return JobRecord(**{k: m[k] for k in _JOB_FIELDS})


def _fire(row: sa.Row[Any]) -> FireRecord:
    m = row._mapping
    return FireRecord(
        id=m["id"],
        schedule_id=m["schedule_id"],
        fire_time=m["fire_time"],
        outcome=m["outcome"],
        runs=tuple(TaskRunResult.from_json(r) for r in m["runs"]),
        recorded_at=m["recorded_at"],
    )


def _purge_batch(
    table: sa.Table, cond: sa.ColumnElement[bool], batch: int, conn: Connection
) -> list[int]:
    ids = list(conn.execute(sa.select(table.c.id).where(cond).limit(batch)).scalars())
    if ids:
        conn.execute(table.delete().where(table.c.id.in_(ids)))
    return ids


class _FiringTask(NamedTuple):
    """What recording a fire reads of a task (not its params: decoding 10,000 of them was a
    tenth of the time to record 10,000 fires)."""

    id: int
    name: str
    enabled: bool
    task_priority: int


# Read before the fires are written: tasks locked before schedules (see LOCK_ORDER).
_FIRING_TASKS = (
    sa.select(*(tasks.c[name] for name in _FiringTask._fields))
    .where(tasks.c.id.in_(sa.bindparam("b_task_ids", expanding=True)))
    .order_by(tasks.c.id)
    .with_for_update(read=True, key_share=True)
)

LOCK_ORDER = "tasks (in id order), then schedules"
"""The order in which every write transaction on PostgreSQL locks rows of these tables,
so two never wait for each other (a deadlock, which PostgreSQL breaks after a second by
failing one). DeleteTask locks its task FOR UPDATE, then the schedules it is in; whatever
inserts rows that name a task (a schedule's task list, a fire's jobs, a run's job) first
reads the task FOR KEY SHARE, which also makes a task deleted meanwhile NOT_FOUND instead
of a foreign-key error. (SQLite runs one write transaction at a time; the locking
clauses are left out there.)"""


class _FinishingTask(NamedTuple):
    """What recording a job's outcome reads of its task (not its params or description)."""

    id: int
    name: str
    task_priority: int
    enabled: bool
    consecutive_failure_count: int
    max_attempts: int
    backoff_base_seconds: float
    backoff_cap_seconds: float


def _of_the_jobs_task(name: str) -> sa.Label[Any]:
    """Column ``name`` of the job's task, for the RETURNING of a statement on ``jobs``: a
    scalar subquery labelled ``task__<name>`` (NULL when the task is gone)."""
    return (
        sa.select(tasks.c[name])
        .where(tasks.c.id == jobs.c.task_id)
        .scalar_subquery()
        .label(f"task__{name}")
    )


# A job's outcome is recorded and what follows it read from its task in one statement.
_FINISHED_JOB_COLUMNS = (*jobs.c, *(_of_the_jobs_task(name) for name in _FinishingTask._fields))


def _finished(row: sa.Row[Any] | Mapping[str, Any]) -> tuple[JobRecord, _FinishingTask | None]:
    """The job and its task from a row of ``_FINISHED_JOB_COLUMNS``."""
    job = _job(row)
    m = row._mapping if isinstance(row, sa.Row) else row
    if m["task__id"] is None:
        return job, None
    return job, _FinishingTask(*(m[f"task__{name}"] for name in _FinishingTask._fields))


def _job_row(
    task: TaskRecord | _FiringTask | _FinishingTask,
    *,
    trigger: str,
    lane: int,
    now: dt.datetime,
    attempt: int = 1,
    not_before: dt.datetime | None = None,
    schedule_id: int | None = None,
    fire_time: dt.datetime | None = None,
    retry_of_job_id: int | None = None,
) -> dict[str, Any]:
    """The row of a new QUEUED job of ``task``."""
    return {
        "task_id": task.id,
        "task_name": task.name,
        "status": QUEUED,
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
    }


#: The columns of a new job row (:func:`_job_row`), for driver-level inserts.
_JOB_COLUMNS = (
    "task_id",
    "task_name",
    "status",
    "trigger",
    "lane",
    "task_priority",
    "attempt",
    "enqueued_at",
    "not_before",
    "schedule_id",
    "fire_time",
    "retry_of_job_id",
    "error",
    "output_tail",
    "abort_requested",
    "late_outcome",
)
_ACTIVE_JOB_CONFLICT = f"ON CONFLICT (task_id) WHERE {db.ACTIVE_JOB_PREDICATE.text} DO NOTHING"
_FIRE_COLUMNS = ("schedule_id", "fire_time", "outcome", "runs", "recorded_at")
_FIRE_CONFLICT = "ON CONFLICT (schedule_id, fire_time) DO NOTHING"


_JOB_DATETIME_COLUMNS = tuple(
    i for i, c in enumerate(_JOB_COLUMNS) if c in ("enqueued_at", "not_before", "fire_time")
)
_JOB_FLAG_COLUMN = _JOB_COLUMNS.index("abort_requested")


def _driver_row(bulk: Bulk, row: dict[str, Any]) -> tuple[Any, ...]:
    """A :func:`_job_row` as driver values in :data:`_JOB_COLUMNS` order (its datetime
    columns as UTCDateTime stores them, its flag as Boolean does)."""
    out = [row[column] for column in _JOB_COLUMNS]
    for i in _JOB_DATETIME_COLUMNS:
        out[i] = bulk.when(out[i])
    out[_JOB_FLAG_COLUMN] = bulk.flag(out[_JOB_FLAG_COLUMN])
    return tuple(out)


def _storable(text: str) -> str:
    """``text`` as both databases can store it: a NUL character, which PostgreSQL's text
    type rejects (a job's output may hold any byte), becomes U+FFFD, the replacement
    character."""
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def _tail(text: str) -> str:
    """A job's output tail as stored: the last :data:`OUTPUT_TAIL_CHARS`, storable."""
    return _storable(text[-OUTPUT_TAIL_CHARS:])


def job_error(text: str) -> str:
    """A job's error as stored: storable, and when longer than :data:`ERROR_CHARS`, its
    first and last halves around a note of how many characters were cut (an exception's
    message comes first, a traceback's last line last)."""
    if len(text) > ERROR_CHARS:
        half = ERROR_CHARS // 2
        cut = len(text) - 2 * half
        text = f"{text[:half]}\n[... {cut} characters cut ...]\n{text[-half:]}"
    return _storable(text)


def backoff_delay_s(attempt: int, base_s: float, cap_s: float, rng: random.Random) -> float:
    """Delay before the retry that follows failed attempt ``attempt`` (1-based), seconds.

    Exponential backoff with full jitter: uniform in [0, min(cap, base * 2^(attempt-1))],
    and at least one second, so a retry never runs immediately.
    """
    ceiling = min(cap_s, base_s * (2 ** max(0, attempt - 1)))
    return max(1.0, rng.uniform(0.0, ceiling))


def due_schedules_query(now: dt.datetime, limit: int) -> sa.Select[Any]:
    """Enabled schedules due at ``now``, earliest first; served by ix_schedules_due."""
    return (
        schedules.select()
        .where(schedules.c.enabled.is_(True), schedules.c.next_run_at <= now)
        .order_by(schedules.c.next_run_at, schedules.c.id)
        .limit(limit)
    )


def _queue_order(query: sa.Select[Any]) -> sa.Select[Any]:
    """The queue order: lane (manual first), task_priority descending, enqueue time,
    insertion order; index ix_jobs_queue is in this order."""
    return query.order_by(jobs.c.lane, jobs.c.task_priority.desc(), jobs.c.enqueued_at, jobs.c.id)


_task_of_job = tasks.alias("task_of_job")


def _ready(now: Any) -> sa.ColumnElement[bool]:
    """Queued, not held back by a retry's not_before, and not a scheduler-lane job of a
    disabled task.

    Disabling a task cancels its scheduler-lane jobs in the same transaction (see
    :meth:`Store.update_task`), but on PostgreSQL a fire that read the task as enabled just
    before an auto-disable committed may still insert one (its FOR KEY SHARE read does not
    wait for that UPDATE): such a job stays queued, never started, until the task is enabled
    again or a manual run promotes it."""
    task_enabled = (
        sa.select(_task_of_job.c.enabled)
        .where(_task_of_job.c.id == jobs.c.task_id)
        .correlate_except(_task_of_job)
        .scalar_subquery()
    )
    return sa.and_(
        jobs.c.status == QUEUED,
        sa.or_(jobs.c.not_before.is_(None), jobs.c.not_before <= now),
        sa.or_(jobs.c.lane != LANE_SCHEDULER, task_enabled.is_(True)),
    )


# The statements every job goes through, built once. SQLAlchemy memoizes a statement
# object's cache key, so reusing the object skips building and keying it each time.
_WORKER_LEASE_HOLDER = sa.select(leases.c.holder).where(leases.c.name == "worker")
_WORKER_LEASE_HOLDER_LOCKED = _WORKER_LEASE_HOLDER.with_for_update()
_running = jobs.alias("running")


# The next ready job's id, unless a job is running (one job at a time). Not correlated with
# the UPDATE that takes it: its own scan of the queue, run once (PostgreSQL plans an
# uncorrelated scalar subquery as an InitPlan; as a FROM item joined to the updated table
# it may be rescanned once per candidate row and, skipping locked rows, start several).
def _next_ready(
    *, running_but: sa.ColumnElement[Any] | None = None, also: Sequence[sa.ColumnElement[bool]] = ()
) -> sa.Select[Any]:
    """The next ready job's id in the queue order, unless a job other than ``running_but``
    (a job id) is RUNNING, and only if every condition in ``also`` holds."""
    running = [_running.c.status == RUNNING]
    if running_but is not None:
        running.append(_running.c.id != running_but)
    return (
        _queue_order(
            sa.select(jobs.c.id).where(
                _ready(sa.bindparam("now")), ~sa.exists(sa.select(_running.c.id).where(*running))
            )
        )
        .where(*also)
        .limit(1)
        .correlate(None)
    )


_NEXT_READY = _next_ready()
_NEXT_READY_LOCKED = _NEXT_READY.with_for_update(skip_locked=True)


def _start_next(
    next_ready: sa.Select[Any], *, join_task: bool, token: str = "b_token"
) -> ReturningUpdate[Any]:
    """The statement that starts the job ``next_ready`` selects, under the lease token in
    parameter ``token``, and returns it with its task (columns ``task__<name>``): joined
    (``join_task``, PostgreSQL, whose RETURNING may return the FROM items' columns: a third
    of the server time of one subquery per column) or as scalar subqueries (SQLite's
    RETURNING sees only the updated table)."""
    started_at = sa.bindparam("b_started_at", type_=jobs.c.started_at.type)
    task_columns = (
        [column.label(f"task__{column.name}") for column in tasks.c]
        if join_task
        else [_of_the_jobs_task(column.name) for column in tasks.c]
    )
    return (
        jobs.update()
        .where(jobs.c.id == next_ready.scalar_subquery(), jobs.c.status == QUEUED)
        .where(*([tasks.c.id == jobs.c.task_id] if join_task else []))
        .values(
            status=RUNNING,
            # ``b_started_at`` was read before this transaction; an enqueue that committed
            # meanwhile may carry a later instant. A job never starts before it was enqueued.
            started_at=sa.case(
                (jobs.c.enqueued_at > started_at, jobs.c.enqueued_at), else_=started_at
            ),
            worker_id=sa.bindparam("b_worker_id"),
            lease_token=sa.bindparam(token),
            lease_expires_at=sa.bindparam("b_expires"),
        )
        .returning(*jobs.c, *task_columns)
    )


# Taking the next job is one statement after the worker lease row (locked on PostgreSQL,
# so that this statement's snapshot is taken once any other claim has committed). The
# _LOCKED variants are PostgreSQL's.
_START_NEXT_READY = _start_next(_NEXT_READY, join_task=False)
_START_NEXT_READY_LOCKED = _start_next(_NEXT_READY_LOCKED, join_task=True)
# Read before a schedule is written: tasks locked before schedules (see LOCK_ORDER).
_TASK_NAMES = (
    sa.select(tasks.c.id, tasks.c.name)
    .where(tasks.c.id.in_(sa.bindparam("b_task_ids", expanding=True)))
    .order_by(tasks.c.id)
    .with_for_update(read=True, key_share=True)
)
_INSERT_SCHEDULE = schedules.insert().returning(*schedules.c)
# Executed many at once, RETURNING rows in the order of the parameter sets.
_INSERT_SCHEDULES_IN_ORDER = schedules.insert().returning(
    *schedules.c, sort_by_parameter_order=True
)
_TAKEN_SCHEDULE_NAMES = sa.select(schedules.c.name).where(
    schedules.c.name.in_(sa.bindparam("b_names", expanding=True))
)
_INSERT_SCHEDULE_TASK = schedule_tasks.insert()
_RUNNING_UNDER_TOKEN = sa.and_(
    jobs.c.id == sa.bindparam("b_job_id"),
    jobs.c.lease_token == sa.bindparam("b_token"),
    jobs.c.status == RUNNING,
)
_RENEW_JOB_LEASE = (
    jobs.update().where(_RUNNING_UNDER_TOKEN).values(lease_expires_at=sa.bindparam("b_expires"))
)
_FINISH_VALUES: dict[str, Any] = {
    "status": sa.bindparam("b_status"),
    "error": sa.bindparam("b_error"),
    # An empty tail in the outcome keeps what the job's LogLines stored.
    "output_tail": sa.case(
        (sa.bindparam("b_tail", type_=sa.Text) == "", jobs.c.output_tail),
        else_=sa.bindparam("b_tail", type_=sa.Text),
    ),
    "finished_at": sa.bindparam("b_now", type_=jobs.c.finished_at.type),
    "lease_expires_at": None,
}
_FINISH_JOB = (
    jobs.update()
    .where(_RUNNING_UNDER_TOKEN)
    .values(_FINISH_VALUES)
    .returning(*_FINISHED_JOB_COLUMNS)
)


def _has_no_follow_ups() -> sa.ColumnElement[bool]:
    """True for a running job whose success has nothing to follow it (see
    :meth:`Store._after_finish`, whose rules this must match): its task's
    consecutive_failure_count is already 0 and it was not started by an enabled interval
    schedule (whose next run is anchored to the finish). Scalar subqueries on the primary
    keys, not EXISTS: PostgreSQL may turn an EXISTS into a join that reads every enabled
    schedule for the one job."""
    failures = (
        sa.select(tasks.c.consecutive_failure_count)
        .where(tasks.c.id == jobs.c.task_id)
        .scalar_subquery()
    )
    interval = (
        sa.select(
            sa.and_(
                schedules.c.enabled.is_(True),
                schedules.c.cron_expression == "",
                schedules.c.interval_seconds > 0,
            )
        )
        .where(schedules.c.id == jobs.c.schedule_id)
        .scalar_subquery()
    )
    return sa.and_(sa.func.coalesce(failures, 0) == 0, sa.func.coalesce(interval, False).is_(False))


def _succeed_and_start_next() -> sa.Select[Any]:
    """One statement (PostgreSQL) that records a running job's success and starts the next
    ready job for the same worker, when that success has no follow-ups
    (:func:`_has_no_follow_ups`) and the worker holds the ``worker`` lease.

    Columns: the finished job's, prefixed ``finished__`` (all NULL when nothing was
    finished: stale token, a repeat, or follow-ups to do), then the started job and its
    task as :data:`_START_NEXT_READY_LOCKED` returns them (all NULL when none started).
    Parameters: those of ``_FINISH_JOB`` and of ``_START_NEXT_READY_LOCKED``, the started
    job's lease token in ``b_next_token``.

    Why no second job can start: the claim's snapshot is taken before the ``worker`` lease
    row's lock is held (one statement), but the job being finished is RUNNING, committed,
    in every other transaction's snapshot until this one commits, so no other claim can
    start a job meanwhile (each requires that none is RUNNING); and this statement's own
    claim excludes only the job it finishes, which it finishes only under its lease token
    (a concurrent repeat of the same outcome re-checks the token after the row lock and
    finishes, and so starts, nothing). The lease row is locked (FOR UPDATE re-reads the
    holder once the lock is held), so a session that lost the worker lease starts nothing.
    """
    finished = (
        jobs.update()
        .where(_RUNNING_UNDER_TOKEN, _has_no_follow_ups())
        .values(_FINISH_VALUES)
        .returning(*jobs.c)
        .cte("finished")
    )
    lease = (
        sa.select(leases.c.holder)
        .where(leases.c.name == "worker", leases.c.holder == sa.bindparam("b_worker_id"))
        .with_for_update()
        .cte("worker_lease")
    )
    next_ready = _next_ready(
        running_but=sa.bindparam("b_job_id"),
        also=[sa.exists(sa.select(finished.c.id)), sa.exists(sa.select(lease.c.holder))],
    ).with_for_update(skip_locked=True)
    started = _start_next(next_ready, join_task=True, token="b_next_token").cte("started")
    one = sa.select(sa.literal(1).label("one")).subquery("one")
    return sa.select(
        *(column.label(f"finished__{column.key}") for column in finished.c),
        *(column for column in started.c),
    ).select_from(one.outerjoin(finished, sa.true()).outerjoin(started, sa.true()))


_SUCCEED_AND_START_NEXT = _succeed_and_start_next()

# Each job's finish-and-claim transaction runs these; at the driver level (see prepared.py).
_PREPARED_LEASE_HOLDER = Prepared(_WORKER_LEASE_HOLDER)
_PREPARED_LEASE_HOLDER_LOCKED = Prepared(_WORKER_LEASE_HOLDER_LOCKED)
_PREPARED_START_NEXT_READY = Prepared(_START_NEXT_READY)
_PREPARED_START_NEXT_READY_LOCKED = Prepared(_START_NEXT_READY_LOCKED)
_PREPARED_FINISH_JOB = Prepared(_FINISH_JOB)
_PREPARED_SUCCEED_AND_START_NEXT = Prepared(_SUCCEED_AND_START_NEXT)


P = ParamSpec("P")
R = TypeVar("R")
_Op = Callable[Concatenate["Store", Connection, P], R]
_AsyncOp = Callable[Concatenate["Store", P], Coroutine[Any, Any, R]]


def _writes(op: _Op[P, R]) -> _AsyncOp[P, R]:
    """Make ``op(self, conn, ...)`` the coroutine method ``op(self, ...)`` that runs it in
    one read-write transaction (:meth:`Database.write`)."""

    @functools.wraps(op)
    async def run(self: Store, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self.db.write(lambda conn: op(self, conn, *args, **kwargs))

    return run


def _takes_jobs(op: _Op[P, R]) -> _AsyncOp[P, R]:
    """Like :func:`_writes`, on the queue's connections (``Database.write(queue=True)``):
    for what takes jobs off the queue."""

    @functools.wraps(op)
    async def run(self: Store, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self.db.write(lambda conn: op(self, conn, *args, **kwargs), queue=True)

    return run


def _reads(op: _Op[P, R]) -> _AsyncOp[P, R]:
    """Like :func:`_writes`, in a transaction that only reads (:meth:`Database.read`)."""

    @functools.wraps(op)
    async def run(self: Store, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self.db.read(lambda conn: op(self, conn, *args, **kwargs))

    return run


class Store:
    """tickwork's tables behind one async interface. Safe to share in one event loop.

    Each public operation is written as a plain function of a connection and runs as one
    transaction (``@_writes`` or ``@_reads``); callers await it. See :class:`Database`.
    """

    def __init__(self, database: Database, *, rng: random.Random | None = None) -> None:
        self.db = database
        self.rng = rng or random.Random()

    # ------------------------------------------------------------------ tasks

    @_writes
    def create_task(self, conn: Connection, values: dict[str, Any], now: dt.datetime) -> TaskRecord:
        """Insert a task from validated ``values`` (column names) and return it.

        Raises AlreadyExists(field="task.name") when the name is taken.
        """
        row = {**values, "created_at": now, "updated_at": now}
        try:
            result = conn.execute(tasks.insert().values(row).returning(*tasks.c))
            return _task(result.one())
        except IntegrityError:
            raise AlreadyExists(
                f"a task named {values.get('name')!r} already exists", field="task.name"
            ) from None

    @_reads
    def get_task(self, conn: Connection, task_id: int) -> TaskRecord:
        """The task with ``task_id``. Raises NotFound(field="task_id")."""
        row = conn.execute(tasks.select().where(tasks.c.id == task_id)).first()
        if row is None:
            raise NotFound(f"no task with id {task_id}", field="task_id")
        return _task(row)

    @_reads
    def get_task_by_name(self, conn: Connection, name: str) -> TaskRecord:
        """The task named ``name``. Raises NotFound(field="name")."""
        row = conn.execute(tasks.select().where(tasks.c.name == name)).first()
        if row is None:
            raise NotFound(f"no task named {name!r}", field="name")
        return _task(row)

    @_reads
    def list_tasks(self, conn: Connection, limit: int, after_name: str = "") -> list[TaskRecord]:
        """Up to ``limit`` tasks with names after ``after_name``, ascending by name."""
        query = tasks.select().where(tasks.c.name > after_name).order_by(tasks.c.name)
        rows = conn.execute(query.limit(limit)).all()
        return [_task(r) for r in rows]

    @_writes
    def update_task(
        self, conn: Connection, task_id: int, values: dict[str, Any], now: dt.datetime
    ) -> tuple[TaskRecord, list[int]]:
        """Update the given columns of a task; return it and the ids of the jobs cancelled.

        Turning ``enabled`` from false to true resets consecutive_failure_count to 0 and
        clears disabled_reason. Setting it false cancels the task's queued scheduler-lane
        jobs (a scheduled run or its retry; not one a manual or API run asked for or
        promoted), error "task disabled"; a running job is left to finish. Raises
        NotFound(field="task.id"), AlreadyExists("task.name").
        """
        disabling = values.get("enabled") is False
        query = tasks.select().where(tasks.c.id == task_id)
        if disabling and self.db.dialect.skip_locked:
            # FOR UPDATE, before the jobs (LOCK_ORDER): a fire, run or retry that read the
            # task FOR KEY SHARE commits first (its job is then seen and cancelled below);
            # one that comes after waits for this and reads the task disabled.
            query = query.with_for_update()
        try:
            current = conn.execute(query).first()
            if current is None:
                raise NotFound(f"no task with id {task_id}", field="task.id")
            row = dict(values)
            if row.get("enabled") is True and not current._mapping["enabled"]:
                row["consecutive_failure_count"] = 0
                row["disabled_reason"] = ""
            if row.get("enabled") is False:
                row.setdefault("disabled_reason", "")
            row["updated_at"] = now
            result = conn.execute(
                tasks.update().where(tasks.c.id == task_id).values(row).returning(*tasks.c)
            )
            task = _task(result.one())
        except IntegrityError:
            raise AlreadyExists(
                f"a task named {values.get('name')!r} already exists", field="task.name"
            ) from None
        cancelled: list[int] = []
        if disabling:
            cancelled = list(
                conn.scalars(
                    jobs.update()
                    .where(
                        jobs.c.task_id == task_id,
                        jobs.c.status == QUEUED,
                        jobs.c.lane == LANE_SCHEDULER,
                    )
                    .values(status=db.CANCELLED, finished_at=now, error=TASK_DISABLED)
                    .returning(jobs.c.id)
                )
            )
        return task, cancelled

    @_writes
    def delete_task(self, conn: Connection, task_id: int) -> None:
        """Delete a task with all its jobs (finished ones too) and its schedule links.

        Raises NotFound(field="task_id"); FailedPrecondition when a job of it is running,
        or when it is the only task of a schedule (which would be left firing nothing).
        """
        found_query = sa.select(tasks.c.id).where(tasks.c.id == task_id)
        if self.db.dialect.skip_locked:
            # Lock the task first, then its schedules (LOCK_ORDER, kept by every writer):
            # a delete racing a run, a fire or a schedule update neither deadlocks nor
            # lets the other insert a row naming a task gone (a foreign-key error).
            found_query = found_query.with_for_update()
        found = conn.scalar(found_query)
        if found is None:
            raise NotFound(f"no task with id {task_id}", field="task_id")
        running_query = sa.select(jobs.c.id).where(
            jobs.c.task_id == task_id, jobs.c.status == RUNNING
        )
        self._refuse_running(conn.scalar(running_query), task_id)
        self._check_not_a_schedules_last_task(conn, task_id)
        # Never a running job: a claim that committed since the read above (it waited for
        # no lock of ours) made one, which this DELETE, waiting for the claim's row lock,
        # re-checks and leaves; it is then seen below and the delete refused.
        conn.execute(jobs.delete().where(jobs.c.task_id == task_id, jobs.c.status != RUNNING))
        self._refuse_running(conn.scalar(running_query), task_id)
        conn.execute(schedule_tasks.delete().where(schedule_tasks.c.task_id == task_id))
        if conn.execute(tasks.delete().where(tasks.c.id == task_id)).rowcount != 1:
            # Deleted by a concurrent call since the read above: that call succeeded.
            raise NotFound(f"no task with id {task_id}", field="task_id")

    @staticmethod
    def _refuse_running(running: int | None, task_id: int) -> None:
        """Raise FailedPrecondition when ``running`` (a running job of the task) is set."""
        if running is not None:
            raise FailedPrecondition(
                f"task {task_id} has a running job ({running}); abort it first",
                field="task_id",
            )

    def _check_not_a_schedules_last_task(self, conn: Connection, task_id: int) -> None:
        """Raise FailedPrecondition naming the schedules ``task_id`` is the only task of.

        The schedules it is in are locked first (FOR UPDATE on PostgreSQL, in id order), so
        two deletes of a schedule's last two tasks cannot both see the other one remain.
        """
        linked = sa.select(schedule_tasks.c.schedule_id).where(schedule_tasks.c.task_id == task_id)
        ids = list(
            conn.scalars(
                sa.select(schedules.c.id)
                .where(schedules.c.id.in_(linked))
                .order_by(schedules.c.id)
                .with_for_update()
            )
        )
        if not ids:
            return
        counts = (
            sa.select(schedule_tasks.c.schedule_id)
            .where(schedule_tasks.c.schedule_id.in_(ids))
            .group_by(schedule_tasks.c.schedule_id)
            .having(sa.func.count() == 1)
        )
        alone = list(
            conn.scalars(
                sa.select(schedules.c.name)
                .where(schedules.c.id.in_(counts))
                .order_by(schedules.c.name)
            )
        )
        if alone:
            shown = ", ".join(repr(name) for name in alone[:5])
            more = f" and {len(alone) - 5} more" if len(alone) > 5 else ""
            raise FailedPrecondition(
                f"task {task_id} is the only task of schedule {shown}{more}; delete the "
                "schedule or give it another task first",
                field="task_id",
            )

    # -------------------------------------------------------------- schedules

    def _schedule_tasks(
        self, conn: Connection, schedule_ids: Sequence[int]
    ) -> dict[int, list[tuple[int, str]]]:
        if not schedule_ids:
            return {}
        query = (
            sa.select(schedule_tasks.c.schedule_id, tasks.c.id, tasks.c.name)
            .join(tasks, tasks.c.id == schedule_tasks.c.task_id)
            .where(schedule_tasks.c.schedule_id.in_(schedule_ids))
            .order_by(schedule_tasks.c.schedule_id, schedule_tasks.c.position)
        )
        out: dict[int, list[tuple[int, str]]] = {sid: [] for sid in schedule_ids}
        for sid, tid, name in conn.execute(query).all():
            out[sid].append((tid, name))
        return out

    def _schedules(self, conn: Connection, rows: Sequence[sa.Row[Any]]) -> list[ScheduleRecord]:
        links = self._schedule_tasks(conn, [r._mapping["id"] for r in rows])
        out = []
        for r in rows:
            m = r._mapping
            pairs = links.get(m["id"], [])
            out.append(
                ScheduleRecord(
                    **{k: m[k] for k in _SCHEDULE_COLUMNS},
                    task_ids=tuple(p[0] for p in pairs),
                    task_names=tuple(p[1] for p in pairs),
                )
            )
        return out

    def _lock_tasks(self, conn: Connection, task_ids: Sequence[int]) -> dict[int, str]:
        """The names of ``task_ids``, their rows locked FOR KEY SHARE (see
        :data:`LOCK_ORDER`: before the schedule's row is written). Raises
        NotFound(field="schedule.task_ids")."""
        rows = conn.execute(_TASK_NAMES, {"b_task_ids": sorted(set(task_ids))}).all()
        names: dict[int, str] = {row.id: row.name for row in rows}
        missing = [t for t in task_ids if t not in names]
        if missing:
            raise NotFound(f"no task with id {missing[0]}", field="schedule.task_ids")
        return names

    def _link_tasks(
        self,
        conn: Connection,
        schedule_id: int,
        task_ids: Sequence[int],
        names: dict[int, str],
        *,
        replace: bool,
    ) -> tuple[str, ...]:
        """Make ``task_ids`` (in order; ``names`` from :meth:`_lock_tasks`) the schedule's
        tasks, replacing its current ones when ``replace``; return their names."""
        if replace:
            conn.execute(schedule_tasks.delete().where(schedule_tasks.c.schedule_id == schedule_id))
        conn.execute(
            _INSERT_SCHEDULE_TASK,
            [
                {"schedule_id": schedule_id, "task_id": t, "position": i}
                for i, t in enumerate(task_ids)
            ],
        )
        return tuple(names[t] for t in task_ids)

    @_writes
    def create_schedule(
        self, conn: Connection, values: dict[str, Any], task_ids: Sequence[int], now: dt.datetime
    ) -> ScheduleRecord:
        """Insert a schedule (validated ``values``, next_run_at included) with its tasks.

        Raises AlreadyExists(field="schedule.name"), NotFound(field="schedule.task_ids").
        Nothing is written when it raises.
        """
        task_names = self._lock_tasks(conn, task_ids)
        try:
            row = {**values, "created_at": now, "updated_at": now}
            created = conn.execute(_INSERT_SCHEDULE, row).one()._mapping
            names = self._link_tasks(conn, created["id"], task_ids, task_names, replace=False)
            return ScheduleRecord(
                **{k: created[k] for k in _SCHEDULE_COLUMNS},
                task_ids=tuple(task_ids),
                task_names=names,
            )
        except IntegrityError:
            raise AlreadyExists(
                f"a schedule named {values.get('name')!r} already exists", field="schedule.name"
            ) from None

    @_writes
    def create_schedules(
        self,
        conn: Connection,
        items: Sequence[tuple[dict[str, Any], Sequence[int]]],
        now: dt.datetime,
    ) -> list[ScheduleRecord]:
        """Insert many schedules (each as :meth:`create_schedule`: validated ``values`` with
        the same keys, and task ids) in one transaction, all or none; return them in order.

        Set-based: one read of taken names, one of the tasks, one executemany INSERT of the
        schedules, one of their links. Raises AlreadyExists(field="requests[i].schedule.name")
        and NotFound(field="requests[i].schedule.task_ids") for the first item at fault.
        """
        names = [values["name"] for values, _ in items]
        taken = set(conn.execute(_TAKEN_SCHEDULE_NAMES, {"b_names": names}).scalars())
        for i, name in enumerate(names):
            if name in taken:
                raise AlreadyExists(
                    f"a schedule named {name!r} already exists",
                    field=f"requests[{i}].schedule.name",
                )
        wanted = sorted({t for _, task_ids in items for t in task_ids})
        rows = conn.execute(_TASK_NAMES, {"b_task_ids": wanted}).all()
        task_names: dict[int, str] = {row.id: row.name for row in rows}
        for i, (_, task_ids) in enumerate(items):
            missing = [t for t in task_ids if t not in task_names]
            if missing:
                raise NotFound(
                    f"no task with id {missing[0]}", field=f"requests[{i}].schedule.task_ids"
                )
        try:
            created = conn.execute(
                _INSERT_SCHEDULES_IN_ORDER,
                [{**values, "created_at": now, "updated_at": now} for values, _ in items],
            ).all()
        except IntegrityError:  # a name taken by another transaction since the check
            raise AlreadyExists(
                "a schedule name in this batch was taken meanwhile; nothing was created",
                field="requests",
            ) from None
        conn.execute(
            _INSERT_SCHEDULE_TASK,
            [
                {"schedule_id": row.id, "task_id": t, "position": p}
                for row, (_, task_ids) in zip(created, items, strict=True)
                for p, t in enumerate(task_ids)
            ],
        )
        return [
            ScheduleRecord(
                **{k: row._mapping[k] for k in _SCHEDULE_COLUMNS},
                task_ids=tuple(task_ids),
                task_names=tuple(task_names[t] for t in task_ids),
            )
            for row, (_, task_ids) in zip(created, items, strict=True)
        ]

    @_reads
    def get_schedule(self, conn: Connection, schedule_id: int) -> ScheduleRecord:
        """The schedule with ``schedule_id``. Raises NotFound(field="schedule_id")."""
        row = conn.execute(schedules.select().where(schedules.c.id == schedule_id)).first()
        if row is None:
            raise NotFound(f"no schedule with id {schedule_id}", field="schedule_id")
        return self._schedules(conn, [row])[0]

    @_reads
    def get_schedule_by_name(self, conn: Connection, name: str) -> ScheduleRecord:
        """The schedule named ``name``. Raises NotFound(field="name")."""
        row = conn.execute(schedules.select().where(schedules.c.name == name)).first()
        if row is None:
            raise NotFound(f"no schedule named {name!r}", field="name")
        return self._schedules(conn, [row])[0]

    @_reads
    def list_schedules(
        self, conn: Connection, limit: int, after_name: str = ""
    ) -> list[ScheduleRecord]:
        """Up to ``limit`` schedules with names after ``after_name``, ascending by name."""
        query = schedules.select().where(schedules.c.name > after_name).order_by(schedules.c.name)
        rows = conn.execute(query.limit(limit)).all()
        return self._schedules(conn, rows)

    @_writes
    def update_schedule(
        self,
        conn: Connection,
        schedule_id: int,
        values: dict[str, Any],
        task_ids: Sequence[int] | None,
        now: dt.datetime,
        *,
        complete: Callable[[ScheduleRecord], dict[str, Any]] | None = None,
    ) -> ScheduleRecord:
        """Update the given columns (and the task list when ``task_ids`` is not None).

        With ``complete``, the schedule is read first in this transaction, its row locked
        (FOR UPDATE on PostgreSQL, after the tasks: LOCK_ORDER), and ``complete(current)``
        returns the further columns to set (the next run) or raises (InvalidArgument: the
        merge is invalid): so the update is validated against the schedule it changes,
        not one read before another update committed.

        Raises NotFound(field="schedule.id" or "schedule.task_ids"), AlreadyExists.
        """
        task_names = None if task_ids is None else self._lock_tasks(conn, task_ids)
        if complete is not None:
            query = schedules.select().where(schedules.c.id == schedule_id)
            if self.db.dialect.skip_locked:
                query = query.with_for_update()
            current = conn.execute(query).first()
            if current is None:
                raise NotFound(f"no schedule with id {schedule_id}", field="schedule_id")
            values = {**values, **complete(self._schedules(conn, [current])[0])}
        try:
            result = conn.execute(
                schedules.update()
                .where(schedules.c.id == schedule_id)
                .values({**values, "updated_at": now})
                .returning(*schedules.c)
            )
            row = result.first()
            if row is None:
                raise NotFound(f"no schedule with id {schedule_id}", field="schedule.id")
            if task_ids is not None and task_names is not None:
                self._link_tasks(conn, schedule_id, task_ids, task_names, replace=True)
            return self._schedules(conn, [row])[0]
        except IntegrityError:
            raise AlreadyExists(
                f"a schedule named {values.get('name')!r} already exists", field="schedule.name"
            ) from None

    @_writes
    def delete_schedule(self, conn: Connection, schedule_id: int) -> None:
        """Delete a schedule and its fire history. Raises NotFound(field="schedule_id")."""
        result = conn.execute(schedules.delete().where(schedules.c.id == schedule_id))
        if result.rowcount == 0:
            raise NotFound(f"no schedule with id {schedule_id}", field="schedule_id")

    @_reads
    def due_schedules(self, conn: Connection, now: dt.datetime, limit: int) -> list[ScheduleRecord]:
        """Enabled schedules with next_run_at <= now, earliest first (index ix_schedules_due)."""
        rows = conn.execute(due_schedules_query(now, limit)).all()
        return self._schedules(conn, rows)

    @_reads
    def schedules_without_next_run(self, conn: Connection, limit: int) -> list[ScheduleRecord]:
        """Enabled schedules whose next_run_at is NULL (written directly to the database)."""
        query = (
            schedules.select()
            .where(schedules.c.enabled.is_(True), schedules.c.next_run_at.is_(None))
            .order_by(schedules.c.id)
            .limit(limit)
        )
        rows = conn.execute(query).all()
        return self._schedules(conn, rows)

    @_reads
    def earliest_next_run(self, conn: Connection) -> dt.datetime | None:
        """The earliest next_run_at among enabled schedules; None when there is none."""
        query = sa.select(sa.func.min(schedules.c.next_run_at)).where(schedules.c.enabled.is_(True))
        value: dt.datetime | None = conn.scalar(query)
        return value

    @_writes
    def set_next_run(
        self,
        conn: Connection,
        schedule_id: int,
        expected: dt.datetime | None,
        next_run_at: dt.datetime | None,
        last_run_at: dt.datetime | None = None,
    ) -> bool:
        """Move a schedule's next_run_at from ``expected`` to ``next_run_at``.

        Conditional on next_run_at still being ``expected`` (NULL matches None), so an API
        update made meanwhile wins. Sets last_run_at when given. Returns True if updated.
        """
        cond = (
            schedules.c.next_run_at.is_(None)
            if expected is None
            else schedules.c.next_run_at == expected
        )
        values: dict[str, Any] = {"next_run_at": next_run_at}
        if last_run_at is not None:
            values["last_run_at"] = last_run_at
        result = conn.execute(
            schedules.update().where(schedules.c.id == schedule_id, cond).values(values)
        )
        return bool(result.rowcount == 1)

    @_writes
    def set_next_runs(
        self,
        conn: Connection,
        moves: Sequence[tuple[int, dt.datetime | None, dt.datetime | None, dt.datetime | None]],
    ) -> None:
        """Many :meth:`set_next_run` in one transaction: (schedule_id, expected, next_run_at,
        last_run_at) each, each conditional on next_run_at still being ``expected``."""
        if not moves:
            return
        with_last = [m for m in moves if m[1] is not None and m[3] is not None]
        others = [m for m in moves if not (m[1] is not None and m[3] is not None)]
        if with_last:  # the scheduler's moves after a fire: one executemany
            bulk = Bulk(conn)
            bulk.execute_many(
                "UPDATE schedules SET next_run_at = {}, last_run_at = {}"
                " WHERE id = {} AND next_run_at = {}",
                [
                    (bulk.when(nxt), bulk.when(last), sid, bulk.when(exp))
                    for sid, exp, nxt, last in with_last
                ],
            )
        for schedule_id, expected, next_run_at, last_run_at in others:
            cond = (
                schedules.c.next_run_at.is_(None)
                if expected is None
                else schedules.c.next_run_at == expected
            )
            values: dict[str, Any] = {"next_run_at": next_run_at}
            if last_run_at is not None:
                values["last_run_at"] = last_run_at
            conn.execute(
                schedules.update().where(schedules.c.id == schedule_id, cond).values(values)
            )

    # ------------------------------------------------------------------ queue

    def _active_jobs(self, conn: Connection, task_ids: Iterable[int]) -> dict[int, Any]:
        """The queued or running job of each of ``task_ids`` that has one (id, task_id,
        status, lane, not_before), locked on PostgreSQL until the transaction ends, in job
        id order (every writer that locks several jobs does so in that order, so two never
        wait for each other)."""
        query = sa.select(
            jobs.c.id, jobs.c.task_id, jobs.c.status, jobs.c.lane, jobs.c.not_before
        ).where(jobs.c.status.in_(ACTIVE_STATES), jobs.c.task_id.in_(list(task_ids)))
        if self.db.dialect.skip_locked:
            query = query.order_by(jobs.c.id).with_for_update()
        return {row.task_id: row for row in conn.execute(query).all()}

    def _enqueue_manual(
        self, conn: Connection, ordered: Sequence[TaskRecord], trigger: str, now: dt.datetime
    ) -> list[TaskRunResult]:
        """Enqueue a manual or API run of each of ``ordered`` (distinct tasks), set-based:
        one read of their active jobs, one UPDATE for the queued ones, one multi-row INSERT
        (in request order, so the jobs run in that order) that skips a task whose job
        another transaction inserted meanwhile; those are decided again.

        A queued job is asked to run now: it moves to the manual lane (promoted, when the
        scheduler queued it) and a retry's not_before still ahead becomes ``now``. Its
        trigger is kept: a scheduler job's chain still counts toward
        consecutive_failure_count when it finally fails."""
        results: dict[int, TaskRunResult] = {}
        pending = list(ordered)
        for _ in range(3):
            active = self._active_jobs(conn, (t.id for t in pending))
            run_now: list[int] = []
            new: list[TaskRecord] = []
            for task in pending:
                row = active.get(task.id)
                if row is None:
                    new.append(task)
                elif row.status == RUNNING:
                    results[task.id] = TaskRunResult(task.id, task.name, row.id, "ALREADY_RUNNING")
                else:
                    held_back = row.not_before is not None and row.not_before > now
                    if row.lane == LANE_SCHEDULER or held_back:
                        run_now.append(row.id)
                    if row.lane == LANE_SCHEDULER:
                        result = TaskRunResult(task.id, task.name, row.id, promoted=True)
                    else:
                        result = TaskRunResult(task.id, task.name, row.id, "ALREADY_QUEUED")
                    results[task.id] = replace(result, made_ready=held_back)
            if run_now:
                at = sa.bindparam("b_now", now, type_=jobs.c.not_before.type)
                conn.execute(
                    jobs.update()
                    .where(jobs.c.id.in_(run_now))
                    .values(
                        lane=LANE_MANUAL,
                        not_before=sa.case((jobs.c.not_before > at, at), else_=jobs.c.not_before),
                    )
                )
            inserted: dict[int, int] = {}
            if new:
                insert = db.insert_skipping_conflicts(
                    self.db.dialect,
                    jobs,
                    ["task_id"],
                    index_where=db.ACTIVE_JOB_PREDICATE,  # type: ignore[arg-type]
                )
                rows = [_job_row(t, trigger=trigger, lane=LANE_MANUAL, now=now) for t in new]
                returned = conn.execute(insert.returning(jobs.c.id, jobs.c.task_id), rows)
                inserted = {row.task_id: row.id for row in returned.all()}
            for task in new:
                if task.id in inserted:
                    results[task.id] = TaskRunResult(task.id, task.name, inserted[task.id])
            pending = [t for t in new if t.id not in inserted]
            if not pending:
                return [results[t.id] for t in ordered]
        raise FailedPrecondition(
            f"task {pending[0].id}: could not enqueue, try again", field="task_ids"
        )

    @_writes
    def enqueue(
        self,
        conn: Connection,
        task_ids: Sequence[int],
        trigger: str,
        now: dt.datetime,
        *,
        schedule_id: int | None = None,
        fire_time: dt.datetime | None = None,
        missed: bool = False,
        missed_fire_times: Iterable[dt.datetime] = (),
    ) -> EnqueueResult:
        """Enqueue ``task_ids`` in one transaction; one result per task.

        ``trigger`` is "MANUAL", "API" or "SCHEDULER". Manual and API runs keep the request
        order, run disabled tasks, promote a scheduler-queued job to the manual lane (its
        trigger kept), and make a queued retry waiting out its backoff ready now;
        they answer one result per entry of ``task_ids``, in order: a task named again is
        reported skipped (already queued, or already running) with the job of its first
        entry.
        A scheduler enqueue names ``schedule_id`` and ``fire_time``, skips disabled tasks,
        inserts in ascending task-name order, and records the fire (with each of
        ``missed_fire_times`` as missed); if that (schedule, fire time) is already recorded
        it returns the recorded result with duplicate_fire=True and changes nothing.
        ``missed`` records the fire as missed and enqueues nothing.

        Raises NotFound(field="task_ids") for an unknown task (nothing is enqueued), and
        NotFound(field="schedule_id") for an unknown schedule.
        """
        if trigger == "SCHEDULER":
            assert schedule_id is not None and fire_time is not None
            fire = FireRequest(
                schedule_id, fire_time, tuple(task_ids), missed, tuple(missed_fire_times)
            )
            (result,) = self._enqueue_fires(conn, [fire], now)
            if not result.schedule_found:
                raise NotFound(f"no schedule with id {schedule_id}", field="schedule_id")
            return EnqueueResult(result.runs, duplicate_fire=result.duplicate_fire)
        query = tasks.select().where(tasks.c.id.in_(task_ids))
        if self.db.dialect.skip_locked:
            # Hold off a concurrent DeleteTask (which locks the task FOR UPDATE first) until
            # this commits; a task it deleted meanwhile is simply not found.
            query = query.with_for_update(read=True, key_share=True)
        rows = conn.execute(query).all()
        by_id = {r._mapping["id"]: _task(r) for r in rows}
        missing = [t for t in task_ids if t not in by_id]
        if missing:
            raise NotFound(f"no task with id {missing[0]}", field="task_ids")
        ordered = [by_id[t] for t in dict.fromkeys(task_ids)]
        first = {r.task_id: r for r in self._enqueue_manual(conn, ordered, trigger, now)}
        runs: list[TaskRunResult] = []
        seen: set[int] = set()
        for task_id in task_ids:
            run = first[task_id]
            if task_id in seen:
                # A repeat of a task asked for earlier in the same request: that entry
                # enqueued (or found) its job, so this one finds it queued (or running).
                running = run.skip_reason == "ALREADY_RUNNING"
                reason = "ALREADY_RUNNING" if running else "ALREADY_QUEUED"
                run = TaskRunResult(run.task_id, run.task_name, run.job_id, reason)
            seen.add(task_id)
            runs.append(run)
        return EnqueueResult(tuple(runs))

    @_writes
    def enqueue_fires(
        self, conn: Connection, requests: Sequence[FireRequest], now: dt.datetime
    ) -> list[FireResult]:
        """Record scheduler fires in one transaction; one result per request, in order.

        Each fire is recorded once per (schedule, fire time), with each of its
        ``missed_fire_times`` as missed: a repeat returns the recorded result with
        duplicate_fire=True and changes nothing. A fire that is not ``missed`` enqueues the
        schedule's enabled tasks in ascending task-name order (a disabled task is skipped
        TASK_DISABLED, one with a queued or running job ALREADY_QUEUED / ALREADY_RUNNING);
        the fire's outcome is ENQUEUED when a job was created, SKIPPED otherwise, MISSED when
        ``missed``. A fire of a schedule that no longer exists gets schedule_found=False.
        """
        return self._enqueue_fires(conn, requests, now)

    def _enqueue_fires(
        self, conn: Connection, requests: Sequence[FireRequest], now: dt.datetime
    ) -> list[FireResult]:
        if not requests:
            return []
        all_task_ids = {t for r in requests if not r.missed for t in r.task_ids}
        by_id = {
            row.id: _FiringTask(*row)
            for row in conn.execute(_FIRING_TASKS, {"b_task_ids": list(all_task_ids)})
        }
        # The schedules after their tasks (LOCK_ORDER), FOR KEY SHARE on PostgreSQL: a
        # DeleteSchedule under way is waited for and its schedule is then not found. Read
        # unlocked, it was found, and the fire's row then failed its foreign key when the
        # delete committed: the whole call failed, every other schedule's fire with it.
        found_query = sa.select(schedules.c.id).where(
            schedules.c.id.in_({r.schedule_id for r in requests})
        )
        if self.db.dialect.skip_locked:
            found_query = found_query.order_by(schedules.c.id).with_for_update(
                read=True, key_share=True
            )
        found = set(conn.execute(found_query).scalars())
        live = [r for r in requests if r.schedule_id in found]
        recorded = self._record_fires_bulk(conn, live, by_id, now)
        out = []
        for request in requests:
            key = (request.schedule_id, request.fire_time)
            if request.schedule_id not in found:
                out.append(FireResult(request, (), schedule_found=False))
            elif key in recorded:
                # Its first request in this batch; a repeat is answered as a duplicate
                # from the row, as a repeat in a later call is.
                out.append(recorded.pop(key))
            else:
                out.append(self._recorded_fire(conn, request))
        return out

    def _record_fires_bulk(
        self,
        conn: Connection,
        requests: Sequence[FireRequest],
        tasks_by_id: dict[int, _FiringTask],
        now: dt.datetime,
    ) -> dict[tuple[int, dt.datetime], FireResult]:
        """Record new fires with a few set-based statements instead of several per fire.

        Claims every (schedule, fire time) at once (a fire already recorded is left out of
        the result, for the caller to answer from the recorded row), records the missed
        windows, inserts one job per due enabled task without a queued or running job (in
        fire order, task names ascending: that is the insertion order), and stores each
        fire's outcome.
        """
        if not requests:
            return {}
        bulk = Bulk(conn)
        recorded_at = bulk.when(now)
        returned = bulk.insert(
            "fires",
            _FIRE_COLUMNS,
            [
                (r.schedule_id, bulk.when(r.fire_time), "ENQUEUED", "[]", recorded_at)
                for r in requests
            ],
            suffix=_FIRE_CONFLICT,
            returning=("id", "schedule_id", "fire_time"),
        )
        fire_ids = {(sid, bulk.read_when(when)): fid for fid, sid, when in returned}
        # The first request of each (schedule, fire time) claimed it; one named again in
        # the same batch is a repeat (it decided the fire as SKIPPED, "already queued" by
        # the job the first one had just enqueued, and its outcome overwrote the first's).
        first: dict[tuple[int, dt.datetime], FireRequest] = {}
        for r in requests:
            if (r.schedule_id, r.fire_time) in fire_ids:
                first.setdefault((r.schedule_id, r.fire_time), r)
        claimed = list(first.values())
        missed_rows = [
            (r.schedule_id, bulk.when(t), "MISSED", "[]", recorded_at)
            for r in claimed
            for t in r.missed_fire_times
        ]
        if missed_rows:
            bulk.insert("fires", _FIRE_COLUMNS, missed_rows, suffix=_FIRE_CONFLICT)
            log.info("fires missed (catch-up policy)", extra={"count": len(missed_rows)})

        # Which tasks already have a queued or running job.
        wanted = {t for r in claimed if not r.missed for t in r.task_ids if t in tasks_by_id}
        active: dict[int, tuple[int, str]] = {}
        if wanted:
            active = {t: (row.id, row.status) for t, row in self._active_jobs(conn, wanted).items()}

        # Decide, in fire order and task-name order, which tasks get a new job.
        plan: list[tuple[FireRequest, list[tuple[_FiringTask, str | None]]]] = []
        new_rows: list[dict[str, Any]] = []
        new_for_task: set[int] = set()
        for r in claimed:
            decisions: list[tuple[_FiringTask, str | None]] = []
            if not r.missed:
                ordered = sorted(
                    (tasks_by_id[t] for t in r.task_ids if t in tasks_by_id),
                    key=lambda t: t.name,
                )
                for task in ordered:
                    if not task.enabled:
                        decisions.append((task, "TASK_DISABLED"))
                    elif task.id in active:
                        status = active[task.id][1]
                        reason = "ALREADY_RUNNING" if status == RUNNING else "ALREADY_QUEUED"
                        decisions.append((task, reason))
                    elif task.id in new_for_task:
                        decisions.append((task, "ALREADY_QUEUED"))
                    else:
                        new_for_task.add(task.id)
                        decisions.append((task, None))
                        new_rows.append(
                            _job_row(
                                task,
                                trigger="SCHEDULER",
                                lane=LANE_SCHEDULER,
                                now=now,
                                schedule_id=r.schedule_id,
                                fire_time=r.fire_time,
                            )
                        )
            plan.append((r, decisions))

        inserted: dict[int, int] = {}
        if new_rows:
            returned = bulk.insert(
                "jobs",
                _JOB_COLUMNS,
                [_driver_row(bulk, row) for row in new_rows],
                suffix=_ACTIVE_JOB_CONFLICT,
                returning=("id", "task_id"),
            )
            inserted = {task_id: job_id for job_id, task_id in returned}
            lost = [row["task_id"] for row in new_rows if row["task_id"] not in inserted]
            if lost:
                # Another transaction queued these tasks meanwhile (PostgreSQL): report that
                # job as the skip it is.
                for t, row in self._active_jobs(conn, lost).items():
                    active[t] = (row.id, row.status)

        out: dict[tuple[int, dt.datetime], FireResult] = {}
        updates = []
        for r, decisions in plan:
            runs = []
            for task, skip in decisions:
                if skip == "TASK_DISABLED":
                    job_id = 0
                elif task.id in inserted:
                    # The new job, or (ALREADY_QUEUED) the one an earlier fire of this
                    # batch created.
                    job_id = inserted[task.id]
                else:
                    job_id, status = active.get(task.id, (0, QUEUED))
                    if skip is None:
                        skip = "ALREADY_RUNNING" if status == RUNNING else "ALREADY_QUEUED"
                runs.append(TaskRunResult(task.id, task.name, job_id, skip))
            if r.missed:
                outcome = "MISSED"
            elif any(x.skip_reason is None for x in runs):
                outcome = "ENQUEUED"
            else:
                outcome = "SKIPPED"
            updates.append(
                (
                    outcome,
                    bulk.json([x.to_json() for x in runs]),
                    fire_ids[(r.schedule_id, r.fire_time)],
                )
            )
            out[(r.schedule_id, r.fire_time)] = FireResult(r, tuple(runs))
        bulk.execute_many("UPDATE fires SET outcome = {}, runs = {} WHERE id = {}", updates)
        return out

    def _recorded_fire(self, conn: Connection, request: FireRequest) -> FireResult:
        """The result stored for a fire that was already recorded (a repeat after a crash,
        or a second scheduler): nothing is enqueued again."""
        existing = (
            conn.execute(
                fires.select().where(
                    fires.c.schedule_id == request.schedule_id,
                    fires.c.fire_time == request.fire_time,
                )
            )
        ).one()
        log.info(
            "fire already recorded; not enqueued again",
            extra={"schedule_id": request.schedule_id, "fire_time": request.fire_time.isoformat()},
        )
        return FireResult(request, _fire(existing).runs, duplicate_fire=True)

    @_takes_jobs
    def claim_next_job(
        self,
        conn: Connection,
        worker_id: str,
        now: dt.datetime,
        lease_ttl_s: float,
        *,
        worker_lease_holder: str | None = None,
    ) -> tuple[JobRecord, TaskRecord] | None:
        """Take the next ready job and lease it to ``worker_id``; None when none is ready.

        Order: manual/API lane first, task_priority descending, enqueue time, insertion
        order. Ready means QUEUED and not_before unset or <= now. The job becomes RUNNING
        with a fresh lease token and lease_expires_at = now + lease_ttl_s. Never returns a
        job while another job is RUNNING (one job at a time): claims are serialized on the
        ``worker`` lease row. With ``worker_lease_holder``, also None unless that holder
        holds the ``worker`` lease (fencing a session that believes it is still active).
        """
        return self._claim(conn, worker_id, now, lease_ttl_s, worker_lease_holder)

    def _claim(
        self,
        conn: Connection,
        worker_id: str,
        now: dt.datetime,
        lease_ttl_s: float,
        worker_lease_holder: str | None,
    ) -> tuple[JobRecord, TaskRecord] | None:
        locking = self.db.dialect.skip_locked
        lease = (_PREPARED_LEASE_HOLDER_LOCKED if locking else _PREPARED_LEASE_HOLDER).first(
            conn, {}
        )
        holder = None if lease is None else lease["holder"]
        if worker_lease_holder is not None and holder != worker_lease_holder:
            return None
        row = (_PREPARED_START_NEXT_READY_LOCKED if locking else _PREPARED_START_NEXT_READY).first(
            conn,
            {
                "now": now,
                "b_started_at": now,
                "b_worker_id": worker_id,
                "b_token": uuid.uuid4().hex,
                "b_expires": now + dt.timedelta(seconds=lease_ttl_s),
            },
        )
        if row is None:
            return None
        return _job(row), _task({name: row[f"task__{name}"] for name in _TASK_FIELDS})

    @_reads
    def next_ready_time(self, conn: Connection, now: dt.datetime) -> dt.datetime | None:
        """When the next queued job becomes ready: ``now`` if one is ready, the earliest
        not_before in the future otherwise, None when nothing is queued."""
        ready = conn.scalar(sa.select(jobs.c.id).where(_ready(now)).limit(1))
        if ready is not None:
            return now
        value: dt.datetime | None = conn.scalar(
            sa.select(sa.func.min(jobs.c.not_before)).where(jobs.c.status == QUEUED)
        )
        return value

    @_writes
    def renew_job_lease(
        self, conn: Connection, job_id: int, token: str, now: dt.datetime, lease_ttl_s: float
    ) -> bool:
        """Extend a running job's lease to now + lease_ttl_s; False if the lease was lost."""
        expires = now + dt.timedelta(seconds=lease_ttl_s)
        result = conn.execute(
            _RENEW_JOB_LEASE, {"b_job_id": job_id, "b_token": token, "b_expires": expires}
        )
        return bool(result.rowcount == 1)

    @_writes
    def append_output(self, conn: Connection, job_id: int, token: str, text: str) -> bool:
        """Append ``text`` to a running job's output tail (kept to the last 4096 chars,
        NUL characters replaced: see :func:`_storable`)."""
        current = conn.scalar(
            sa.select(jobs.c.output_tail).where(
                jobs.c.id == job_id, jobs.c.lease_token == token, jobs.c.status == RUNNING
            )
        )
        if current is None:
            return False
        conn.execute(
            jobs.update().where(jobs.c.id == job_id).values(output_tail=_tail(current + text))
        )
        return True

    async def finish_job(
        self,
        job_id: int,
        token: str,
        status: str,
        error: str,
        output_tail: str,
        now: dt.datetime,
        *,
        auto_disable_count: int,
        claim_next_for: str | None = None,
        lease_ttl_s: float = 0.0,
    ) -> FinishResult:
        """Record a running job's outcome (``status`` SUCCEEDED, FAILED or ABORTED).

        Fenced by ``token``: when the lease was lost, the outcome is stored in late_outcome
        and nothing else changes (accepted=False); a repeat of the outcome already recorded
        under ``token`` (same status and error) changes nothing (accepted, ``repeat``). A
        failure with attempts left queues a retry (not ready before now + backoff), unless
        it is a scheduler-lane job whose task is disabled (it simply ends). A final
        failure of a scheduler-triggered job increments the task's
        consecutive_failure_count and, when it reaches ``auto_disable_count`` (> 0),
        disables the task. Any success resets the count.
        An interval schedule's next run is anchored to this finish. ``error`` is stored as
        :func:`job_error` gives it, ``output_tail`` as its last 4096 characters, a NUL
        character in either as U+FFFD: no text a job writes can make its outcome fail.

        With ``claim_next_for`` (a worker id), an accepted outcome is followed in the same
        transaction by :meth:`claim_next_job` for that worker (fenced by the ``worker``
        lease, leased for ``lease_ttl_s`` seconds): the result's ``next_job``.

        On PostgreSQL, a success with nothing to follow it and a next job to claim is one
        statement, its own transaction (:meth:`Database.write_one`; see
        :func:`_succeed_and_start_next`): a sixth of the round trips. Anything else (or
        that statement finding something else to do) is the transaction below.

        Raises:
            sqlalchemy.exc.DBAPIError, StorageError: the database failed or could not be
                reached. Nothing was recorded, unless the connection was lost while the
                commit was under way (as with any database): a report of the same outcome
                again is then a repeat.
        """
        error = job_error(error)
        if claim_next_for is not None and status == db.SUCCEEDED and self.db.dialect.skip_locked:
            done = await self.db.write_one(
                lambda conn: self._succeed_and_start_next(
                    conn, job_id, token, error, output_tail, now, claim_next_for, lease_ttl_s
                ),
                queue=True,
            )
            if done is not None:
                return done
        return await self.db.write(
            lambda conn: self._finish(
                conn,
                job_id,
                token,
                status,
                error,
                output_tail,
                now,
                auto_disable_count=auto_disable_count,
                claim_next_for=claim_next_for,
                lease_ttl_s=lease_ttl_s,
            ),
            queue=claim_next_for is not None,
        )

    def _succeed_and_start_next(
        self,
        conn: Connection,
        job_id: int,
        token: str,
        error: str,
        output_tail: str,
        now: dt.datetime,
        worker_id: str,
        lease_ttl_s: float,
    ) -> FinishResult | None:
        """:meth:`finish_job`'s one statement for a success (PostgreSQL); None when it
        recorded nothing (stale token, a repeat, or follow-ups to do) and so changed nothing."""
        row = _PREPARED_SUCCEED_AND_START_NEXT.first(
            conn,
            {
                "b_job_id": job_id,
                "b_token": token,
                "b_status": db.SUCCEEDED,
                "b_error": error,
                "b_tail": _tail(output_tail),
                "b_now": now,
                "now": now,
                "b_started_at": now,
                "b_worker_id": worker_id,
                "b_next_token": uuid.uuid4().hex,
                "b_expires": now + dt.timedelta(seconds=lease_ttl_s),
            },
        )
        assert row is not None  # one row, whatever happened
        if row["finished__id"] is None:
            return None
        finished = _job({name: row[f"finished__{name}"] for name in _JOB_FIELDS})
        started = None
        if row["id"] is not None:
            started = _job(row), _task({name: row[f"task__{name}"] for name in _TASK_FIELDS})
        return FinishResult(accepted=True, job=finished, next_job=started)

    def _finish(
        self,
        conn: Connection,
        job_id: int,
        token: str,
        status: str,
        error: str,
        output_tail: str,
        now: dt.datetime,
        *,
        auto_disable_count: int,
        claim_next_for: str | None,
        lease_ttl_s: float,
    ) -> FinishResult:
        """:meth:`finish_job` as one transaction, for every outcome and both databases."""
        values = {"b_status": status, "b_error": error, "b_tail": _tail(output_tail), "b_now": now}
        row = _PREPARED_FINISH_JOB.first(conn, {"b_job_id": job_id, "b_token": token, **values})
        if row is not None:
            finished, task = _finished(row)
            result = self._after_finish(
                conn, finished, task, status, error, now, auto_disable_count
            )
            if claim_next_for is None:
                return result
            claimed = self._claim(conn, claim_next_for, now, lease_ttl_s, claim_next_for)
            return replace(result, next_job=claimed)
        stored = conn.execute(jobs.select().where(jobs.c.id == job_id)).first()
        if (
            stored is not None
            and stored.lease_token == token
            and (stored.status, stored.error) == (status, error)
        ):
            # This outcome was recorded already: the worker's stream broke before the
            # OutcomeAck and it reports again. Nothing changes.
            return FinishResult(accepted=True, job=_job(stored), repeat=True)
        # The lease was lost (or the reaper recovered the job meanwhile): keep the
        # outcome for people to see, change nothing else.
        late = (f"{status} at {now.isoformat()}" + (f": {error}" if error else ""))[:2000]
        conn.execute(jobs.update().where(jobs.c.id == job_id).values(late_outcome=late))
        log.warning(
            "late outcome ignored: the job's lease was lost",
            extra={"job_id": job_id, "status": status},
        )
        job = None if stored is None else replace(_job(stored), late_outcome=late)
        return FinishResult(accepted=False, job=job)

    def _after_finish(
        self,
        conn: Connection,
        job: JobRecord,
        task: _FinishingTask | None,
        status: str,
        error: str,
        now: dt.datetime,
        auto_disable_count: int,
    ) -> FinishResult:
        """What follows a job's outcome, once ``job`` (as updated) is stored, by what its
        ``task`` was then: the task's failure count and auto-disable, a retry, an interval
        schedule's anchor."""
        if task is None:
            return FinishResult(accepted=True, job=job)
        retry: JobRecord | None = None
        disabled: TaskRecord | None = None
        if status == db.SUCCEEDED:
            if task.consecutive_failure_count:
                conn.execute(
                    tasks.update().where(tasks.c.id == task.id).values(consecutive_failure_count=0)
                )
        elif status == db.FAILED and job.attempt < task.max_attempts:
            if self._retries(conn, job, task):
                retry = self._queue_retry(conn, job, task, now)
        elif status == db.FAILED and job.trigger == "SCHEDULER":
            count = task.consecutive_failure_count + 1
            values: dict[str, Any] = {"consecutive_failure_count": count}
            if auto_disable_count > 0 and count >= auto_disable_count and task.enabled:
                values["enabled"] = False
                values["updated_at"] = now  # a change of the task's definition, by the service
                values["disabled_reason"] = (
                    f"disabled after {count} consecutive failures; last error: {error[:500]}"
                )
            updated = (
                conn.execute(
                    tasks.update().where(tasks.c.id == task.id).values(values).returning(*tasks.c)
                )
            ).one()
            if "enabled" in values:
                disabled = _task(updated)
        anchored = None
        if retry is None and job.schedule_id is not None:
            anchored = self._anchor_interval(conn, job.schedule_id, now)
        return FinishResult(
            accepted=True,
            job=job,
            retry=retry,
            disabled_task=disabled,
            anchored_next_run=anchored,
        )

    def _retries(self, conn: Connection, job: JobRecord, task: _FinishingTask) -> bool:
        """Whether a failed ``job`` with attempts left is retried: always, unless it is a
        scheduler-lane job (a scheduled run, not promoted by a manual run) and its task is
        disabled now. On PostgreSQL the task is read FOR KEY SHARE, so a DisableTask under
        way (FOR UPDATE) is waited for and seen, and one after it sees (and cancels) the
        retry."""
        if job.lane != LANE_SCHEDULER:
            return True
        query = sa.select(tasks.c.enabled).where(tasks.c.id == task.id)
        if self.db.dialect.skip_locked:
            query = query.with_for_update(read=True, key_share=True)
        return bool(conn.scalar(query))

    def _queue_retry(
        self, conn: Connection, job: JobRecord, task: _FinishingTask, now: dt.datetime
    ) -> JobRecord | None:
        """Queue the retry of failed ``job``, not ready before now + backoff; None when a
        manual run queued the task meanwhile (that job is the retry)."""
        delay = backoff_delay_s(
            job.attempt, task.backoff_base_seconds, task.backoff_cap_seconds, self.rng
        )
        retry_row = _job_row(
            task,
            trigger=job.trigger,
            lane=job.lane,
            now=now,
            attempt=job.attempt + 1,
            not_before=now + dt.timedelta(seconds=delay),
            schedule_id=job.schedule_id,
            fire_time=job.fire_time,
            retry_of_job_id=job.id,
        )
        try:
            with conn.begin_nested():
                inserted = conn.execute(jobs.insert().values(retry_row).returning(*jobs.c))
                return _job(inserted.one())
        except IntegrityError:
            return None

    def _anchor_interval(
        self, conn: Connection, schedule_id: int, finished_at: dt.datetime
    ) -> dt.datetime | None:
        """Interval schedules fire interval seconds after their previous run finished.

        Returns the schedule's new next run, or None when it is not an interval schedule.
        """
        row = (
            conn.execute(
                sa.select(schedules.c.interval_seconds, schedules.c.cron_expression).where(
                    schedules.c.id == schedule_id, schedules.c.enabled.is_(True)
                )
            )
        ).first()
        if row is None or row.cron_expression or row.interval_seconds <= 0:
            return None
        next_run = finished_at + dt.timedelta(seconds=row.interval_seconds)
        conn.execute(
            schedules.update().where(schedules.c.id == schedule_id).values(next_run_at=next_run)
        )
        return next_run

    @_writes
    def reap_expired_leases(
        self, conn: Connection, now: dt.datetime, *, auto_disable_count: int
    ) -> list[FinishResult]:
        """Fail every RUNNING job whose lease expired before ``now`` ("lease lost"), with
        the retry policy applied. Returns one result per recovered job; a job finished,
        renewed or reaped concurrently (another replica) is left alone."""
        out = []
        rows = (
            conn.execute(
                jobs.select().where(jobs.c.status == RUNNING, jobs.c.lease_expires_at < now)
            )
        ).all()
        # Not renewed meanwhile, nor finished or reaped by someone else.
        reap = (
            jobs.update()
            .where(_RUNNING_UNDER_TOKEN, jobs.c.lease_expires_at < now)
            .values(_FINISH_VALUES)
            .returning(*_FINISHED_JOB_COLUMNS)
        )
        for row in rows:
            job = _job(row)
            done = conn.execute(
                reap,
                {
                    "b_job_id": job.id,
                    "b_token": job.lease_token,
                    "b_status": db.FAILED,
                    "b_error": LEASE_LOST,
                    "b_tail": "",
                    "b_now": now,
                },
            ).first()
            if done is None:
                continue  # finished, renewed or reaped by someone else meanwhile
            reaped, task = _finished(done)
            result = self._after_finish(
                conn, reaped, task, db.FAILED, LEASE_LOST, now, auto_disable_count
            )
            log.warning(
                "lease lost; job failed",
                extra={"job_id": job.id, "task_id": job.task_id, "worker_id": job.worker_id},
            )
            out.append(result)
        return out

    @_writes
    def cancel_job(self, conn: Connection, job_id: int, now: dt.datetime) -> JobRecord:
        """Cancel a queued job (status CANCELLED) and return it.

        Raises NotFound(field="job_id"); FailedPrecondition when it is not queued.
        """
        result = conn.execute(
            jobs.update()
            .where(jobs.c.id == job_id, jobs.c.status == QUEUED)
            .values(status=db.CANCELLED, finished_at=now, error="cancelled")
            .returning(*jobs.c)
        )
        row = result.first()
        if row is not None:
            return _job(row)
        status = conn.scalar(sa.select(jobs.c.status).where(jobs.c.id == job_id))
        if status is None:
            raise NotFound(f"no job with id {job_id}", field="job_id")
        raise FailedPrecondition(
            f"job {job_id} is {status}, not QUEUED; abort a running job with AbortTasks",
            field="job_id",
        )

    @_writes
    def abort_tasks(
        self, conn: Connection, task_ids: Sequence[int], now: dt.datetime
    ) -> list[tuple[int, int, str]]:
        """For each task: cancel its queued job or flag its running job for abort.

        Returns (task_id, job_id, action) in request order; action is "CANCELLED",
        "ABORT_REQUESTED" or "NONE" (job_id 0). Raises NotFound(field="task_ids").
        """
        out: list[tuple[int, int, str]] = []
        found = set(conn.execute(sa.select(tasks.c.id).where(tasks.c.id.in_(task_ids))).scalars())
        missing = [t for t in task_ids if t not in found]
        if missing:
            raise NotFound(f"no task with id {missing[0]}", field="task_ids")
        # Every active job locked at once, in job id order: locked one by one in request
        # order, two aborts naming the same tasks in other orders deadlocked (PostgreSQL
        # failed one of them after a second: UNAVAILABLE).
        active = self._active_jobs(conn, set(task_ids))
        cancelled: set[int] = set()
        for task_id in task_ids:
            row = active.get(task_id)
            if row is None or task_id in cancelled:
                out.append((task_id, 0, "NONE"))
            elif row.status == QUEUED:
                conn.execute(
                    jobs.update()
                    .where(jobs.c.id == row.id)
                    .values(status=db.CANCELLED, finished_at=now, error="aborted by operator")
                )
                cancelled.add(task_id)
                out.append((task_id, row.id, "CANCELLED"))
            else:
                conn.execute(jobs.update().where(jobs.c.id == row.id).values(abort_requested=True))
                out.append((task_id, row.id, "ABORT_REQUESTED"))
        return out

    @_reads
    def get_job(self, conn: Connection, job_id: int) -> JobRecord:
        """The job with ``job_id``. Raises NotFound(field="job_id")."""
        row = conn.execute(jobs.select().where(jobs.c.id == job_id)).first()
        if row is None:
            raise NotFound(f"no job with id {job_id}", field="job_id")
        return _job(row)

    @_reads
    def list_jobs(
        self,
        conn: Connection,
        *,
        limit: int,
        before_id: int | None = None,
        task_id: int | None = None,
        statuses: Sequence[str] = (),
        schedule_id: int | None = None,
    ) -> list[JobRecord]:
        """Up to ``limit`` jobs, newest (highest id) first, with id < before_id."""
        query = jobs.select()
        if before_id is not None:
            query = query.where(jobs.c.id < before_id)
        if task_id is not None:
            query = query.where(jobs.c.task_id == task_id)
        if statuses:
            query = query.where(jobs.c.status.in_(statuses))
        if schedule_id is not None:
            query = query.where(jobs.c.schedule_id == schedule_id)
        rows = conn.execute(query.order_by(jobs.c.id.desc()).limit(limit)).all()
        return [_job(r) for r in rows]

    @_reads
    def queued_jobs_in_order(self, conn: Connection, now: dt.datetime) -> list[JobRecord]:
        """Every ready queued job in the order the worker will take them."""
        query = _queue_order(jobs.select().where(_ready(now)))
        rows = conn.execute(query).all()
        return [_job(r) for r in rows]

    # ------------------------------------------------------------------ fires

    @_reads
    def list_fires(
        self, conn: Connection, schedule_id: int, limit: int, before: dt.datetime | None = None
    ) -> list[FireRecord]:
        """Up to ``limit`` fires of a schedule, newest fire time first, before ``before``.

        Raises NotFound(field="schedule_id").
        """
        query = fires.select().where(fires.c.schedule_id == schedule_id)
        if before is not None:
            query = query.where(fires.c.fire_time < before)
        exists = conn.scalar(sa.select(schedules.c.id).where(schedules.c.id == schedule_id))
        if exists is None:
            raise NotFound(f"no schedule with id {schedule_id}", field="schedule_id")
        rows = conn.execute(query.order_by(fires.c.fire_time.desc()).limit(limit)).all()
        return [_fire(r) for r in rows]

    # ----------------------------------------------------------------- leases

    @_writes
    def acquire_lease(
        self, conn: Connection, name: str, holder: str, now: dt.datetime, ttl_s: float
    ) -> int | None:
        """Take or renew the lease ``name`` ("scheduler" or "worker") for ``holder``.

        One conditional UPDATE: succeeds when ``holder`` already holds it or it expired.
        Returns the fencing token (incremented on every change of holder), or None when
        someone else holds it.
        """
        expires = now + dt.timedelta(seconds=ttl_s)
        row = conn.execute(sa.select(leases).where(leases.c.name == name)).first()
        if row is None:
            raise InvalidArgument(f"unknown lease {name!r}", field="name")
        m = row._mapping
        if m["holder"] == holder:
            token = m["token"]
            cond = leases.c.holder == holder
        else:
            token = m["token"] + 1
            cond = sa.and_(leases.c.expires_at < now, leases.c.token == m["token"])
        result = conn.execute(
            leases.update()
            .where(leases.c.name == name, cond)
            .values(holder=holder, token=token, expires_at=expires)
        )
        return int(token) if result.rowcount == 1 else None

    @_writes
    def release_lease(self, conn: Connection, name: str, holder: str, now: dt.datetime) -> None:
        """Give up the lease ``name`` if ``holder`` holds it (it expires at once)."""
        conn.execute(
            leases.update()
            .where(leases.c.name == name, leases.c.holder == holder)
            .values(expires_at=now - dt.timedelta(seconds=1))
        )

    # ------------------------------------------------------- metrics, retention

    @_reads
    def queue_depth_by_lane(self, conn: Connection) -> dict[int, int]:
        """Number of QUEUED jobs (ready or not) per lane; lanes without jobs are absent."""
        query = (
            sa.select(jobs.c.lane, sa.func.count())
            .where(jobs.c.status == QUEUED)
            .group_by(jobs.c.lane)
        )
        rows = conn.execute(query).all()
        return {int(lane): int(count) for lane, count in rows}

    @_reads
    def consecutive_failures(self, conn: Connection) -> dict[str, int]:
        """Every task's consecutive_failure_count, by task name."""
        query = sa.select(tasks.c.name, tasks.c.consecutive_failure_count)
        rows = conn.execute(query).all()
        return {str(name): int(count) for name, count in rows}

    @_reads
    def running_job_task(self, conn: Connection, job_id: int, token: str) -> TaskRecord | None:
        """The task of job ``job_id`` when it is RUNNING under lease ``token``; else None."""
        query = (
            tasks.select()
            .join(jobs, jobs.c.task_id == tasks.c.id)
            .where(jobs.c.id == job_id, jobs.c.lease_token == token, jobs.c.status == RUNNING)
        )
        row = conn.execute(query).first()
        return None if row is None else _task(row)

    @_reads
    def fire_window(
        self, conn: Connection, schedule_id: int, fire_time: dt.datetime
    ) -> tuple[str, dt.datetime | None]:
        """The window a scheduled job was fired for, as its job process is told it.

        Returns:
            tuple[str, dt.datetime | None]: the schedule's name (``""`` when it is gone),
            and the latest fire time recorded for it before ``fire_time`` (UTC; None when
            there is none: its first fire, or the record was purged).
        """
        name = conn.scalar(sa.select(schedules.c.name).where(schedules.c.id == schedule_id))
        previous = conn.scalar(
            sa.select(fires.c.fire_time)
            .where(fires.c.schedule_id == schedule_id, fires.c.fire_time < fire_time)
            .order_by(fires.c.fire_time.desc())
            .limit(1)
        )
        return name or "", previous

    async def purge_history(self, before: dt.datetime, batch: int = 1000) -> tuple[int, int]:
        """Delete ended jobs that finished before ``before`` and fires whose fire time is
        before it, ``batch`` rows per transaction (writers are never blocked for long).

        Queued and running jobs are never deleted. Returns (jobs deleted, fires deleted).
        """
        deleted = [0, 0]
        for i, (table, cond) in enumerate(
            (
                (jobs, sa.and_(jobs.c.status.in_(db.FINAL_STATES), jobs.c.finished_at < before)),
                (fires, fires.c.fire_time < before),
            )
        ):
            while True:
                ids = await self.db.write(functools.partial(_purge_batch, table, cond, batch))
                deleted[i] += len(ids)
                if len(ids) < batch:
                    break
        return deleted[0], deleted[1]
