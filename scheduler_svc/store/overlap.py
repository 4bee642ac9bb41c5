"""Overlap policies: what one fire does for one task while a job of that task is queued or
running, and what a REPLACE does to the running job.

:func:`decide` is the whole rule, a pure function of the policy, the task's active jobs
(counted as a :class:`TaskLoad`) and the cap (the schedule's ``max_buffered``); every
path that enqueues a schedule's fire (the scheduler loop's fires, TriggerSchedule, a
backfill) goes through :func:`scheduler_svc.store.fires.enqueue_fires`, which calls it
with the fire's policy (:attr:`FireRequest.overlap_policy`, else the schedule's).
:func:`request_replacements` asks for the abort of the jobs REPLACE replaces.

The rules, per task (jobs that run alongside, ALLOW, are left out of the task's active
jobs for every policy but their own):

- SKIP: a task with an active job is skipped (already queued, or running);
- BUFFER_ONE: a task with a running job and none queued gets a job that waits (WAIT);
  with one queued already, it is skipped (already queued);
- BUFFER_ALL: a task with an active job gets a job that waits, while fewer than the cap
  are queued; beyond that it is skipped (buffer full);
- REPLACE: a task with a running job and none queued gets a job that waits, and the
  running job is asked to abort (ended ABORTED with "replaced by the fire of <fire
  time>", never retried); with a job queued already, it is skipped (already queued);
- ALLOW: a fire gets its own job, which runs alongside the others (ALLOW), while fewer
  than the cap of the task's ALLOW jobs are queued; beyond that it is skipped (buffer
  full), so that a task slower than its schedule does not queue jobs without end;
- a task with no active job gets a plain job, whatever the policy.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from scheduler_svc.schema import jobs
from scheduler_svc.values import ACTIVE_STATES, JobStatus, OverlapPolicy, QueuedBehind, SkipReason

#: A fire's task outcome (``TaskRunResult.overlap``): its new job waits behind the
#: task's running job, or it replaced the running job.
BUFFERED = "BUFFERED"
REPLACED = "REPLACED"


@dataclass(frozen=True)
class ActiveJob:
    """One active job of a task, as :func:`decide` sees it: ``id`` (a negative id stands
    for a job planned earlier in the same call, not inserted yet), ``status`` QUEUED or
    RUNNING, ``overlap`` its :class:`~scheduler_svc.values.QueuedBehind`."""

    id: int
    status: str
    overlap: str


@dataclass(frozen=True)
class Decision:
    """What one fire does for one task.

    ``skip`` None: a new job of kind ``behind``; else the reason it gets none and ``job_id``
    the job it was skipped for. ``outcome`` is BUFFERED, REPLACED or empty;
    ``replace_job_id`` the running job to abort (REPLACE)."""

    skip: SkipReason | None = None
    job_id: int = 0
    behind: QueuedBehind = QueuedBehind.PLAIN
    outcome: str = ""
    replace_job_id: int = 0


class TaskLoad:
    """A task's active jobs as :func:`decide` needs them, kept as counts so that a call
    deciding many fires of one task (a backfill of 10,000 windows) costs each fire the
    same, however many jobs earlier fires queued.

    Jobs that run alongside (ALLOW) are counted apart: they are left out for every policy
    but their own. Among the others, the first job is the first running one, else the
    first queued one (stored jobs in id order before those planned in the call); the last
    queued one is the most recently added."""

    __slots__ = (
        "allow_queued",
        "first_queued",
        "last_allow_queued",
        "last_queued",
        "queued",
        "running",
    )

    def __init__(self, active: Sequence[ActiveJob] = ()) -> None:
        """The load of ``active`` (any order)."""
        #: The first running job (not ALLOW); None: none runs.
        self.running: ActiveJob | None = None
        #: The first queued job (not ALLOW); None: none is queued.
        self.first_queued: ActiveJob | None = None
        #: How many jobs (not ALLOW) are queued, and the id of the last one (0: none).
        self.queued = 0
        self.last_queued = 0
        #: How many ALLOW jobs are queued, and the id of the last one (0: none).
        self.allow_queued = 0
        self.last_allow_queued = 0
        for job in sorted(active, key=_order):
            self.add(job)

    @property
    def first(self) -> ActiveJob | None:
        """The job a SKIP is skipped for: the first running job, else the first queued."""
        return self.running or self.first_queued

    def add_counted(
        self, status: str, alongside: bool, count: int, first_id: int, last_id: int
    ) -> None:
        """Count ``count`` stored jobs of one ``status`` and kind (``alongside``: ALLOW),
        ids ``first_id`` to ``last_id``, as :meth:`add` would one by one in id order."""
        if alongside:
            if status != JobStatus.RUNNING:
                self.allow_queued += count
                self.last_allow_queued = max(self.last_allow_queued, last_id)
        elif status == JobStatus.RUNNING:
            self.running = ActiveJob(first_id, status, QueuedBehind.PLAIN)
        else:
            self.queued += count
            self.last_queued = max(self.last_queued, last_id)
            self.first_queued = ActiveJob(first_id, status, QueuedBehind.PLAIN)

    def add(self, job: ActiveJob) -> None:
        """Count ``job``, which comes after every job counted so far in :func:`_order`
        (a job planned in the call comes after every stored one)."""
        if job.overlap == QueuedBehind.ALLOW:
            if job.status != JobStatus.RUNNING:
                self.allow_queued += 1
                self.last_allow_queued = job.id
        elif job.status == JobStatus.RUNNING:
            self.running = self.running or job
        else:
            self.queued += 1
            self.last_queued = job.id
            self.first_queued = self.first_queued or job


def counted_loads(conn: Connection, task_ids: Collection[int]) -> dict[int, TaskLoad]:
    """The load of each of ``task_ids`` (an empty one for a task with no active job) from
    one aggregate per task, status and kind: a task with thousands of queued jobs (a
    BUFFER_ALL backfill) costs a fire a few rows. It locks nothing: for a database whose
    one writer serializes the transactions (SQLite); where rows are locked, the fire path
    reads and locks the active jobs themselves (:func:`.locks.all_active_jobs`)."""
    alongside = (jobs.c.overlap == QueuedBehind.ALLOW).label("alongside")
    query = (
        sa.select(
            jobs.c.task_id,
            jobs.c.status,
            alongside,
            sa.func.count().label("n"),
            sa.func.min(jobs.c.id).label("first_id"),
            sa.func.max(jobs.c.id).label("last_id"),
        )
        .where(jobs.c.status.in_(ACTIVE_STATES), jobs.c.task_id.in_(list(task_ids)))
        .group_by(jobs.c.task_id, jobs.c.status, alongside)
    )
    out = {t: TaskLoad() for t in task_ids}
    for row in conn.execute(query):
        out[row.task_id].add_counted(
            row.status, bool(row.alongside), row.n, row.first_id, row.last_id
        )
    return out


def decide(policy: OverlapPolicy | str, active: Sequence[ActiveJob], cap: int) -> Decision:
    """What a fire under ``policy`` does for a task whose active jobs are ``active`` (any
    order; ALLOW jobs among them are ignored unless the policy is ALLOW). ``cap``: how many
    jobs of the task may be queued under BUFFER_ALL, and how many of its ALLOW jobs under
    ALLOW (>= 1). Pure: no I/O. See :func:`decide_load`."""
    return decide_load(policy, TaskLoad(active), cap)


def decide_load(policy: OverlapPolicy | str, load: TaskLoad, cap: int) -> Decision:
    """:func:`decide` for a task's :class:`TaskLoad`, in constant time.

    Unknown policies are taken as SKIP (the service refuses them on input)."""
    if policy == OverlapPolicy.ALLOW:
        if load.allow_queued < cap:
            return Decision(behind=QueuedBehind.ALLOW)
        return Decision(SkipReason.BUFFER_FULL, load.last_allow_queued)
    first = load.first
    if first is None:
        return Decision()
    if policy == OverlapPolicy.BUFFER_ALL:
        if load.queued < cap:
            return Decision(behind=QueuedBehind.WAIT, outcome=BUFFERED)
        return Decision(SkipReason.BUFFER_FULL, load.last_queued)
    if policy in (OverlapPolicy.BUFFER_ONE, OverlapPolicy.REPLACE) and load.first_queued:
        return Decision(SkipReason.ALREADY_QUEUED, load.first_queued.id)
    if policy == OverlapPolicy.BUFFER_ONE:
        return Decision(behind=QueuedBehind.WAIT, outcome=BUFFERED)
    if policy == OverlapPolicy.REPLACE:
        assert load.running is not None  # active, none queued: one runs
        return Decision(behind=QueuedBehind.WAIT, outcome=REPLACED, replace_job_id=load.running.id)
    return Decision(SkipReason.active(first.status), first.id)


def _order(job: ActiveJob) -> tuple[bool, bool, int]:
    """Running first, then stored jobs in id order, then those planned in this call."""
    return (job.status != JobStatus.RUNNING, job.id < 0, abs(job.id))


def replaced_reason(fire_time: dt.datetime) -> str:
    """The error of a job replaced by the fire of ``fire_time`` (aware)."""
    return f"replaced by the fire of {fire_time.astimezone(dt.UTC).isoformat()}"


def request_replacements(conn: Connection, replacements: Sequence[tuple[int, str]]) -> None:
    """Ask each running job of (job id, reason) to abort, for the reason given: its worker
    is told at its next heartbeat (or at once by the caller's stream, see
    :meth:`scheduler_svc.app.App.enqueue_fires`) and reports it ABORTED with that reason as
    its error. The reason is kept in the running job's ``error`` until its outcome
    replaces it. A job no longer running is left alone."""
    for job_id, reason in replacements:
        conn.execute(
            jobs.update()
            .where(jobs.c.id == job_id, jobs.c.status == JobStatus.RUNNING)
            .values(abort_requested=True, error=reason)
        )
